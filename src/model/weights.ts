/**
 * The policy's parameters as plain Float32Arrays (host memory, cheap to post between threads):
 * their names and shapes, seeded initialization, and the one-file checkpoint format.
 *
 * Checkpoint file = one JSON header line (format, config, policy version, each tensor's name, shape
 * and byte offset, the data's length and sha256) + '\n' + every tensor's values as little-endian
 * float32, in header order. A trainer's checkpoint also holds its optimizer state: the header says
 * `optimizer: {step}` and lists Adam's two moment tensors per parameter after the parameters;
 * readers of weights skip them. A torn or corrupt file (cut short, or its data not matching the
 * sha256) is refused with a CorruptFileError.
 */
import { readFile } from 'node:fs/promises';
import { createRng, hashString, type Rng } from '../core/random';
import { CorruptFileError, sha256Hex, writeFileAtomically } from '../store/files';
import { configDifferences, configProblem, type ModelConfig } from './config';

export interface ModelWeights {
  config: ModelConfig;
  params: Readonly<Record<string, Float32Array>>;
}

export interface Checkpoint {
  weights: ModelWeights;
  policyVersion: number;
}

/** Adam's state: optimizer steps taken, and the first and second moment estimates per parameter. */
export interface OptimizerState {
  step: number;
  m: Readonly<Record<string, Float32Array>>;
  v: Readonly<Record<string, Float32Array>>;
}

export interface TrainerCheckpoint extends Checkpoint {
  optimizer?: OptimizerState;
}

/** How a parameter starts: a constant, or normal(0, std). */
type Init = { kind: 'const'; value: number } | { kind: 'normal'; std: number };

export interface ParamSpec {
  name: string;
  shape: readonly number[];
  init: Init;
}

/** Name of a parameter of transformer block `layer`. */
export function layerParam(layer: number, name: string): string {
  return `layers.${layer}.${name}`;
}

/**
 * Every parameter, in checkpoint order. GPT-2 initialization: normal(0, 0.02), with the two
 * projections that write into the residual stream scaled by 1/sqrt(2 nLayers) so its variance stays
 * O(1) with depth; LayerNorms start as identity. Linear layers have no biases.
 */
export function parameterSpecs(config: ModelConfig): ParamSpec[] {
  const { vocabSize: V, dModel: D, dFF: F, nLayers, maxContext } = config;
  const normal = (std: number): Init => ({ kind: 'normal', std });
  const ones: Init = { kind: 'const', value: 1 };
  const zeros: Init = { kind: 'const', value: 0 };
  const residualStd = 0.02 / Math.sqrt(2 * nLayers);
  const specs: ParamSpec[] = [
    { name: 'embed.tokens', shape: [V, D], init: normal(0.02) },
    { name: 'embed.positions', shape: [maxContext, D], init: normal(0.02) },
  ];
  for (let l = 0; l < nLayers; l++) {
    specs.push(
      { name: layerParam(l, 'ln1.gain'), shape: [D], init: ones },
      { name: layerParam(l, 'ln1.bias'), shape: [D], init: zeros },
      // Columns: [q | k | v], each head-major (head h owns columns h*headDim .. (h+1)*headDim-1).
      { name: layerParam(l, 'attn.wqkv'), shape: [D, 3 * D], init: normal(0.02) },
      { name: layerParam(l, 'attn.wo'), shape: [D, D], init: normal(residualStd) },
      { name: layerParam(l, 'ln2.gain'), shape: [D], init: ones },
      { name: layerParam(l, 'ln2.bias'), shape: [D], init: zeros },
      { name: layerParam(l, 'mlp.w1'), shape: [D, F], init: normal(0.02) },
      { name: layerParam(l, 'mlp.w2'), shape: [F, D], init: normal(residualStd) },
    );
  }
  specs.push(
    { name: 'final.ln.gain', shape: [D], init: ones },
    { name: 'final.ln.bias', shape: [D], init: zeros },
    // Untied from embed.tokens: a [D, V] matrix used as is, so no transpose in forward or backward.
    { name: 'head', shape: [D, V], init: normal(0.02) },
  );
  return specs;
}

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

