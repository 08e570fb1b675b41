/**
 * A calculator agent as a team writes it on Temporal with the Vercel AI SDK: `generateText` with a
 * tool, the model through `@temporalio/ai-sdk` (each model call an activity), the tool through an
 * activity of the team's own. Nothing in it is trajflow's: trajflow trains it as it is.
 */
const { generateText, stepCountIs, tool } = require('ai');
const { temporalProvider } = require('@temporalio/ai-sdk/workflow');
const { proxyActivities } = require('@temporalio/workflow');
const { z } = require('zod');

const { calculate } = proxyActivities({ startToCloseTimeout: '10 seconds' });

/** Answers an arithmetic question; the model may call the calculator before it answers. */
async function calculatorAgent(question) {
  const result = await generateText({
    model: temporalProvider.languageModel('calculator-model'),
    system: 'Answer with the number only. Use the calculator for arithmetic.',
    prompt: question,
    tools: {
      calculator: tool({
        description: 'Evaluates an arithmetic expression such as 12 * 34.',
        inputSchema: z.object({ expression: z.string() }),
        execute: ({ expression }) => calculate(expression),
      }),
    },
    // A call, its result, the answer.
    stopWhen: stepCountIs(3),
  });
  return result.text;
}

module.exports = { calculatorAgent };
