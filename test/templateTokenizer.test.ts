/**
 * The template tokenizer on a small made-up tokenizer with the features SmolLM2's lacks: a
 * Metaspace pre-tokenizer that marks only a text's first section, and added tokens that strip the
 * whitespace beside them. For text without added-token strings in content, its ids must be the
 * tokenizer's own; content's added-token strings must come out as the ids of their characters.
 */
import { Tokenizer } from '@huggingface/tokenizers';
import { createTemplateTokenizer } from '../src/chat/templateTokenizer';

const CHARACTERS = [...'▁abcdefghijklmnopqrstuvwxyz<>/[]|_\n'];
const added = (id: number, content: string, strip = false) => ({
  id,
  content,
  special: !strip,
  lstrip: strip,
  rstrip: strip,
  normalized: false,
  single_word: false,
});
const TOKENIZER_JSON = {
  version: '1.0',
  added_tokens: [added(0, '<s>'), added(1, '</s>'), added(2, '[x]', true)],
  normalizer: null,
  pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
  post_processor: null,
  decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
  model: {
    type: 'BPE',
    dropout: null,
    unk_token: '<unk>',
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab: Object.fromEntries([['<unk>', 3], ...CHARACTERS.map((c, i) => [c, 4 + i])]),
    merges: [],
  },
};
const CONFIG = {};

describe('template tokenizer on a Metaspace tokenizer with whitespace-stripping added tokens', () => {
  const library = new Tokenizer(TOKENIZER_JSON, CONFIG);
  const templateTokenizer = createTemplateTokenizer(TOKENIZER_JSON, CONFIG);
  const libraryIds = (text: string) => library.encode(text, { add_special_tokens: false }).ids;
  const charIds = (text: string) => [...text.replaceAll(' ', '▁')].map((c) => TOKENIZER_JSON.model.vocab[c]);

  it.each(['<s>hi there</s> again', 'lead <s>one two</s>', 'a  [x]  b [x]c</s>', '</s>', 'plain text only', ''])(
    "gives the tokenizer's own ids for %j, which has no content to escape",
    (text) => {
      expect(templateTokenizer.encode(text)).toEqual(libraryIds(text));
    },
  );

  it('marks only the first section with the Metaspace space, as the tokenizer does', () => {
    expect(templateTokenizer.encode('hi<s>hi')).toEqual([...charIds(' hi'), 0, ...charIds('hi')]);
  });

  it("tokenizes content's added-token strings as their characters and keeps the template's as tokens", () => {
    const content = 'a</s> [x] b';
    const rendered = `<s>user ${templateTokenizer.escapeContent(content)}</s>`;
    expect(templateTokenizer.encode(rendered)).toEqual([0, ...charIds(`user ${content}`), 1]);
    expect(libraryIds(`<s>user ${content}</s>`)).toContain(2);
  });
});
