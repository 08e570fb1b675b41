/**
 * Weight versions as model servers report them. trajflow labels the weights it loads with the
 * policy version as a decimal string; both servers hand labels back as strings, over spans of the
 * output (`[{version, start, end}]`: tokens start..end-1 were sampled by `version`).
 */
import { z } from 'zod';

/** One span of output tokens and the weights label that sampled them (same shape in vLLM and SGLang). */
export const WeightVersionSpanSchema = z.object({
  version: z.string(),
  start: z.number().int().nonnegative(),
  end: z.number().int().nonnegative(),
});

export type WeightVersionSpan = z.infer<typeof WeightVersionSpanSchema>;

/** The policy version a label names, or undefined (a server's initial `"default"`, or anything not trajflow's). */
export function versionFromLabel(label: string | null | undefined): number | undefined {
  return label !== null && label !== undefined && /^\d+$/.test(label) ? Number(label) : undefined;
}

/** Why `label` is not a trajflow version, or undefined if it is one. */
export function labelProblem(label: string): string | undefined {
  return versionFromLabel(label) === undefined
    ? `weight version ${JSON.stringify(label)} is not a trajflow policy version (an integer): load weights through trajflow, or start the server labelled with one`
    : undefined;
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
 * The version of each output token. Call only on spans that passed `spansProblem` and
 * `labelProblem`; with no tokens, the first span's version (the one that would have sampled).
 */
export function tokenVersions(spans: readonly WeightVersionSpan[]): { first: number; perToken: number[] } {
  const perToken: number[] = [];
  for (const span of spans) {
    const version = Number(span.version);
    for (let t = span.start; t < span.end; t++) perToken.push(version);
  }
  return { first: perToken[0] ?? Number(spans[0].version), perToken };
}
