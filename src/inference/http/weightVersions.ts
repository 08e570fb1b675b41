/**
 * Weight labels as model servers report them. trajflow labels the weights it loads
 * `<version>@<lineage>`: the policy version, and a key of the run's checkpoint folder, so that a
 * server outliving a run (or shared by two runs) can never pass one run's weights off as another
 * run's version of the same number. A plain `<version>` (a server started labelled with a number)
 * is a trajflow version with no lineage. Both servers hand labels back as strings, over spans of
 * the output (`[{version, start, end}]`: tokens start..end-1 were sampled by that label).
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { z } from 'zod';

/** One span of output tokens and the weights label that sampled them (same shape in vLLM and SGLang). */
export const WeightVersionSpanSchema = z.object({
  version: z.string(),
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});

export type WeightVersionSpan = z.infer<typeof WeightVersionSpanSchema>;

/** Which weights a label names: a policy version of one run's checkpoints (lineage '' when unnamed). */
export interface WeightsLabel {
  version: number;
  lineage: string;
}

const LABEL = /^(\d+)(?:@([0-9a-f]{16}))?$/;

/** The lineage of a checkpoint: a key of the folder that holds its run's versions. */
export function lineageOf(checkpoint: string): string {
  return createHash('sha256')
    .update(path.dirname(path.resolve(checkpoint)))
    .digest('hex')
    .slice(0, 16);
}

/** The label trajflow loads `checkpoint` under. */
export function formatLabel({ version, lineage }: WeightsLabel): string {
  return lineage ? `${version}@${lineage}` : String(version);
}

/** The weights a label names, or undefined (a server's initial `"default"`, or anything not trajflow's). */
export function parseLabel(label: string | null | undefined): WeightsLabel | undefined {
  const match = label === null || label === undefined ? null : LABEL.exec(label);
  return match ? { version: Number(match[1]), lineage: match[2] ?? '' } : undefined;
}

/** Why `label` is not a trajflow label, or undefined if it is one. */
export function labelProblem(label: string): string | undefined {
  return parseLabel(label) === undefined
    ? `weight version ${JSON.stringify(label)} is not a trajflow policy version (an integer, or <version>@<lineage>): load weights through trajflow, or start the server labelled with one`
    : undefined;
}

/** Why some span's label is not a trajflow label, or undefined if every one is. */
export function spanLabelsProblem(spans: readonly WeightVersionSpan[]): string | undefined {
  return spans.map((span) => labelProblem(span.version)).find(Boolean);
}

/** Why `spans` do not label exactly tokens 0..tokenCount-1 in order, or undefined if they do. */
export function spansProblem(spans: readonly WeightVersionSpan[], tokenCount: number): string | undefined {
  if (spans.length === 0) return 'no weight version spans';
  let next = 0;
  for (const [i, span] of spans.entries()) {
    if (span.start !== next) return `span ${i} starts at token ${span.start}, expected ${next}`;
    if (span.end < span.start) return `span ${i} ends (${span.end}) before it starts (${span.start})`;
    next = span.end;
  }
  return next === tokenCount ? undefined : `spans end at token ${next}, but there are ${tokenCount} output tokens`;
}

/**
 * The version of each output token, and every lineage that sampled some (the first span's too).
 * Call only on spans that passed `spansProblem` and `labelProblem`; with no tokens, the first
 * span's version (the one that would have sampled).
 */
export function tokenVersions(spans: readonly WeightVersionSpan[]): { first: number; perToken: number[]; lineages: string[] } {
  const perToken: number[] = [];
  const lineages = new Set<string>();
  for (const span of spans) {
    const { version, lineage } = parseLabel(span.version)!;
    if (span.end > span.start || lineages.size === 0) lineages.add(lineage);
    for (let t = span.start; t < span.end; t++) perToken.push(version);
  }
  return { first: perToken[0] ?? parseLabel(spans[0].version)!.version, perToken, lineages: [...lineages] };
}

/**
 * The versions of a completion sampled under a LoRA adapter: the adapter's, for every token. The
 * servers' spans then name the base model's label, not the adapter's; a request runs on one
 * adapter from its first token to its last, so the adapter it named is exact.
 */
export function adapterTokenVersions(adapter: WeightsLabel, tokenCount: number): { first: number; perToken: number[]; lineages: string[] } {
  return { first: adapter.version, perToken: new Array<number>(tokenCount).fill(adapter.version), lineages: [adapter.lineage] };
}