/**
 * Fresh weights, a pure function of (config, seed). Each tensor draws from its own stream seeded by
 * hash("seed:name"), so adding a layer does not reshuffle the others.
 */
export function initWeights(config: ModelConfig, seed: number): ModelWeights {
  const params: Record<string, Float32Array> = {};
  for (const { name, shape, init } of parameterSpecs(config)) {
    const values = new Float32Array(size(shape));
    if (init.kind === 'const') values.fill(init.value);
    else fillNormal(values, init.std, createRng(hashString(`${seed}:${name}`)));
    params[name] = values;
  }
  return { config, params };
}

/** Box-Muller: two uniforms -> two independent N(0, std^2) draws; 1 - u keeps log's argument in (0, 1]. */
function fillNormal(out: Float32Array, std: number, rng: Rng): void {
  for (let i = 0; i < out.length; i += 2) {
    const radius = std * Math.sqrt(-2 * Math.log(1 - rng()));
    const angle = 2 * Math.PI * rng();
    out[i] = radius * Math.cos(angle);
    if (i + 1 < out.length) out[i + 1] = radius * Math.sin(angle);
  }
}

/** Why `weights` does not fit its config (missing, extra or wrongly sized tensors), or undefined. */
export function weightsProblem(weights: ModelWeights): string | undefined {
  const configIssue = configProblem(weights.config);
  if (configIssue) return `bad config: ${configIssue}`;
  return tensorsProblem(weights.params, parameterSpecs(weights.config));
}

/** Why `tensors` is not exactly one Float32Array per spec, of the spec's size, or undefined. */
function tensorsProblem(tensors: Readonly<Record<string, Float32Array>>, specs: readonly ParamSpec[]): string | undefined {
  for (const { name, shape } of specs) {
    const values = tensors[name];
    if (!(values instanceof Float32Array)) return `missing tensor '${name}'`;
    if (values.length !== size(shape)) return `tensor '${name}' has ${values.length} values, expected ${size(shape)} for shape [${shape}]`;
  }
  const extra = Object.keys(tensors).filter((name) => !specs.some((spec) => spec.name === name));
  if (extra.length > 0) return `unexpected tensor(s) ${extra.join(', ')}`;
  return undefined;
}

/** Why `state` is not an optimizer state for parameters `specs`, or undefined. */
function optimizerProblem(state: OptimizerState, specs: readonly ParamSpec[]): string | undefined {
  if (!Number.isSafeInteger(state.step) || state.step < 0) return `step must be a non-negative integer, got ${state.step}`;
  for (const moment of MOMENTS) {
    const problem = tensorsProblem(state[moment], specs);
    if (problem) return `moment ${moment}: ${problem}`;
  }
  return undefined;
}

/** Throws unless `weights` fits `config` exactly. */
export function assertWeightsFit(weights: ModelWeights, config: ModelConfig): void {
  const problem = weightsProblem(weights);
  if (problem) throw new Error(`invalid weights: ${problem}`);
  const differences = configDifferences(weights.config, config);
  if (differences.length > 0) throw new Error(`weights are for another architecture: ${differences.join(', ')}`);
}

const FORMAT = 'trajflow-checkpoint/2';
/** A header line longer than this means the file is not a checkpoint. */
const MAX_HEADER_BYTES = 1 << 20;
/** Adam's moments, in file order. */
const MOMENTS = ['m', 'v'] as const;

interface Header {
  format: string;
  config: ModelConfig;
  policyVersion: number;
  /** Present in a trainer's checkpoint: its moments follow the parameters in `tensors`. */
  optimizer?: { step: number };
  tensors: { name: string; shape: number[]; offset: number }[];
  dataBytes: number;
  /** Of the data bytes, in hex. */
  sha256: string;
}

