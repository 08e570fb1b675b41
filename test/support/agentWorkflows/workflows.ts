/**
 * Agent workflows written with the AI SDK, as a team would, for the suite: the trajectory is the
 * workflow, trajflow serves its model calls. `checkedAgent` makes three calls: an answer, a check
 * that continues the conversation (the AI SDK sends the whole history back), and a summary over an
 * edited history (the first exchange replaced by a note), which must start a new segment.
 */
import { generateText } from 'ai';
import { temporalProvider } from '@temporalio/ai-sdk/workflow';

const model = temporalProvider.languageModel('suite-model');
const SYSTEM = 'Answer with the number only.';

export async function checkedAgent(question: string): Promise<string> {
  const first = await generateText({ model, system: SYSTEM, prompt: question });
  const checked = await generateText({
    model,
    system: SYSTEM,
    messages: [{ role: 'user', content: question }, ...first.response.messages, { role: 'user', content: 'Check it.' }],
  });
  const summary = await generateText({ model, system: SYSTEM, prompt: `Earlier answers: ${checked.text.length} characters. ${question}` });
  return summary.text;
}
