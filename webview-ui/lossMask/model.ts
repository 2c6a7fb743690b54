// The loss-mask view's model, without a browser: one entry per token with its class
// (supervised, masked, harness), whether it is a special token, what it shows (blanks made
// visible), and the counts and warnings of the header. A TRL chat row (issue 30: `mask.chat`)
// has two rules: a token supervised by both is `sup`, by the generation blocks only `gen`, by
// the prefix difference only `prefix` (the rules disagree there), by neither `mask`; its
// findings are the banners, and the header counts each rule for the row and the file.
import type { ChatFileCounts } from '../../core/protocol/lsp';
import type { MaskView } from '../../core/protocol/panels';

export type TokenClass = 'sup' | 'mask' | 'harness' | 'gen' | 'prefix';

export interface TokenCell {
  i: number;
  id: number;
  start: number;
  end: number;
  cls: TokenClass;
  special: boolean;
  /** The token's text with newlines and tabs made visible (`↵` then the line break). */
  display: string;
  /** The raw text, for the info line. */
  text: string;
  /** Chat rows: the role of the token's message (or `template`) and its index (-1: none). */
  role?: string;
  message?: number;
}

/** A chat row's counts per rule, for the row and the file. */
export interface ChatCounts {
  generation: number;
  prefix: number;
  /** Supervised by both rules. */
  both: number;
  /** Tokens the rules disagree on (one supervises, the other does not). */
  disagree: number;
  hasGenerationTags: boolean;
  template: string;
  file: ChatFileCounts;
}

export interface MaskCounts {
  tokens: number;
  supervised: number;
  masked: number;
  harness: number;
  special: number;
  /** supervised / tokens (0 for an empty transcript). */
  share: number;
}

export interface Banner {
  level: 'warning' | 'error' | 'info';
  text: string;
}

export interface MaskModel {
  cells: TokenCell[];
  counts: MaskCounts;
  banners: Banner[];
  /** Present for a TRL chat row. */
  chat: ChatCounts | null;
}

export function visible(text: string): string {
  return text.replace(/\t/g, '→\t').replace(/\r?\n/g, (m) => `↵${m}`);
}

export function maskModel(view: MaskView): MaskModel {
  const m = view.mask;
  if (m.chat) return chatMaskModel(view);
  const cells: TokenCell[] = [];
  let supervised = 0;
  let harness = 0;
  let special = 0;
  for (let i = 0; i < m.ids.length; i++) {
    const [start, end] = m.offsets[i]!;
    const isHarness = view.harness !== null && view.harness[i] === true;
    const cls: TokenClass = isHarness ? 'harness' : m.supervised[i] ? 'sup' : 'mask';
    if (cls === 'sup') supervised++;
    if (cls === 'harness') harness++;
    if (m.special[i]) special++;
    const text = m.text.slice(start, end);
    cells.push({ i, id: m.ids[i]!, start, end, cls, special: m.special[i]!, display: visible(text), text });
  }
  const tokens = cells.length;
  const counts: MaskCounts = { tokens, supervised, masked: tokens - supervised - harness, harness, special, share: tokens ? supervised / tokens : 0 };
  const banners: Banner[] = [];
  if (tokens === 0) banners.push({ level: 'info', text: 'The transcript is empty.' });
  else if (supervised === 0) {
    banners.push({ level: 'warning', text: 'This example supervises nothing: SFT learns nothing from it (no assistant content).' });
  } else if (supervised === tokens) {
    banners.push({ level: 'warning', text: 'This example supervises everything: the prompt and the tool results are loss targets too.' });
  }
  if (m.overLength) {
    banners.push({ level: 'error', text: `${tokens} tokens is over max_len ${m.maxLen}: SFT drops this example (never truncates it).` });
  }
  return { cells, counts, banners, chat: null };
}

function chatMaskModel(view: MaskView): MaskModel {
  const m = view.mask;
  const c = m.chat!;
  const cells: TokenCell[] = [];
  let both = 0;
  let generation = 0;
  let prefix = 0;
  let special = 0;
  for (let i = 0; i < m.ids.length; i++) {
    const [start, end] = m.offsets[i]!;
    const g = c.generation[i]!;
    const p = c.prefix[i]!;
    if (g) generation++;
    if (p) prefix++;
    if (g && p) both++;
    if (m.special[i]) special++;
    const cls: TokenClass = g && p ? 'sup' : g ? 'gen' : p ? 'prefix' : 'mask';
    const text = m.text.slice(start, end);
    cells.push({ i, id: m.ids[i]!, start, end, cls, special: m.special[i]!, display: visible(text), text, role: c.roles[i]!, message: c.messages[i]! });
  }
  const tokens = cells.length;
  const either = generation + prefix - both;
  const counts: MaskCounts = { tokens, supervised: either, masked: tokens - either, harness: 0, special, share: tokens ? either / tokens : 0 };
  // Errors first: the all-zero mask is the one that makes a fine-tune train on nothing.
  const banners: Banner[] = [...c.findings]
    .sort((a, b) => (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1))
    .map((f) => ({ level: f.severity, text: `${f.code}: ${f.message}` }));
  if (tokens === 0) banners.push({ level: 'info', text: 'The row renders to no tokens.' });
  return {
    cells,
    counts,
    banners,
    chat: { generation, prefix, both, disagree: generation + prefix - 2 * both, hasGenerationTags: c.hasGenerationTags, template: c.template, file: c.file },
  };
}

/** The file's line of a chat row's header: each rule's supervised tokens over the rows counted. */
export function fileSummary(f: ChatFileCounts): string {
  const rows = `${f.rows} row${f.rows === 1 ? '' : 's'}`;
  const failed = f.failed ? `, ${f.failed} without a mask` : '';
  const pending = f.complete ? '' : ` (checking: ${f.rows + f.failed} of ${f.lines} rows so far)`;
  return `file: ${f.generation} supervised by the generation blocks, ${f.prefix} by the prefix difference, of ${f.tokens} tokens in ${rows}${failed}${pending}`;
}

/** What a chat token's class means, in words. */
export const CHAT_CLASS_WORDS: Record<'sup' | 'gen' | 'prefix' | 'mask', string> = {
  sup: 'supervised by both rules',
  gen: 'supervised by the generation blocks only (the rules disagree)',
  prefix: 'supervised by the prefix difference only (the rules disagree)',
  mask: 'masked by both rules',
};

/** "45.4%" */
export function percent(share: number): string {
  return `${(100 * share).toFixed(1)}%`;
}

/** The info line for one token. */
export function describeToken(c: TokenCell): string {
  if (c.role !== undefined) {
    const where = c.message !== undefined && c.message >= 0 ? `${c.role} (message ${c.message})` : c.role;
    const what = CHAT_CLASS_WORDS[c.cls as 'sup' | 'gen' | 'prefix' | 'mask'] ?? c.cls;
    return `token ${c.i} · id ${c.id} · ${where} · ${what}${c.special ? ' · special' : ''} · ${JSON.stringify(c.text)}`;
  }
  const what = c.cls === 'sup' ? 'supervised' : c.cls === 'harness' ? 'harness text (not supervised)' : 'masked';
  return `token ${c.i} · id ${c.id} · offset ${c.start}–${c.end} · ${what}${c.special ? ' · special' : ''} · ${JSON.stringify(c.text)}`;
}
