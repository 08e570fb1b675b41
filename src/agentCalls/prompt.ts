/**
 * An agent framework's prompt as trajflow reads it: a list of items, each either a message trajflow
 * renders with the model's chat template (system, user, tool results) or a reply the model gave
 * earlier (text and tool calls), which trajflow matches to the tokens it sampled instead of
 * rendering it again (./history).
 *
 * The AI SDK's prompt (LanguageModelV4Prompt) and tool list come in here. Tool definitions join
 * the system prompt as the tool agent writes them (src/tools/render): one signature a line and how
 * to call a tool in the configured format. Models read text only: a file part is refused by name.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4Prompt, LanguageModelV4ToolResultOutput } from '@ai-sdk/provider';
import type { ChatMessage } from '../core/tokenizer';
import type { ToolCallFormat } from '../tools/parsers';
import { toolSection, toolSignature } from '../tools/render';
import type { Reply, ReplyCall } from './reply';

export type PromptItem = { kind: 'message'; message: ChatMessage } | { kind: 'reply'; reply: Reply };

/** A prompt trajflow cannot render, with where in it. */
export class UnsupportedPromptError extends Error {
  override name = 'UnsupportedPromptError';
}

type Tools = LanguageModelV4CallOptions['tools'];

/** The AI SDK call's prompt and tools as prompt items. */
export function promptItemsOf(prompt: LanguageModelV4Prompt, tools: Tools, format: ToolCallFormat): PromptItem[] {
  const items = prompt.flatMap((message, index) => itemsOf(message, index));
  const section = toolSectionOf(tools, format);
  if (section === undefined) return items;
  const first = items[0];
  if (first?.kind === 'message' && first.message.role === 'system') {
    return [{ kind: 'message', message: { role: 'system', content: `${first.message.content}\n${section}` } }, ...items.slice(1)];
  }
  return [{ kind: 'message', message: { role: 'system', content: section } }, ...items];
}

function toolSectionOf(tools: Tools, format: ToolCallFormat): string | undefined {
  if (!tools || tools.length === 0) return undefined;
  const signatures = tools.map((tool, index) => {
    if (tool.type !== 'function')
      throw new UnsupportedPromptError(`tools[${index}] (${tool.name}) is a provider tool; trajflow's models call function tools only`);
    return toolSignature(tool.name, tool.description, tool.inputSchema);
  });
  return toolSection(format, signatures);
}

function itemsOf(message: LanguageModelV4Prompt[number], index: number): PromptItem[] {
  const where = `prompt[${index}] (${message.role})`;
  switch (message.role) {
    case 'system':
      return [{ kind: 'message', message: { role: 'system', content: message.content } }];
    case 'user':
      return [{ kind: 'message', message: { role: 'user', content: textOf(message.content, where) } }];
    case 'assistant':
      return [{ kind: 'reply', reply: replyOf(message.content, where) }];
    case 'tool':
      return message.content.map((part, partIndex) => {
        if (part.type !== 'tool-result') throw new UnsupportedPromptError(`${where} part ${partIndex}: ${part.type} (tool approvals are not supported)`);
        return { kind: 'message', message: { role: 'tool', content: toolOutputText(part.output) } };
      });
  }
}

function textOf(parts: readonly { type: string; text?: string }[], where: string): string {
  return parts
    .map((part, index) => {
      if (part.type !== 'text') throw new UnsupportedPromptError(`${where} part ${index}: ${part.type}; trajflow's models read text only`);
      return part.text ?? '';
    })
    .join('');
}

function replyOf(parts: Extract<LanguageModelV4Prompt[number], { role: 'assistant' }>['content'], where: string): Reply {
  let text = '';
  const calls: ReplyCall[] = [];
  parts.forEach((part, index) => {
    if (part.type === 'text') text += part.text;
    else if (part.type === 'tool-call') calls.push({ id: part.toolCallId, name: part.toolName, input: part.input });
    // A tool result inside an assistant message is a provider-executed tool's; trajflow runs none.
    else throw new UnsupportedPromptError(`${where} part ${index}: ${part.type} in an assistant message`);
  });
  return { text: text.trim(), calls };
}

/** What the model reads of a tool's result. */
export function toolOutputText(output: LanguageModelV4ToolResultOutput): string {
  switch (output.type) {
    case 'text':
      return output.value;
    case 'json':
      return JSON.stringify(output.value);
    case 'error-text':
      return `error: ${output.value}`;
    case 'error-json':
      return `error: ${JSON.stringify(output.value)}`;
    case 'execution-denied':
      return `denied${output.reason ? `: ${output.reason}` : ''}`;
    case 'content':
      return output.value.map((part) => (part.type === 'text' ? part.text : `[${part.type}]`)).join('');
  }
}
