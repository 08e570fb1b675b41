#!/usr/bin/env node
/**
 * Writes demonstrations of tool use for `trainer.warmup` (config/examples/tool-use-demonstrations.jsonl):
 * arithmetic tasks from the training side of the held-out split, each a conversation of the tool
 * agent's system prompt, the task, a calculator call of the task's expression, its result and the
 * result as the answer. They teach the call and the rhythm, not arithmetic: the answer is copied
 * from the tool. Usage: node scripts/tool-demonstrations.js CONFIG COUNT > FILE (after npm run build).
 */
const path = require('node:path');
const { loadRunConfig, Episode } = require('../dist/src/index.js');
const { formatToolCall } = require('../dist/src/tools/render.js');

async function main() {
  const [configFile, count = '48'] = process.argv.slice(2);
  if (!configFile) throw new Error('usage: node scripts/tool-demonstrations.js CONFIG [COUNT]');
  const config = loadRunConfig(path.resolve(configFile));
  // Seeds far from those a run draws its groups with (0, 1, 2, ...), on the training side.
  for (let seed = 1_000_000; seed < 1_000_000 + Number(count); seed++) {
    const { episode, first } = await Episode.open({ env: config.env, agent: config.agent, seed, pool: 'train' });
    const expression = episode.environment.task.expression;
    const call = formatToolCall(config.agent.format, { name: 'calculator', arguments: { expression } });
    const results = await episode.respond(call);
    const result = results.next.messages[0].content;
    const messages = [...first.messages, { role: 'assistant', content: call }, ...results.next.messages, { role: 'assistant', content: result }];
    process.stdout.write(JSON.stringify({ messages }) + '\n');
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
