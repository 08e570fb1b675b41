/**
 * A calculator agent as a plain program on OpenAI's client, the kind that runs anywhere: it reads
 * its task, lets the model call a calculator until it answers, and prints the answer. Pointed at
 * trajflow's endpoint (OPENAI_BASE_URL and OPENAI_API_KEY, which trajflow sets), it is trained as
 * it is; pointed at any other OpenAI-compatible server, it runs as before.
 */
const { OpenAI } = require('openai');

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'calculator',
      description: 'Evaluates an arithmetic expression such as 12 * 34.',
      parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
    },
  },
];

/** The value of `expression` (+ - * / and parentheses over numbers), or an error the model reads. */
function calculate(expression) {
  if (typeof expression !== 'string' || !/^[\d\s+\-*/().]+$/.test(expression)) return `error: ${JSON.stringify(expression)} is not arithmetic`;
  try {
    const value = Function(`"use strict"; return (${expression});`)();
    return Number.isFinite(value) ? String(value) : `error: ${expression} has no finite value`;
  } catch {
    return `error: cannot read ${JSON.stringify(expression)}`;
  }
}

function argumentsOf(call) {
  try {
    return JSON.parse(call.function.arguments);
  } catch {
    return {};
  }
}

async function main() {
  const client = new OpenAI();
  const messages = [
    { role: 'system', content: 'Answer with the number only. Use the calculator for arithmetic.' },
    { role: 'user', content: process.env.TRAJFLOW_TASK ?? process.argv[2] },
  ];
  // A call, its result, the answer.
  for (let step = 0; step < 3; step++) {
    const completion = await client.chat.completions.create({ model: 'calculator-model', messages, tools: TOOLS });
    const message = completion.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) break;
    for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: calculate(argumentsOf(call).expression) });
  }
  const last = messages[messages.length - 1];
  console.log(last.role === 'assistant' ? (last.content ?? '') : '');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
