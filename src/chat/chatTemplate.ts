/**
 * A Hugging Face model's Jinja chat template, rendered to text with @huggingface/jinja (which, like
 * transformers, trims blocks and provides `raise_exception` and `strftime_now`).
 *
 * Where the template comes from follows transformers: a `chat_template.jinja` file beside the
 * tokenizer wins over the `chat_template` entry of tokenizer_config.json, which is either one
 * template or a list of named ones (then the one named "default").
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import type { ChatMessage } from '../core/tokenizer';

export interface ChatTemplate {
  /** The whole conversation as the template writes it; with the generation prompt, the model's turn is next. */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string;
}

/** The special-token strings templates refer to by name (`bos_token`, `eos_token`, ...). */
export type TemplateSpecialTokens = Partial<Record<'bos_token' | 'eos_token' | 'pad_token' | 'unk_token', string>>;

export function createChatTemplate(source: string, specialTokens: TemplateSpecialTokens): ChatTemplate {
  const template = new Template(source);
  return {
    render: (messages, addGenerationPrompt) =>
      template.render({
        ...specialTokens,
        // Only role and content: a caller's message object may carry more fields (structural typing),
        // and a template that finds e.g. `tool_calls` on a message would render it differently.
        messages: messages.map((message) => ({ role: message.role, content: message.content })),
        add_generation_prompt: addGenerationPrompt,
      }),
  };
}

/** The chat template source of the model in `modelDir`, given its parsed tokenizer_config.json. */
export async function readChatTemplateSource(modelDir: string, tokenizerConfig: Record<string, unknown>): Promise<string> {
  const file = await readFile(join(modelDir, 'chat_template.jinja'), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (file !== undefined) return file;
  const configured = tokenizerConfig.chat_template;
  if (typeof configured === 'string') return configured;
  if (Array.isArray(configured)) {
    const named = configured.find((entry): entry is { name: string; template: string } => entry?.name === 'default' && typeof entry.template === 'string');
    if (named) return named.template;
  }
  throw new Error(
    `${modelDir} has no chat template: neither chat_template.jinja nor a "chat_template" (string, or a list with one named "default") in tokenizer_config.json`,
  );
}

/** A special token as tokenizer_config.json writes it: the string itself or an AddedToken object. */
export function specialTokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return undefined;
}

export function templateSpecialTokens(tokenizerConfig: Record<string, unknown>): TemplateSpecialTokens {
  const tokens: TemplateSpecialTokens = {};
  for (const name of ['bos_token', 'eos_token', 'pad_token', 'unk_token'] as const) {
    const text = specialTokenText(tokenizerConfig[name]);
    if (text !== undefined) tokens[name] = text;
  }
  return tokens;
}
