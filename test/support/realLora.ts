/** LoRA on a real server, for test/realModel.training.test.ts: peft adapters of SmolLM2 made and scored in Python, and a request of SmolLM2's chat template. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { GenerateRequest, GenerateResult } from '../../src/inference/provider';
import { PYTHON_BIN, PYTHON_SOURCES } from '../../src/paths';

const run = promisify(execFile);
const PYTHON_ENV = { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' };
export const LORA_RANK = 8;

/** peft adapters of the base model, B drawn N(0, 0.02) (peft starts it at 0: the base model exactly), one seed each. */
const MAKE_ADAPTERS = `
import sys, torch
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
base = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
model = get_peft_model(base, LoraConfig(r=${LORA_RANK}, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
for seed, out in enumerate(sys.argv[2:], start=1):
    torch.manual_seed(seed)
    for name, tensor in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(tensor, std=0.02)
    model.save_pretrained(out)
`;

/**
 * Each completion's logprobs (temperature 1) as peft computes them: under the base model (`base`)
 * and under each adapter directory given; JSON in on argv[1], out on stdout.
 */
const SCORE = `
import json, sys, torch
from transformers import AutoModelForCausalLM
from peft import PeftModel
job = json.loads(sys.argv[1])
model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(job["base"], dtype=torch.float32), job["adapters"][0], adapter_name="a0")
for i, path in enumerate(job["adapters"][1:], start=1):
    model.load_adapter(path, adapter_name=f"a{i}")
model.eval()
def score(sample):
    ids = torch.tensor([sample["prompt"] + sample["completion"]])
    logits = model(ids).logits[0, len(sample["prompt"]) - 1 : -1]
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(sample["completion"])[:, None])[:, 0].tolist()
out = {}
with torch.no_grad():
    with model.disable_adapter():
        out["base"] = [score(s) for s in job["samples"]]
    for i, path in enumerate(job["adapters"]):
        model.set_adapter(f"a{i}")
        out[path] = [score(s) for s in job["samples"]]
print(json.dumps(out))
`;

export function request(): GenerateRequest {
  // SmolLM2's chat template (its default system message) of the user message "What is 2 + 3?", ready for the answer.
  const system = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198];
  const promptIds = [...system, 1, 4093, 198, 1780, 314, 216, 34, 1232, 216, 35, 47, 2, 198, 1, 520, 9531, 198];
  return { promptIds, sampling: { maxTokens: 12, temperature: 1, topP: 1, seed: 7, stopTokens: [2] } };
}

/** Mean |difference| of two completions' logprobs over their common prefix of equal tokens (NaN if none). */
function logprobDistance(a: GenerateResult, b: GenerateResult): number {
  let n = 0;
  let sum = 0;
  while (n < Math.min(a.completionIds.length, b.completionIds.length) && a.completionIds[n] === b.completionIds[n]) {
    sum += Math.abs(a.logprobs[n] - b.logprobs[n]);
    n++;
  }
  return sum / n;
}

export const meanAbsDiff = (a: number[], b: number[]) => a.reduce((sum, value, i) => sum + Math.abs(value - b[i]), 0) / a.length;

/** Whether two completions are not the same sample: other tokens, or the same tokens at other probabilities. */
export function sampledDifferently(a: GenerateResult, b: GenerateResult): boolean {
  const sameTokens = a.completionIds.length === b.completionIds.length && a.completionIds.every((id, i) => id === b.completionIds[i]);
  return !sameTokens || logprobDistance(a, b) > 1e-3;
}

/** Writes one peft adapter of `base` per directory (B drawn with seeds 1, 2, ...). */
export async function makeAdapters(base: string, dirs: string[]): Promise<void> {
  await run(PYTHON_BIN, ['-c', MAKE_ADAPTERS, base, ...dirs], { cwd: PYTHON_SOURCES, env: PYTHON_ENV });
}

/** Each sample's completion logprobs under the base (`base`) and under each adapter directory (by its path). */
export async function scoreWithPeft(
  base: string,
  adapters: string[],
  samples: { prompt: readonly number[]; completion: readonly number[] }[],
): Promise<Record<string, number[][]>> {
  const { stdout } = await run(PYTHON_BIN, ['-c', SCORE, JSON.stringify({ base, adapters, samples })], { cwd: PYTHON_SOURCES, env: PYTHON_ENV });
  return JSON.parse(stdout) as Record<string, number[][]>;
}
