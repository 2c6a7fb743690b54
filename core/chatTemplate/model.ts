// A Hugging Face tokenizer folder's contents, parsed: the tokenizer (tokenizer.json through
// @huggingface/tokenizers), its special tokens, and the chat template. Pure: the caller reads
// the files (cli/, language-server/) and hands their texts here.
import { Tokenizer } from '@huggingface/tokenizers';
import { isObj } from '../protocol/isObj';
import { ChatTemplateError, CompiledTemplate, compileChatTemplate, pickTemplate } from './template';
import { TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../protocol/folders';

export interface TokenizerFolderTexts {
  /** tokenizer.json's text (required). */
  tokenizerJson: string;
  /** tokenizer_config.json's text, when the folder has one. */
  tokenizerConfigJson?: string;
  /** chat_template.jinja's text, when the folder has one. */
  chatTemplateJinja?: string;
}

export interface ChatModel {
  tokenizer: Tokenizer;
  /** Texts of the added tokens marked special (the end-of-turn candidates). */
  specialTokens: ReadonlySet<string>;
  /** bos_token, eos_token, pad_token, unk_token as the template sees them. */
  tokenVars: Record<string, string>;
  /** The compiled template for rows without tools, and for rows with tools. */
  template(hasTools: boolean): CompiledTemplate;
  /** Ids of text encoded alone (no special tokens added): the "alone" side of the context check. */
  encode(text: string): number[];
  /** One id's text, specials kept, no clean-up. */
  decodeOne(id: number): string;
  decode(ids: number[]): string;
}

function parseJson(text: string, file: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new ChatTemplateError(`${file} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The token's text: tokenizer_config.json writes it as a string or as an AddedToken object. */
function tokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (isObj(v) && typeof v['content'] === 'string') return v['content'];
  return undefined;
}

export function loadChatModel(files: TokenizerFolderTexts): ChatModel {
  const tj = parseJson(files.tokenizerJson, TOKENIZER_FILE);
  if (!isObj(tj) || !isObj(tj['model'])) throw new ChatTemplateError('tokenizer.json has no "model" object: not a Hugging Face tokenizer.json');
  const config = files.tokenizerConfigJson !== undefined ? parseJson(files.tokenizerConfigJson, TOKENIZER_CONFIG_FILE) : {};
  if (!isObj(config)) throw new ChatTemplateError('tokenizer_config.json is not a JSON object');
  let tokenizer: Tokenizer;
  try {
    tokenizer = new Tokenizer(tj, config);
    tokenizer.encode('a', { add_special_tokens: false });
  } catch (err) {
    throw new ChatTemplateError(`tokenizer.json does not load: ${err instanceof Error ? err.message : String(err)}`);
  }
  const specialTokens = new Set<string>();
  for (const t of Array.isArray(tj['added_tokens']) ? tj['added_tokens'] : []) {
    if (isObj(t) && typeof t['content'] === 'string' && t['special'] === true) specialTokens.add(t['content']);
  }
  const tokenVars: Record<string, string> = {};
  for (const k of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const v = tokenText(config[k]);
    if (v !== undefined) tokenVars[k] = v;
  }
  // Compile lazily, once per choice: a folder whose tool_use template is broken still serves rows without tools.
  const compiled = new Map<boolean, CompiledTemplate>();
  const template = (hasTools: boolean): CompiledTemplate => {
    let t = compiled.get(hasTools);
    if (!t) {
      t = compileChatTemplate(pickTemplate(files.chatTemplateJinja, config['chat_template'], hasTools));
      compiled.set(hasTools, t);
    }
    return t;
  };
  // Fail early on a folder without any template, so the cause is named once.
  template(false);
  const oneCache = new Map<number, string>();
  return {
    tokenizer,
    specialTokens,
    tokenVars,
    template,
    encode: segmentedEncoder(tokenizer, Array.isArray(tj['added_tokens']) ? tj['added_tokens'] : []),
    decodeOne: (id) => {
      let s = oneCache.get(id);
      if (s === undefined) {
        s = tokenizer.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
        oneCache.set(id, s);
      }
      return s;
    },
    decode: (ids) => tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }),
  };
}

const SEGMENT_CACHE_MAX = 50_000;
const CHECKS_BEFORE_TRUST = 3;

/**
 * Encoding with a cache per piece between added tokens. The tokenizer splits on added tokens
 * before anything else, so a dataset's repeated pieces (a system prompt, a tool list) need
 * encoding once. That holds unless a normalizer or pre-tokenizer treats the first piece
 * differently (Metaspace's prepend_scheme "first") or an added token strips the whitespace
 * around it: so the first rows are encoded both ways, and any difference (or such a token)
 * keeps whole-text encoding for good.
 */
function segmentedEncoder(tokenizer: Tokenizer, addedTokens: unknown[]): (text: string) => number[] {
  const whole = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false }).ids;
  const added: { content: string; id: number }[] = [];
  let mode: 'checking' | 'segments' | 'whole' = 'checking';
  for (const t of addedTokens) {
    if (!isObj(t) || typeof t['content'] !== 'string' || typeof t['id'] !== 'number' || t['content'] === '') continue;
    if (t['lstrip'] === true || t['rstrip'] === true || t['single_word'] === true || t['normalized'] === true) mode = 'whole';
    added.push({ content: t['content'], id: t['id'] });
  }
  if (added.length === 0 || mode === 'whole') return whole;
  const idOf = new Map(added.map((a) => [a.content, a.id]));
  const split = new RegExp(
    added
      .map((a) => a.content)
      .sort((a, b) => b.length - a.length)
      .map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
      .join('|'),
    'g',
  );
  const cache = new Map<string, number[]>();
  const piece = (text: string): number[] => {
    let ids = cache.get(text);
    if (!ids) {
      if (cache.size >= SEGMENT_CACHE_MAX) cache.clear();
      ids = whole(text);
      cache.set(text, ids);
    }
    return ids;
  };
  const segmented = (text: string): number[] => {
    const out: number[] = [];
    let at = 0;
    for (const m of text.matchAll(split)) {
      if (m.index > at) for (const id of piece(text.slice(at, m.index))) out.push(id);
      out.push(idOf.get(m[0])!);
      at = m.index + m[0].length;
    }
    if (at < text.length) for (const id of piece(text.slice(at))) out.push(id);
    return out;
  };
  let checked = 0;
  return (text: string): number[] => {
    if (mode === 'segments') return segmented(text);
    if (mode === 'whole') return whole(text);
    const a = whole(text);
    const b = segmented(text);
    if (a.length === b.length && a.every((id, i) => id === b[i])) {
      if (++checked >= CHECKS_BEFORE_TRUST) mode = 'segments';
    } else mode = 'whole';
    return a;
  };
}
