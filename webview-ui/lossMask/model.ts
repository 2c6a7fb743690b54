// The loss-mask view's model, without a browser: one entry per token with its class
// (supervised, masked, harness), whether it is a special token, what it shows (blanks made
// visible), and the counts and warnings of the header.
import type { MaskView } from '../../core/protocol/panels';

export type TokenClass = 'sup' | 'mask' | 'harness';

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
}

export function visible(text: string): string {
  return text.replace(/\t/g, '→\t').replace(/\r?\n/g, (m) => `↵${m}`);
}

export function maskModel(view: MaskView): MaskModel {
  const m = view.mask;
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
  return { cells, counts, banners };
}

/** "45.4%" */
export function percent(share: number): string {
  return `${(100 * share).toFixed(1)}%`;
}

/** The info line for one token. */
export function describeToken(c: TokenCell): string {
  const what = c.cls === 'sup' ? 'supervised' : c.cls === 'harness' ? 'harness text (not supervised)' : 'masked';
  return `token ${c.i} · id ${c.id} · offset ${c.start}–${c.end} · ${what}${c.special ? ' · special' : ''} · ${JSON.stringify(c.text)}`;
}