/** A tensor's name in the file, and where its values live in memory. */
interface FileTensor {
  name: string;
  shape: readonly number[];
  group: 'params' | (typeof MOMENTS)[number];
  key: string;
}

/** Every tensor a checkpoint holds, in file order: the parameters, then each moment if saved. */
function fileTensors(config: ModelConfig, withOptimizer: boolean): FileTensor[] {
  const specs = parameterSpecs(config);
  const params = specs.map(({ name, shape }): FileTensor => ({ name, shape, group: 'params', key: name }));
  if (!withOptimizer) return params;
  const moments = MOMENTS.flatMap((moment) =>
    specs.map(({ name, shape }): FileTensor => ({ name: `optimizer.${moment}.${name}`, shape, group: moment, key: name })),
  );
  return [...params, ...moments];
}

export function encodeCheckpoint({ weights, policyVersion, optimizer }: TrainerCheckpoint): Buffer {
  const problem = weightsProblem(weights);
  if (problem) throw new Error(`cannot save invalid weights: ${problem}`);
  if (!Number.isSafeInteger(policyVersion) || policyVersion < 0) {
    throw new Error(`policyVersion must be a non-negative integer, got ${policyVersion}`);
  }
  const optimizerIssue = optimizer && optimizerProblem(optimizer, parameterSpecs(weights.config));
  if (optimizerIssue) throw new Error(`cannot save invalid optimizer state: ${optimizerIssue}`);
  const groups: Record<FileTensor['group'], Readonly<Record<string, Float32Array>>> = { params: weights.params, m: optimizer?.m ?? {}, v: optimizer?.v ?? {} };
  let offset = 0;
  const layout = fileTensors(weights.config, optimizer !== undefined).map((tensor) => {
    const entry = { name: tensor.name, shape: [...tensor.shape], offset };
    offset += 4 * size(tensor.shape);
    return { entry, values: groups[tensor.group][tensor.key] };
  });
  const data = Buffer.alloc(offset);
  for (const { entry, values } of layout) values.forEach((value, i) => data.writeFloatLE(value, entry.offset + 4 * i));
  const header: Header = {
    format: FORMAT,
    config: weights.config,
    policyVersion,
    ...(optimizer ? { optimizer: { step: optimizer.step } } : {}),
    tensors: layout.map(({ entry }) => entry),
    dataBytes: offset,
    sha256: sha256Hex(data),
  };
  return Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`, 'utf8'), data]);
}

/**
 * Parses and validates checkpoint bytes, with the optimizer state if the file has one and
 * `withOptimizer` asks for it; `source` (the file name) is in every error. A torn or corrupt file
 * throws CorruptFileError; one that is intact but unusable (another format, NaN weights) an Error.
 */
export function decodeCheckpoint(bytes: Buffer, source: string, { withOptimizer = false } = {}): TrainerCheckpoint {
  const fail = (problem: string): never => {
    throw new Error(`checkpoint ${source}: ${problem}`);
  };
  const corrupt = (problem: string): never => {
    throw new CorruptFileError('checkpoint', source, problem);
  };
  const newline = bytes.indexOf(0x0a);
  if (newline < 0 || newline > MAX_HEADER_BYTES) corrupt('no JSON header line (not a trajflow checkpoint, or cut short)');
  let header: Header;
  try {
    header = JSON.parse(bytes.subarray(0, newline).toString('utf8'));
  } catch (err) {
    return corrupt(`header is not valid JSON (${(err as Error).message})`);
  }
  if (header?.format !== FORMAT) {
    fail(`format is ${JSON.stringify(header?.format)}, expected "${FORMAT}"`);
  }
  const configIssue = configProblem(header.config);
  if (configIssue) fail(`bad config in header: ${configIssue}`);
  if (!Number.isSafeInteger(header.policyVersion) || header.policyVersion < 0) {
    fail(`policyVersion must be a non-negative integer, got ${JSON.stringify(header.policyVersion)}`);
  }
  const hasOptimizer = header.optimizer !== undefined;
  const optimizerStep = header.optimizer?.step ?? 0;
  if (!Number.isSafeInteger(optimizerStep) || optimizerStep < 0) {
    fail(`optimizer step must be a non-negative integer, got ${JSON.stringify(optimizerStep)}`);
  }
  const expected = fileTensors(header.config, hasOptimizer);
  if (!Array.isArray(header.tensors) || header.tensors.length !== expected.length) {
    fail(`header lists ${header.tensors?.length ?? 'no'} tensors, the config needs ${expected.length}`);
  }
  const dataStart = newline + 1;
  let expectedOffset = 0;
  expected.forEach(({ name, shape }, i) => {
    const entry = header.tensors[i];
    if (entry?.name !== name || JSON.stringify(entry.shape) !== JSON.stringify(shape) || entry.offset !== expectedOffset) {
      fail(`tensor #${i} is ${JSON.stringify(entry)}, expected '${name}' of shape [${shape}] at offset ${expectedOffset}`);
    }
    expectedOffset += 4 * size(shape);
  });
  if (header.dataBytes !== expectedOffset) fail(`header says ${header.dataBytes} data bytes, the tensors need ${expectedOffset}`);
  const actualBytes = bytes.length - dataStart;
  if (actualBytes < expectedOffset) corrupt(`truncated: ${actualBytes} data bytes, expected ${expectedOffset}`);
  if (actualBytes > expectedOffset) corrupt(`${actualBytes - expectedOffset} unexpected bytes after the tensor data`);
  const hash = sha256Hex(bytes.subarray(dataStart));
  if (hash !== header.sha256) corrupt(`checksum mismatch: the ${actualBytes} data bytes hash to sha256 ${hash}, the header says ${header.sha256}`);
  const groups: Record<FileTensor['group'], Record<string, Float32Array>> = { params: {}, m: {}, v: {} };
  expected.forEach(({ name, shape, group, key }, t) => {
    if (group !== 'params' && !withOptimizer) return;
    const start = dataStart + header.tensors[t].offset;
    const values = new Float32Array(size(shape));
    for (let i = 0; i < values.length; i++) values[i] = bytes.readFloatLE(start + 4 * i);
    const bad = values.findIndex((value) => !Number.isFinite(value));
    if (bad >= 0) fail(`tensor '${name}' holds a non-finite value (${values[bad]}) at index ${bad}`);
    groups[group][key] = values;
  });
  const checkpoint: TrainerCheckpoint = { weights: { config: header.config, params: groups.params }, policyVersion: header.policyVersion };
  if (hasOptimizer && withOptimizer) checkpoint.optimizer = { step: optimizerStep, m: groups.m, v: groups.v };
  return checkpoint;
}

