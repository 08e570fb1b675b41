/**
 * Tokenizes a rendered chat template so that only the template itself writes added tokens.
 *
 * A tokenizer maps every occurrence of an added token's string (`<|im_end|>`, `<|im_start|>`) to
 * that token, wherever it comes from. Message content is text from the environment, tools and
 * config; were its added-token strings tokenized as tokens, an observation (or bash output the
 * model itself caused) could close the turn and forge a system or assistant message. So:
 *
 *   1. before rendering, every added-token string in a message's content is escaped into a form
 *      no tokenizer matches (`escapeContent`), so the template's transformations (trim and the
 *      like) still apply to it;
 *   2. in the rendered text, every added-token string left is the template's own: the text is
 *      split there, as the tokenizer splits it (longest match first, `lstrip`/`rstrip` trimming the
 *      neighbouring whitespace), and those become their ids;
 *   3. the text between them is unescaped and tokenized with no added tokens at all, so content's
 *      `<|im_end|>` becomes the ordinary tokens of the characters `<|im_end|>`.
 *
 * Every added token counts, not only those marked special: some models mark chat-structure tokens
 * (tool-call markers) `special: false`. For text without added-token strings the ids are exactly
 * the tokenizer's own: the same split, and the same pieces tokenized the same way.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { z } from 'zod';

/** What this module reads of tokenizer.json: the added tokens, and the pre-tokenizer (checked by the tokenizer itself). */
const addedTokenSchema = z.object({
  id: z.number().int().nonnegative(),
  content: z.string().min(1),
  lstrip: z.boolean().optional(),
  rstrip: z.boolean().optional(),
});
const tokenizerJsonSchema = z.looseObject({ added_tokens: z.array(z.looseObject(addedTokenSchema.shape)).default([]) });

type AddedTokenJson = z.infer<typeof addedTokenSchema>;

interface PreTokenizerJson {
  type: string;
  prepend_scheme?: string;
  pretokenizers?: PreTokenizerJson[];
  [key: string]: unknown;
}

export interface TemplateTokenizer {
  /** The model's tokenizer as it is (decoding, token lookups). */
  readonly tokenizer: Tokenizer;
  /** A message's content with its added-token strings escaped; render this, then `encode` the result. */
  escapeContent(content: string): string;
  /** Ids of rendered template text: the template's added tokens as tokens, the (escaped) content as text. */
  encode(rendered: string): number[];
}

/**
 * Private-use character opening and closing an escape: ESC ESC stands for ESC itself, ESC <index>
 * ESC for the added token at that index. Digits and a private-use character survive the string
 * filters templates apply to content (trim, upper, lower).
 */
const ESC = '\uE000';
const ESCAPE = new RegExp(`${ESC}(\\d*)${ESC}`, 'g');

const regexLiteral = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Alternation of `strings`, longest first, so a match is the longest at its position (as the tokenizer's trie splits). */
function longestFirst(strings: readonly string[]): RegExp | undefined {
  if (strings.length === 0) return undefined;
  return new RegExp(
    [...strings]
      .sort((a, b) => b.length - a.length)
      .map(regexLiteral)
      .join('|'),
    'g',
  );
}

/**
 * The pre-tokenizer for text after an added token. A Metaspace pre-tokenizer whose prepend scheme
 * is "first" adds its space marker only to the first section of a text, the one before any added
 * token; a piece tokenized on its own is always first, so pieces after a token need "never".
 */
function laterSectionPreTokenizer(preTokenizer: PreTokenizerJson | null | undefined): PreTokenizerJson | null | undefined {
  if (!preTokenizer) return preTokenizer;
  if (preTokenizer.type === 'Sequence' && preTokenizer.pretokenizers)
    return { ...preTokenizer, pretokenizers: preTokenizer.pretokenizers.map((p) => laterSectionPreTokenizer(p)!) };
  if (preTokenizer.type === 'Metaspace' && preTokenizer.prepend_scheme === 'first') return { ...preTokenizer, prepend_scheme: 'never' };
  return preTokenizer;
}

type Section = { token: AddedTokenJson } | { text: string };

/** `tokenizerJson` and `tokenizerConfig`: the parsed tokenizer.json and tokenizer_config.json of a model. */
export function createTemplateTokenizer(tokenizerJson: Record<string, unknown>, tokenizerConfig: Record<string, unknown>): TemplateTokenizer {
  const parsed = tokenizerJsonSchema.safeParse(tokenizerJson);
  if (!parsed.success) throw new Error(`tokenizer.json: ${z.prettifyError(parsed.error)}`);
  const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  const addedTokens: readonly AddedTokenJson[] = parsed.data.added_tokens;
  const byContent = new Map(addedTokens.map((token) => [token.content, token]));
  const indexOf = new Map(addedTokens.map((token, index) => [token.content, index]));
  const addedPattern = longestFirst(addedTokens.map((token) => token.content));
  const contentPattern = longestFirst([ESC, ...addedTokens.map((token) => token.content)])!;

  const textOnly = { ...tokenizerJson, added_tokens: [] };
  const firstSection = new Tokenizer(textOnly, tokenizerConfig);
  const preTokenizer = tokenizerJson.pre_tokenizer as PreTokenizerJson | null | undefined;
  const laterPreTokenizer = laterSectionPreTokenizer(preTokenizer);
  const laterSection = laterPreTokenizer === preTokenizer ? firstSection : new Tokenizer({ ...textOnly, pre_tokenizer: laterPreTokenizer }, tokenizerConfig);

  const escapeContent = (content: string) => content.replace(contentPattern, (match) => (match === ESC ? ESC + ESC : `${ESC}${indexOf.get(match)}${ESC}`));

  /** Escaped content back to its text; refuses text whose escapes the template cut or rewrote. */
  function unescape(text: string): string {
    if (text.replace(ESCAPE, '').includes(ESC))
      throw new Error(
        'the rendered chat text has an unpaired U+E000, the escape trajflow puts around special-token text in message content: the chat template cut or rewrote that content, or writes U+E000 itself',
      );
    return text.replace(ESCAPE, (_, index: string) => {
      if (index === '') return ESC;
      const token = addedTokens[Number(index)];
      if (token === undefined) throw new Error(`the rendered chat text escapes added token number ${index}, which the tokenizer does not have`);
      return token.content;
    });
  }

  /** The text split at the added tokens in it, neighbours trimmed where a token strips whitespace. */
  function sections(text: string): Section[] {
    const out: Section[] = [];
    let at = 0;
    for (const match of addedPattern ? text.matchAll(addedPattern) : []) {
      out.push({ text: text.slice(at, match.index) }, { token: byContent.get(match[0])! });
      at = match.index + match[0].length;
    }
    out.push({ text: text.slice(at) });
    out.forEach((section, i) => {
      if (!('token' in section)) return;
      const before = out[i - 1] as { text: string };
      const after = out[i + 1] as { text: string };
      if (section.token.lstrip) before.text = before.text.trimEnd();
      if (section.token.rstrip) after.text = after.text.trimStart();
    });
    return out;
  }

  return {
    tokenizer,
    escapeContent,
    encode(rendered) {
      return sections(rendered).flatMap((section, i) => {
        if ('token' in section) return [section.token.id];
        if (section.text === '') return [];
        return (i === 0 ? firstSection : laterSection).encode(unescape(section.text), { add_special_tokens: false }).ids;
      });
    },
  };
}
