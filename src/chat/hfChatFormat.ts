/**
 * A real model's chat format: its own Jinja chat template (./chatTemplate) and its own tokenizer
 * (@huggingface/tokenizers, tokenizer.json), rendered message by message.
 *
 * Write T(messages, g) for the template's text, g = add_generation_prompt, and ids(text) for the
 * tokenizer without added special tokens (the template writes the special tokens as text; the
 * tokenizer maps them to their ids). P is a placeholder standing for the previous completion.
 * Message content is always text: T sees it with its special-token strings escaped, and ids maps
 * only the template's own special tokens to their ids (./templateTokenizer).
 *
 *   start         ids(T(messages, true)).
 *   closer C      what T writes right after an assistant message's content: the text after P in
 *                 T([probe system, probe user, assistant P], false). SmolLM2: "<|im_end|>\n".
 *   end token E   the added token C begins with (SmolLM2: <|im_end|> = 2); none if C begins with text.
 *   delta D       the text after P in T([probe system, probe user, assistant P, ...messages], true).
 *                 It begins with C, then the new messages, then the generation prompt. The probe
 *                 system message means a template that adds a default system message when there is
 *                 none adds it in the start only, never again in a delta.
 *   continuation  ids(D without its leading E) if the previous completion ends with E (the model
 *                 sampled it as its stop token), else ids(D) (it hit its token limit, so the
 *                 template's E is written for it). The newline after E is always the template's.
 *   stop tokens   E and the eos tokens (tokenizer_config.json eos_token, generation_config.json
 *                 eos_token_id). A completion that stopped on an eos other than E still gets E.
 *
 * Token boundaries. The delta is tokenized alone and the completion is never re-tokenized. The
 * completion/delta boundary always sits at E (the completion's last token, or the delta's first),
 * and the tokenizer splits text at added tokens before anything merges, so there the ids equal
 * those of tokenizing the whole conversation at once. The generation-prompt/completion boundary
 * has no added token (SmolLM2's prompt ends in "assistant\n"): the sampled ids equal the whole-text
 * tokenization only when the completion starts a new pre-token anyway; for one starting with "\n",
 * whole-text tokenization would group its newlines with the prompt's. The turn-by-turn ids are
 * what the model saw and sampled, so they are the ones trajflow keeps and trains on.
 *
 * Templates that render earlier messages differently once later ones are added (e.g. ones keying on
 * `loop.last`) cannot be matched turn by turn without re-rendering the context, which trajflow
 * never does: the rule above still applies (each turn's prompt is the previous prompt, completion
 * and delta) and `rendersIncrementally` tells, from probe conversations checked at load, whether
 * it equals the template rendering the whole conversation at once.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Tokenizer } from '@huggingface/tokenizers';
import type { ChatMessage } from '../core/tokenizer';
import { createChatTemplate, readChatTemplateSource, specialTokenText, templateSpecialTokens, type ChatTemplate } from './chatTemplate';
import type { ChatFormat } from './format';
import { createTemplateTokenizer, type TemplateTokenizer } from './templateTokenizer';

export interface HfChatFormat extends ChatFormat {
  /** E above: the token that closes an assistant message, if the template's closer begins with one. */
  readonly endOfTurnToken: number | undefined;
  /** Whether turn-by-turn rendering writes the same text as the template given the whole conversation. */
  readonly rendersIncrementally: boolean;
}

export interface HfChatFormatParts {
  tokenizer: TemplateTokenizer;
  template: ChatTemplate;
  /** Ids of the model's end-of-sequence tokens. */
  eosTokenIds: readonly number[];
  /** Apply the tokenizer's "clean up tokenization spaces" heuristic when decoding (off unless configured). */
  cleanUpTokenizationSpaces?: boolean;
}

/** Stands for the previous completion in probe renders; plain word characters survive `trim` and friends. */
const PLACEHOLDER = 'TRAJFLOW_PREVIOUS_COMPLETION_PLACEHOLDER';
const PROBE_HEAD: readonly ChatMessage[] = [
  { role: 'system', content: 'TRAJFLOW_PROBE_SYSTEM' },
  { role: 'user', content: 'TRAJFLOW_PROBE_USER' },
];

/** The text T writes after the previous completion: the closer, `messages`, and the generation prompt if asked. */
function textAfterCompletion(template: ChatTemplate, messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
  const rendered = template.render([...PROBE_HEAD, { role: 'assistant', content: PLACEHOLDER }, ...messages], addGenerationPrompt);
  const at = rendered.indexOf(PLACEHOLDER);
  if (at < 0)
    throw new Error("the chat template does not write an assistant message's content verbatim, so a conversation cannot be continued after a completion");
  return rendered.slice(at + PLACEHOLDER.length);
}

/** The text of `conversation` rendered the way trajflow builds it: the start, then each assistant message + its delta. */
function turnByTurnText(template: ChatTemplate, conversation: readonly ChatMessage[]): string {
  const firstAssistant = conversation.findIndex((message) => message.role === 'assistant');
  if (firstAssistant < 0) return template.render(conversation, true);
  let text = template.render(conversation.slice(0, firstAssistant), true);
  for (let i = firstAssistant; i < conversation.length;) {
    let next = i + 1;
    while (next < conversation.length && conversation[next].role !== 'assistant') next++;
    text += conversation[i].content + textAfterCompletion(template, conversation.slice(i + 1, next), true);
    i = next;
  }
  return text;
}

