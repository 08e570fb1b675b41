import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, loadRunConfig, parseRunConfig } from '../config/load';

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
    expect(() => parseRunConfig({ env: { name: 'chess' } })).toThrow(/env\.name/);
    expect(() => loadRunConfig(writeConfig('broken.yaml', 'env: [unclosed'))).toThrow(/not valid YAML/);
    expect(() => loadRunConfig(writeConfig('broken.json', '{"env":'))).toThrow(/not valid JSON/);
    expect(() => loadRunConfig(path.join(dir, 'missing.yaml'))).toThrow(/cannot read file/);
  });
});
