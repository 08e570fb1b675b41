import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { EMBEDDED_TRAINER_ONLY, RunConfigSchema } from '../config/schema';
import { CONFIG_REFERENCE_PATH, renderConfigReference } from '../src/docs/configReference';
import { type CommentTree, parseSource, pluginOptionComments, schemaComments } from '../src/docs/sourceComments';

/** The page's sections by heading text (backticks dropped), each with its lines. */
function sections(page: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let current: string[] = [];
  for (const line of page.split('\n')) {
    const heading = /^#{2,3} (.*)$/.exec(line);
    if (heading) found.set(heading[1].replaceAll('`', ''), (current = []));
    else current.push(line);
  }
  return found;
}

/** Dotted paths of every object in the schema (`trainer.loss`), each with its keys. */
function objectKeys(schema: { properties?: Record<string, object> }, prefix: string[] = []): [string, string[]][] {
  const own: [string, string[]] = [prefix.length > 0 ? prefix.join('.') : 'Top level', Object.keys(schema.properties ?? {})];
  const nested = Object.entries(schema.properties ?? {}).flatMap(([key, property]) =>
    'properties' in property ? objectKeys(property as { properties: Record<string, object> }, [...prefix, key]) : [],
  );
  return [own, ...nested];
}

function itemOf(lines: string[] | undefined, key: string): string | undefined {
  return lines?.find((line) => line.startsWith(`- **\`${key}\`**`));
}

describe('config reference (docs/config.md)', () => {
  let page: string;
  beforeAll(async () => {
    page = await renderConfigReference();
  });

  it('is the page the schema generates', () => {
    const committed = readFileSync(CONFIG_REFERENCE_PATH, 'utf8');
    if (committed !== page) {
      const committedLines = committed.split('\n');
      const line = page.split('\n').findIndex((text, i) => text !== committedLines[i]);
      throw new Error(`docs/config.md is stale: run npm run docs:config (first difference at line ${line + 1})`);
    }
  });

  it('has an item for every key of every section of the schema', () => {
    const bySection = sections(page);
    const missing = objectKeys(z.toJSONSchema(RunConfigSchema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, object> }).flatMap(
      ([section, keys]) => keys.filter((key) => itemOf(bySection.get(section), key) === undefined).map((key) => `${section}: ${key}`),
    );
    expect(missing).toEqual([]);
  });

  it('marks exactly the keys of EMBEDDED_TRAINER_ONLY (and what they contain) as embedded trainer only', () => {
    const bySection = sections(page);
    for (const { path: keyPath } of EMBEDDED_TRAINER_ONLY) {
      const item = itemOf(bySection.get(keyPath.slice(0, -1).join('.')), keyPath.at(-1)!);
      expect(item).toContain('embedded trainer only');
    }
    expect(itemOf(bySection.get('trainer.loss.coverage'), 'weight')).toContain('embedded trainer only');
    expect(itemOf(bySection.get('trainer'), 'steps')).not.toContain('embedded trainer only');
    expect(itemOf(bySection.get('trainer.loss'), 'epsilon')).not.toContain('embedded trainer only');
  });

  it('lists the built-in environments and agents with their options', () => {
    const bySection = sections(page);
    expect(itemOf(bySection.get('env: frozenlake'), 'holePenalty')).toMatch(/\(number ≥ 0; default `0`\): Penalty on the move into a hole/);
    expect(itemOf(bySection.get('agent: tool'), 'format')).toMatch(/one of `hermes`/);
    expect(bySection.get('agent: frozenlake')?.join('\n')).toContain('has no options of its own');
  });
});

describe('doc comments of zod schemas', () => {
  const source = path.join(mkdtempSync(path.join(os.tmpdir(), 'trajflow-config-doc-')), 'fixture.ts');
  writeFileSync(
    source,
    [
      "import { z } from 'zod';",
      '/** Inner, declared. */',
      'const InnerSchema = z.strictObject({',
      '  /**',
      '   * Leaf, on',
      '   * two lines.',
      '   */',
      '  leaf: z.number().default(1),',
      '});',
      'export const OuterSchema = z',
      '  .strictObject({',
      '    // not a doc comment',
      '    plain: z.string(),',
      '    /** The inner one. */',
      '    inner: InnerSchema.prefault({}),',
      '    inline: z.object({ /** Deep. */ deep: z.boolean() }).optional(),',
      '  })',
      '  .refine(() => true);',
      "api.registerAgent('echo', { options: z.strictObject({ /** What to say. */ words: z.string() }), create: () => undefined });",
      "api.registerEnvironment('room', { options: InnerSchema, create: () => undefined });",
    ].join('\n'),
  );
  const parsed = parseSource(source);
  const texts = (tree: CommentTree): unknown => ({ text: tree.text, keys: Object.fromEntries([...tree.keys].map(([key, child]) => [key, texts(child)])) });

  it('reads each key’s comment, through method chains and same-file constants, joining a key’s and its schema’s', () => {
    expect(texts(schemaComments(parsed, 'OuterSchema'))).toEqual({
      text: undefined,
      keys: {
        plain: { text: undefined, keys: {} },
        inner: { text: 'The inner one. Inner, declared.', keys: { leaf: { text: 'Leaf, on two lines.', keys: {} } } },
        inline: { text: undefined, keys: { deep: { text: 'Deep.', keys: {} } } },
      },
    });
  });

  it('finds the option schemas of registered environments and agents', () => {
    const found = pluginOptionComments([parsed]);
    expect(texts(found.agents.get('echo')!)).toEqual({ text: undefined, keys: { words: { text: 'What to say.', keys: {} } } });
    expect([...found.environments.get('room')!.keys.keys()]).toEqual(['leaf']);
  });

  it('refuses a schema the file does not declare', () => {
    expect(() => schemaComments(parsed, 'MissingSchema')).toThrow(/fixture\.ts: no const MissingSchema/);
  });
});
