import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertTrainingConfig, ConfigError, loadRunConfig, parseRunConfig } from '../src/runConfig';

const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-config-'));
const EXAMPLES = path.join(__dirname, '..', 'config', 'examples');

/** A directory with the files a config's model.path is checked for (their contents are not read then). */
const MODEL_DIR = mkdtempSync(path.join(dir, 'model-'));
for (const file of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors']) writeFileSync(path.join(MODEL_DIR, file), '{}');

function writeConfig(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe('run config', () => {
  it('loads the example FrozenLake config with defaults filled in', () => {
    const config = loadRunConfig(path.join(__dirname, '..', 'config', 'examples', 'frozenlake.yaml'));
    expect(config.env).toMatchObject({ name: 'frozenlake', size: 4, map: 'classic' });
    expect(config.temporal.taskQueuePrefix).toBe('trajflow');
    expect(config.model.maxContext).toBeGreaterThan(0);
  });

  it.each(readdirSync(EXAMPLES).filter((f) => /\.(ya?ml|json)$/.test(f)))('accepts the example config %s', (name) => {
    expect(() => loadRunConfig(path.join(EXAMPLES, name))).not.toThrow();
  });

  it('names the field path and the expectation of a bad value', () => {
    const file = writeConfig('bad.yaml', 'env: { name: frozenlake, size: 5 }\nrollout: { groupSize: "four" }\n');
    expect(() => loadRunConfig(file)).toThrow(ConfigError);
    try {
      loadRunConfig(file);
    } catch (err) {
      const message = (err as Error).message;
      expect(message).toContain(file);
      expect(message).toMatch(/env\.size: /);
      expect(message).toMatch(/rollout\.groupSize: .*number/);
    }
  });

  it('rejects unknown keys, unknown environments and broken YAML', () => {
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, rollout: { grupSize: 2 } })).toThrow(/rollout: .*grupSize/);
    expect(() => parseRunConfig({ env: { name: 'frozenlake', holePenalty: -1 } })).toThrow(/env\.holePenalty/);
    expect(() => parseRunConfig({ env: { name: 'chess' } })).toThrow(/env\.name/);
    // Per-turn credit needs one training sequence per turn.
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { turnCredit: { weight: 1 } } })).toThrow(
      /trainer\.turnCredit: per-turn credit needs agent\.history: none/,
    );
    expect(parseRunConfig({ env: { name: 'frozenlake' }, agent: { history: 'none' }, trainer: { turnCredit: { weight: 1 } } }).trainer.turnCredit).toEqual({
      weight: 1,
      discount: 0.95,
      costWeight: 0,
    });
    // The cost term alone is per-turn credit too: it also needs one sequence per turn, and reads the penalties.
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { turnCredit: { weight: 0, costWeight: 5 } } })).toThrow(
      /trainer\.turnCredit: per-turn credit needs agent\.history: none/,
    );
    expect(
      parseRunConfig({ env: { name: 'frozenlake', holePenalty: 1 }, agent: { history: 'none' }, trainer: { turnCredit: { weight: 0, costWeight: 5 } } }).trainer
        .turnCredit,
    ).toEqual({ weight: 0, discount: 0.95, costWeight: 5 });
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, agent: { history: 'none' }, trainer: { turnCredit: { weight: 1, costWeight: -1 } } })).toThrow(
      /trainer\.turnCredit\.costWeight/,
    );
    // The learning rate's schedule: constant unless asked, and a warm-up that outlasts the run is named.
    expect(parseRunConfig({ env: { name: 'frozenlake' } }).trainer.learningRateSchedule).toEqual({ warmupSteps: 0, decay: 'constant', minRatio: 0 });
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { steps: 10, learningRateSchedule: { warmupSteps: 10 } } })).toThrow(
      /trainer\.learningRateSchedule\.warmupSteps: must be below trainer\.steps \(10\)/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { learningRateSchedule: { decay: 'exponential' } } })).toThrow(
      /trainer\.learningRateSchedule\.decay/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { learningRateSchedule: { minRatio: 1.5 } } })).toThrow(
      /trainer\.learningRateSchedule\.minRatio/,
    );
    // A hole penalty reaches training only through per-turn credit.
    expect(() => parseRunConfig({ env: { name: 'frozenlake', holePenalty: 0.25 } })).toThrow(
      /env\.holePenalty: is charged to the move alone, which only per-turn credit reads/,
    );
    expect(
      parseRunConfig({ env: { name: 'frozenlake', holePenalty: 0.25 }, agent: { history: 'none' }, trainer: { turnCredit: { weight: 1 } } }).env,
    ).toMatchObject({ holePenalty: 0.25 });
    expect(() => parseRunConfig({ env: { name: 'frozenlake', progressPenalty: 0.1 } })).toThrow(/env\.progressPenalty: is charged to the move alone/);
    expect(() => parseRunConfig({ env: { name: 'frozenlake', progressPenalty: -0.1 } })).toThrow(/env\.progressPenalty/);
    expect(() => parseRunConfig({ env: { name: 'frozenlake', progressDistance: 'crow' } })).toThrow(/env\.progressDistance/);
    expect(parseRunConfig({ env: { name: 'frozenlake', progressDistance: 'path' } }).env).toMatchObject({ progressDistance: 'path' });
    // The trust region is the embedded trainer's.
    const realModel = { env: { name: 'frozenlake' }, model: { path: MODEL_DIR }, inference: { backend: 'vllm', servers: ['http://127.0.0.1:8000'] } };
    expect(parseRunConfig(realModel).trainer.maxUpdateKl).toBeUndefined();
    expect(() => parseRunConfig({ ...realModel, trainer: { maxUpdateKl: 0.1 } })).toThrow(/trainer\.maxUpdateKl: is a setting of the embedded trainer/);
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { maxUpdateKl: -1 } })).toThrow(/trainer\.maxUpdateKl/);
    // So is the entropy bonus.
    expect(parseRunConfig(realModel).trainer.loss.entropyBonus).toBe(0);
    expect(() => parseRunConfig({ ...realModel, trainer: { loss: { entropyBonus: 0.01 } } })).toThrow(
      /trainer\.loss\.entropyBonus: is a setting of the embedded trainer/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { entropyBonus: -0.01 } } })).toThrow(/trainer\.loss\.entropyBonus/);
    expect(parseRunConfig({ env: { name: 'frozenlake' } }).trainer.loss.entropyBonusTokens).toBe('all');
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { entropyBonusTokens: 'first' } } })).toThrow(
      /trainer\.loss\.entropyBonusTokens/,
    );
    // And the coverage term.
    expect(parseRunConfig(realModel).trainer.loss.coverage).toBeUndefined();
    expect(() => parseRunConfig({ ...realModel, trainer: { loss: { coverage: { weight: 0.1 } } } })).toThrow(
      /trainer\.loss\.coverage: is a setting of the embedded trainer/,
    );
    expect(parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { coverage: { weight: 1 } } } }).trainer.loss.coverage).toEqual({
      weight: 1,
      tokens: 'answer-start',
    });
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { coverage: { weight: 1, floor: 0 } } } })).toThrow(
      /trainer\.loss\.coverage\.floor/,
    );
    // And the all-moves term, which needs one training sequence per turn like the rest of per-turn credit.
    const allMoves = { trainer: { turnCredit: { weight: 0, allMoves: { weight: 5 } } } };
    expect(() => parseRunConfig({ ...realModel, ...allMoves, agent: { history: 'none' } })).toThrow(
      /trainer\.turnCredit\.allMoves: is a setting of the embedded trainer/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, ...allMoves })).toThrow(/trainer\.turnCredit: per-turn credit needs agent\.history: none/);
    expect(parseRunConfig({ env: { name: 'frozenlake' }, ...allMoves, agent: { history: 'none' } }).trainer.turnCredit).toMatchObject({
      allMoves: { weight: 5, temperature: 0.05 },
    });
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { turnCredit: { weight: 1, allMoves: { weight: 0 } } } })).toThrow(
      /trainer\.turnCredit\.allMoves\.weight/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { turnCredit: { weight: 1, allMoves: { weight: 1, temperature: 0 } } } })).toThrow(
      /trainer\.turnCredit\.allMoves\.temperature/,
    );
    // Model calls run on inference workers unless a run asks for local activities.
    expect(parseRunConfig({ env: { name: 'frozenlake' } }).inference.calls).toBe('inference-worker');
    expect(parseRunConfig({ env: { name: 'frozenlake' }, inference: { calls: 'local' } }).inference.calls).toBe('local');
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, inference: { calls: 'remote' } })).toThrow(/inference\.calls: .*"inference-worker"\|"local"/);
    // Replacing filtered groups needs a filter, and a step's span holds at least its batch.
    const replacing = { groupFilter: 'mixed-outcomes', filteredGroups: 'replace', batchGroups: 2 };
    expect(parseRunConfig({ env: { name: 'frozenlake' }, trainer: replacing }).trainer.maxGroupsPerStep).toBeUndefined();
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { filteredGroups: 'replace' } })).toThrow(
      /trainer\.filteredGroups: replace needs a trainer\.groupFilter/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { ...replacing, maxGroupsPerStep: 1 } })).toThrow(
      /trainer\.maxGroupsPerStep: must be at least trainer\.batchGroups \(2\)/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { maxGroupsPerStep: 8 } })).toThrow(/trainer\.maxGroupsPerStep: applies only with/);
    expect(() => loadRunConfig(writeConfig('broken.yaml', 'env: [unclosed'))).toThrow(/not valid YAML/);
    expect(() => loadRunConfig(writeConfig('broken.json', '{"env":'))).toThrow(/not valid JSON/);
    expect(() => loadRunConfig(path.join(dir, 'missing.yaml'))).toThrow(/cannot read file/);
  });

  describe('refuses settings that would do nothing', () => {
    const realModel = { env: { name: 'frozenlake' }, model: { path: MODEL_DIR }, inference: { backend: 'vllm', servers: ['http://127.0.0.1:8000'] } };
    const problemsOf = (run: () => unknown): string[] => {
      try {
        run();
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as ConfigError).problems;
      }
      throw new Error('expected a ConfigError');
    };

    it('turnCredit.costWeight with the Python trainer, which has no cost term', () => {
      const costOnly = { agent: { history: 'none' }, trainer: { turnCredit: { weight: 1, costWeight: 0.5 } } };
      expect(problemsOf(() => parseRunConfig({ ...realModel, ...costOnly }))).toEqual([
        'trainer.turnCredit.costWeight: is a setting of the embedded trainer; the Python trainer of a real model (model.path) has none: remove it',
      ]);
      // 0 (its default) is no setting at all, and the embedded trainer has the term.
      expect(parseRunConfig({ ...realModel, agent: { history: 'none' }, trainer: { turnCredit: { weight: 1 } } }).trainer.turnCredit?.costWeight).toBe(0);
      expect(parseRunConfig({ env: { name: 'frozenlake' }, ...costOnly }).trainer.turnCredit?.costWeight).toBe(0.5);
    });

    it('the format warm-up with a real model, and several trainer processes or LoRA with the embedded model', () => {
      expect(problemsOf(() => parseRunConfig({ ...realModel, trainer: { formatWarmupSteps: 4 } }))).toEqual([
        'trainer.formatWarmupSteps: is a setting of the embedded trainer; the Python trainer of a real model (model.path) has none: remove it',
      ]);
      expect(problemsOf(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { distributed: { processes: 2 } } }))).toEqual([
        'trainer.distributed: the embedded trainer runs in one process; trainer.distributed is for the Python trainer of a real model (model.path)',
      ]);
      expect(problemsOf(() => parseRunConfig({ ...realModel, trainer: { distributed: { processes: 8, hosts: 2 } } }))).toEqual([
        'trainer.distributed.rendezvous: hosts > 1 needs rendezvous (host:port of the c10d rendezvous)',
      ]);
      expect(parseRunConfig({ ...realModel, trainer: { distributed: { processes: 2 } } }).trainer.distributed).toEqual({
        processes: 2,
        hosts: 1,
        maxRestarts: 3,
      });
      expect(problemsOf(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { lora: {} } }))).toEqual([
        'trainer.lora: LoRA is for the Python trainer of a real model (model.path); the embedded trainer trains every weight',
      ]);
      expect(parseRunConfig({ ...realModel, trainer: { lora: { rank: 8 } } }).trainer.lora).toEqual({
        rank: 8,
        alpha: 32,
        targetModules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
        dropout: 0,
      });
    });

    it('a server URL without its scheme, saying what to write', () => {
      const servers = (list: string[]) => problemsOf(() => parseRunConfig({ ...realModel, inference: { backend: 'vllm', servers: list } }));
      expect(servers(['localhost:8000'])).toEqual(['inference.servers[0]: "localhost:8000" has no http:// or https://: write "http://localhost:8000"']);
      expect(servers(['http://127.0.0.1:8000', '10.0.0.2:8000'])).toEqual([
        'inference.servers[1]: "10.0.0.2:8000" has no http:// or https://: write "http://10.0.0.2:8000"',
      ]);
      expect(servers(['ftp://models:21'])).toEqual(['inference.servers[0]: "ftp://models:21": a model server speaks http:// or https://, not ftp://']);
      expect(servers(['http://'])).toEqual(['inference.servers[0]: "http://" is not a URL']);
      expect(parseRunConfig({ ...realModel, inference: { backend: 'sglang', servers: ['https://gpu-1:30000'] } }).inference.servers).toEqual([
        'https://gpu-1:30000',
      ]);
    });

    it('a model.path that is not a model directory, in one line naming the path and what is missing', () => {
      const missing = path.join(dir, 'no-such-model');
      expect(problemsOf(() => parseRunConfig({ ...realModel, model: { path: missing } }))).toEqual([`model.path: ${missing} does not exist`]);
      const partial = mkdtempSync(path.join(dir, 'partial-model-'));
      writeFileSync(path.join(partial, 'config.json'), '{}');
      writeFileSync(path.join(partial, 'tokenizer.json'), '{}');
      expect(problemsOf(() => parseRunConfig({ ...realModel, model: { path: partial } }))).toEqual([
        `model.path: ${partial} has no tokenizer_config.json: not a Hugging Face model directory (config.json, tokenizer.json, tokenizer_config.json and the weights)`,
      ]);
      writeFileSync(path.join(partial, 'tokenizer_config.json'), '{}');
      expect(problemsOf(() => parseRunConfig({ ...realModel, model: { path: partial } }))).toEqual([`model.path: ${partial} has no weights (*.safetensors)`]);
      // Relative to the config file, and named as resolved.
      const file = writeConfig(
        'wrong-model.yaml',
        'env: { name: frozenlake }\nmodel: { path: ../models/nowhere }\ninference: { backend: vllm, servers: ["http://127.0.0.1:8000"] }\n',
      );
      expect(() => loadRunConfig(file)).toThrow(`model.path: ${path.resolve(dir, '../models/nowhere')} does not exist`);
    });

    it('in a training run: groups of one with a group-relative advantage, and top-p sampling', () => {
      const single = parseRunConfig({ env: { name: 'frozenlake' }, rollout: { groupSize: 1 } });
      expect(problemsOf(() => assertTrainingConfig(single, 'run.yaml'))).toEqual([
        'rollout.groupSize: 1 leaves the group-relative advantage (trainer.advantage grpo) nothing to compare: every advantage is 0 and nothing trains; set 2 or more',
      ]);
      expect(() => assertTrainingConfig(single, 'run.yaml')).toThrow(/^invalid config run\.yaml:/);
      // Per-turn credit compares the visits of a state within one episode too.
      expect(() =>
        assertTrainingConfig(
          parseRunConfig({ env: { name: 'frozenlake' }, agent: { history: 'none' }, rollout: { groupSize: 1 }, trainer: { turnCredit: { weight: 1 } } }),
        ),
      ).not.toThrow();
      const nucleus = parseRunConfig({ env: { name: 'frozenlake' }, sampling: { topP: 0.9 }, trainer: { advantage: 'rloo' }, rollout: { groupSize: 1 } });
      expect(problemsOf(() => assertTrainingConfig(nucleus))).toEqual([
        'rollout.groupSize: 1 leaves the group-relative advantage (trainer.advantage rloo) nothing to compare: every advantage is 0 and nothing trains; set 2 or more',
        'sampling.topP: 0.9 draws tokens from the top-p nucleus, but the trainer scores them under the whole distribution at the sampling temperature, so its importance ratios would be wrong; set 1 to train (a rollout alone may keep it)',
      ]);
      // A rollout alone may use both; the default config trains.
      expect(nucleus.sampling.topP).toBe(0.9);
      expect(() => assertTrainingConfig(parseRunConfig({ env: { name: 'frozenlake' } }))).not.toThrow();
    });

    it('trainer.loss.tis: off unless set, a cap of at least 1', () => {
      expect(parseRunConfig({ env: { name: 'frozenlake' } }).trainer.loss.tis).toBeUndefined();
      expect(parseRunConfig({ ...realModel, trainer: { loss: { tis: {} } } }).trainer.loss.tis).toEqual({ cap: 2 });
      expect(parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { tis: { cap: 5 } } } }).trainer.loss.tis).toEqual({ cap: 5 });
      expect(problemsOf(() => parseRunConfig({ env: { name: 'frozenlake' }, trainer: { loss: { tis: { cap: 0.5 } } } }))).toEqual([
        expect.stringMatching(/^trainer\.loss\.tis\.cap: .*>=1/),
      ]);
    });
  });

  it('gives the three training examples byte-identical trainer sections', () => {
    const trainerSection = (name: string) => {
      const text = readFileSync(path.join(EXAMPLES, name), 'utf8');
      return /^trainer:\n(?: .*\n)+/m.exec(text)?.[0];
    };
    const sections = ['frozenlake-train.yaml', 'arithmetic-train.yaml', 'bash-train.yaml'].map(trainerSection);
    expect(sections[0]).toMatch(/formatWarmupSteps/);
    expect(sections[1]).toBe(sections[0]);
    expect(sections[2]).toBe(sections[0]);
  });

  it('places agents that run their own loop, and names what they lack', () => {
    const arithmetic = { name: 'arithmetic' };
    const workflow = parseRunConfig(
      { env: arithmetic, agent: { name: 'workflow', workflowType: 'a', workflows: 'test/config.test.ts' } },
      'c',
      __dirname + '/..',
    );
    expect(workflow.agent.workflows).toBe(path.resolve(__dirname, 'config.test.ts'));
    expect(() => parseRunConfig({ env: arithmetic, agent: { name: 'workflow', workflowType: 'a', workflows: './missing.js' } })).toThrow(
      /agent\.workflows: .*missing\.js does not exist/,
    );
    expect(() => parseRunConfig({ env: arithmetic, agent: { name: 'workflow' } })).toThrow(/agent\.workflowType/);
    const program = parseRunConfig(
      { env: arithmetic, agent: { name: 'program', command: ['node', 'a.js'] }, inference: { endpoint: { port: 8411 } } },
      'c',
      '/tmp',
    );
    expect(program.agent).toMatchObject({ cwd: '/tmp', endpoint: 'http://127.0.0.1:8411/v1' });
    expect(() =>
      parseRunConfig({
        env: arithmetic,
        agent: { name: 'program', command: ['node', 'a.js'] },
        inference: { endpoint: { port: 8411 } },
        eval: { everySteps: 5 },
      }),
    ).toThrow(/eval\.everySteps: held-out evaluation plays trajflow's own agents/);
    expect(() => parseRunConfig({ env: arithmetic, agent: { name: 'program', command: ['node', 'a.js'] } })).toThrow(
      /agent\.endpoint: an agent program needs the OpenAI-compatible endpoint: set inference\.endpoint/,
    );
  });

  it("refuses trainer.warmup where the Python trainer's warm-up cannot run, and a missing demonstrations file", () => {
    const warmup = { demonstrations: 'config.test.ts' };
    expect(() => parseRunConfig({ env: { name: 'arithmetic' }, trainer: { warmup } }, 'c', __dirname)).toThrow(
      /trainer\.warmup: is a warm-up of the Python trainer of a real model/,
    );
    expect(() => parseRunConfig({ env: { name: 'arithmetic' }, trainer: { warmup: { demonstrations: 'missing.jsonl' } } }, 'c', __dirname)).toThrow(
      /trainer\.warmup\.demonstrations: .*missing\.jsonl does not exist/,
    );
  });

  it('lists the known names for an unknown environment, agent, tool or reward', () => {
    expect(() => parseRunConfig({ env: { name: 'chess' } })).toThrow(
      /env\.name: unknown environment "chess"; known environments: .*arithmetic, bash, frozenlake/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, agent: { name: 'chatty' } })).toThrow(
      /agent\.name: unknown agent "chatty"; known agents: .*frozenlake, model, program, tool, workflow/,
    );
    expect(() => parseRunConfig({ env: { name: 'arithmetic', tools: ['calculator', 'abacus'] }, agent: { name: 'tool' } })).toThrow(
      /env\.tools\[1\]: unknown tool "abacus"; known tools: .*calculator/,
    );
    expect(() => parseRunConfig({ env: { name: 'arithmetic', reward: { name: 'closeness' } }, agent: { name: 'tool' } })).toThrow(
      /env\.reward: .*unknown reward "closeness"; known rewards: .*numeric_match/,
    );
    expect(() => parseRunConfig({ env: { name: 'arithmetic', digits: 9 }, agent: { name: 'tool', format: 'xml' } })).toThrow(
      /env\.digits: [\s\S]*agent\.format: /,
    );
  });

  it('loads plugin modules named in the config, relative to it, and names a module that fails', () => {
    const plugin = path.join(__dirname, 'support', 'plugins', 'customPlugin.ts');
    const file = writeConfig(
      'plugin.yaml',
      `modules: [${JSON.stringify(path.relative(dir, plugin))}]\nenv: { name: say-the-word }\nagent: { name: verbatim }\n`,
    );
    const config = loadRunConfig(file);
    expect(config.modules).toEqual([plugin]);
    expect(config.env.name).toBe('say-the-word');
    expect(() => loadRunConfig(writeConfig('missing-module.yaml', 'modules: [./nowhere.js]\nenv: { name: frozenlake }\n'))).toThrow(
      /modules: cannot load module .*nowhere\.js/,
    );
    const noRegister = writeConfig('no-register.js', 'module.exports = { hello: 1 };\n');
    expect(() => loadRunConfig(writeConfig('no-register.yaml', `modules: [${JSON.stringify(noRegister)}]\nenv: { name: frozenlake }\n`))).toThrow(
      /exports no register\(trajflow\) function/,
    );
  });
});
