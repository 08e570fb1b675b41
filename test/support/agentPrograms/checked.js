/**
 * An agent program for the suite, written against OpenAI's client as any program would be: it
 * answers the task (`TRAJFLOW_TASK`), then asks for a check in the same conversation with a
 * streamed call, reports a reward of its own and prints the checked answer. trajflow's endpoint
 * (`OPENAI_BASE_URL`, the trajectory id as `OPENAI_API_KEY`) serves both calls.
 */
const { OpenAI } = require('openai');

async function main() {
  const client = new OpenAI({ maxRetries: 0 });
  const messages = [
    { role: 'system', content: 'Answer with the number only.' },
    { role: 'user', content: process.env.TRAJFLOW_TASK },
  ];
  const first = await client.chat.completions.create({ model: 'any', messages });
  messages.push(first.choices[0].message, { role: 'user', content: 'Check it.' });
  let checked = '';
  const stream = await client.chat.completions.create({ model: 'any', messages, stream: true });
  for await (const chunk of stream) checked += chunk.choices[0]?.delta?.content ?? '';
  const reported = await fetch(`${process.env.OPENAI_BASE_URL}/trajflow/reward`, {
    method: 'POST',
    headers: { authorization: `Bearer ${process.env.OPENAI_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ reward: 0.25 }),
  });
  if (!reported.ok) throw new Error(`reward refused: ${reported.status} ${await reported.text()}`);
  process.stdout.write(checked);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
