/**
 * LoRA adapters on model servers, the parts both server kinds share. A LoRA run's checkpoints are
 * peft adapter directories (../../store/loraAdapter.ts); a server keeps its base model and loads
 * each version as a runtime adapter named by the version's label (`<version>@<lineage>`,
 * ./weightVersions.ts), and a generate request names the adapter that samples it.
 *
 * vLLM 0.32 and SGLang 0.5 both list their adapters on `GET /v1/models` (OpenAI's model list):
 * the base model, then one card per adapter with `parent` (the base) and `root` (its directory).
 */
import { z } from 'zod';
import type { ServerConnection } from './backend';
import { parseAnswer } from './serverCall';
import { formatLabel, parseLabel, type WeightsLabel } from './weightVersions';

/**
 * Most adapters trajflow keeps loaded on one server. Local servers are started with room for as
 * many (client/modelServers.ts); SGLang refuses a load beyond its `--max-loaded-loras`.
 */
export const MAX_LOADED_ADAPTERS = 4;

const ModelListSchema = z.looseObject({
  data: z.array(z.looseObject({ id: z.string(), parent: z.string().nullish() })),
});

/** The adapters `server` holds under trajflow labels (others' adapters, and the base model, are left out). */
export async function listAdapters(server: ServerConnection, timeoutMs: number): Promise<WeightsLabel[]> {
  const endpoint = '/v1/models';
  const models = parseAnswer(ModelListSchema, await server.send({ method: 'GET', endpoint }, { timeoutMs }), server.url, endpoint);
  return models.data.flatMap((card) => {
    const label = card.parent ? parseLabel(card.id) : undefined;
    return label ? [label] : [];
  });
}

/** Whether `a` and `b` name the same adapter. */
export function sameAdapter(a: WeightsLabel, b: WeightsLabel): boolean {
  return formatLabel(a) === formatLabel(b);
}

/**
 * Which of the `held` adapters to unload so that `incoming` fits within `max`: other runs' first
 * (a server that outlived its run), then the oldest versions; never one that a request of this
 * process is using (`inUse`), so there may be fewer than needed.
 */
export function adaptersToUnload(
  held: readonly WeightsLabel[],
  incoming: WeightsLabel,
  inUse: (adapter: WeightsLabel) => boolean,
  max = MAX_LOADED_ADAPTERS,
): WeightsLabel[] {
  const others = held.filter((adapter) => !sameAdapter(adapter, incoming));
  const excess = others.length + 1 - max;
  if (excess <= 0) return [];
  const oldestFirst = others
    .filter((adapter) => !inUse(adapter))
    .sort((a, b) => Number(a.lineage === incoming.lineage) - Number(b.lineage === incoming.lineage) || a.version - b.version);
  return oldestFirst.slice(0, excess);
}

/** The adapter a request for `target` should name: the newest `held` of its lineage, at its version or later. */
export function adapterServing(held: readonly WeightsLabel[] | undefined, target: WeightsLabel): WeightsLabel | undefined {
  let best: WeightsLabel | undefined;
  for (const adapter of held ?? []) {
    if (adapter.lineage === target.lineage && adapter.version >= target.version && (!best || adapter.version > best.version)) best = adapter;
  }
  return best;
}