/** Writes atomically and durably (files.ts): a reader never sees a half-written checkpoint. */
export async function saveCheckpoint(file: string, checkpoint: Checkpoint): Promise<void> {
  await writeCheckpoint(file, { weights: checkpoint.weights, policyVersion: checkpoint.policyVersion });
}

/** The weights and version of a checkpoint; a trainer's optimizer state, if any, is skipped. */
export async function loadCheckpoint(file: string): Promise<Checkpoint> {
  return decodeCheckpoint(await readCheckpoint(file), file);
}

/** `saveCheckpoint` plus the optimizer state, if given. */
export async function saveTrainerCheckpoint(file: string, checkpoint: TrainerCheckpoint): Promise<void> {
  await writeCheckpoint(file, checkpoint);
}

/** `loadCheckpoint` plus the optimizer state, if the file has one. */
export async function loadTrainerCheckpoint(file: string): Promise<TrainerCheckpoint> {
  return decodeCheckpoint(await readCheckpoint(file), file, { withOptimizer: true });
}

function writeCheckpoint(file: string, checkpoint: TrainerCheckpoint): Promise<void> {
  return writeFileAtomically(file, encodeCheckpoint(checkpoint));
}

async function readCheckpoint(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new Error(`checkpoint ${file}: cannot read (${(err as Error).message})`, { cause: err });
  }
}
