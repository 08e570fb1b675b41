import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadRunConfig, parseRunConfig } from '../src/runConfig';

const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-config-'));
const EXAMPLES = path.join(__dirname, '..', 'config', 'examples');

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
    const realModel = { env: { name: 'frozenlake' }, model: { path: '/models/any' }, inference: { backend: 'vllm', servers: ['http://127.0.0.1:8000'] } };
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

  it('lists the known names for an unknown environment, agent, tool or reward', () => {
    expect(() => parseRunConfig({ env: { name: 'chess' } })).toThrow(
      /env\.name: unknown environment "chess"; known environments: .*arithmetic, bash, frozenlake/,
    );
    expect(() => parseRunConfig({ env: { name: 'frozenlake' }, agent: { name: 'chatty' } })).toThrow(
      /agent\.name: unknown agent "chatty"; known agents: .*frozenlake, model, tool/,
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