/** Conversations on which turn-by-turn rendering is compared with the template's whole rendering at load. */
const PROBE_CONVERSATIONS: readonly (readonly ChatMessage[])[] = [
  [
    { role: 'system', content: 'probe system' },
    { role: 'user', content: 'probe user one' },
    { role: 'assistant', content: 'probe assistant one' },
    { role: 'tool', content: 'probe tool result' },
    { role: 'user', content: 'probe user two' },
    { role: 'assistant', content: 'probe assistant two' },
    { role: 'user', content: 'probe user three' },
  ],
  [
    { role: 'user', content: 'probe user one' },
    { role: 'assistant', content: 'probe assistant one' },
    { role: 'user', content: 'probe user two' },
  ],
];

/** The added token `text` begins with, as the tokenizer splits it, or undefined if it begins with ordinary text. */
function leadingAddedToken(tokenizer: Tokenizer, text: string): { id: number; content: string } | undefined {
  const [first] = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const added = first === undefined ? undefined : tokenizer.get_added_tokens_decoder().get(first);
  return added !== undefined && text.startsWith(added.content) ? { id: first, content: added.content } : undefined;
}

/** `template` rendering every message's content with its special-token strings escaped, for `tokenizer.encode`. */
function escapingContent(template: ChatTemplate, tokenizer: TemplateTokenizer): ChatTemplate {
  return {
    render: (messages, addGenerationPrompt) =>
      template.render(
        messages.map((message) => ({ ...message, content: tokenizer.escapeContent(message.content) })),
        addGenerationPrompt,
      ),
  };
}

export function createHfChatFormat(parts: HfChatFormatParts): HfChatFormat {
  const { eosTokenIds, cleanUpTokenizationSpaces = false } = parts;
  const { tokenizer } = parts.tokenizer;
  const template = escapingContent(parts.template, parts.tokenizer);
  const ids = (text: string) => parts.tokenizer.encode(text);
  const closer = textAfterCompletion(template, [], false);
  const endToken = leadingAddedToken(tokenizer, closer);
  const rendersIncrementally = PROBE_CONVERSATIONS.every((conversation) => turnByTurnText(template, conversation) === template.render(conversation, true));

  return {
    endOfTurnToken: endToken?.id,
    rendersIncrementally,
    stopTokens: Object.freeze([...new Set([...(endToken ? [endToken.id] : []), ...eosTokenIds])]),
    renderConversationStart: (messages) => ids(template.render(messages, true)),
    renderContinuation(previousCompletion, messages) {
      const delta = textAfterCompletion(template, messages, true);
      const sampledEnd = endToken !== undefined && previousCompletion[previousCompletion.length - 1] === endToken.id;
      if (!sampledEnd) return ids(delta);
      if (!delta.startsWith(endToken.content))
        throw new Error(`the chat template closed an assistant message without ${endToken.content} before ${JSON.stringify(messages.map((m) => m.role))}`);
      return ids(delta.slice(endToken.content.length));
    },
    decode: (completionIds) => tokenizer.decode([...completionIds], { skip_special_tokens: true, clean_up_tokenization_spaces: cleanUpTokenizationSpaces }),
  };
}

async function readJson(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
}

/** generation_config.json's eos_token_id (one id or a list), or none if the file or field is absent. */
async function generationEosIds(modelDir: string): Promise<number[]> {
  const config = await readJson(join(modelDir, 'generation_config.json')).catch((error: NodeJS.ErrnoException): Record<string, unknown> => {
    if (error.code === 'ENOENT') return {};
    throw error;
  });
  const eos = config.eos_token_id;
  return (Array.isArray(eos) ? eos : [eos]).filter((id): id is number => Number.isInteger(id));
}

/**
 * The chat format of the Hugging Face model directory `modelDir`: tokenizer.json,
 * tokenizer_config.json (special tokens, chat_template), chat_template.jinja if present, and
 * generation_config.json's eos ids if present.
 */
export async function loadChatFormat(modelDir: string): Promise<HfChatFormat> {
  const [tokenizerJson, tokenizerConfig] = await Promise.all([readJson(join(modelDir, 'tokenizer.json')), readJson(join(modelDir, 'tokenizer_config.json'))]);
  const templateTokenizer = createTemplateTokenizer(tokenizerJson, tokenizerConfig);
  const { tokenizer } = templateTokenizer;
  const eosText = specialTokenText(tokenizerConfig.eos_token);
  const eosFromConfig = eosText === undefined ? undefined : tokenizer.token_to_id(eosText);
  return createHfChatFormat({
    tokenizer: templateTokenizer,
    template: createChatTemplate(await readChatTemplateSource(modelDir, tokenizerConfig), templateSpecialTokens(tokenizerConfig)),
    eosTokenIds: [...(eosFromConfig === undefined ? [] : [eosFromConfig]), ...(await generationEosIds(modelDir))],
    cleanUpTokenizationSpaces: tokenizerConfig.clean_up_tokenization_spaces === true,
  });
}
