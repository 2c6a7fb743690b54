// The character-level acceptor for the two tool-call templates, as the seed's grammar.py:
// a SET of live states, so the shared prefix '{"tool": "' branches at 's' vs 'c' without
// backtracking. It constrains syntax only, never the decision to call a tool or answer.

export interface Hole {
  readonly name: string;
  readonly chars: ReadonlySet<string>;
  readonly minLen: number;
  readonly maxLen: number;
}
export type TemplateItem = string | Hole;
export interface Template {
  readonly tool: string;
  readonly items: readonly TemplateItem[];
}

const charSet = (s: string): ReadonlySet<string> => new Set(s);
const DIGITS_1_9 = charSet('123456789');
const QUERY_CHARS = charSet('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._,()-');
const EXPR_CHARS = charSet('0123456789+-*/.() ');

export const SEARCH_TEMPLATE: Template = {
  tool: 'search',
  items: [
    '{"tool": "search", "args": {"query": "',
    { name: 'query', chars: QUERY_CHARS, minLen: 1, maxLen: 64 },
    '", "k": ',
    { name: 'k', chars: DIGITS_1_9, minLen: 1, maxLen: 1 },
    '}}',
  ],
};
export const CALC_TEMPLATE: Template = {
  tool: 'calc',
  items: ['{"tool": "calc", "args": {"expr": "', { name: 'expr', chars: EXPR_CHARS, minLen: 1, maxLen: 40 }, '"}}'],
};
export const TEMPLATES: readonly Template[] = [SEARCH_TEMPLATE, CALC_TEMPLATE];

/**
 * A state (template, item, chars consumed within the item) packed into one integer so a
 * state set is a small sorted array of numbers, cheap to hash for the token-mask cache.
 */
export type State = number;
/** Sorted, duplicate-free. Empty = rejected. */
export type StateSet = readonly State[];

const pack = (ti: number, ii: number, n: number): State => (ti << 16) | (ii << 8) | n;
export const unpackState = (s: State): { template: number; item: number; consumed: number } => ({
  template: s >> 16,
  item: (s >> 8) & 0xff,
  consumed: s & 0xff,
});

// Every function below takes the templates it runs (default: the textbook's two); a user's
// world may narrow a tool's argument characters or length (core/worldTools.ts, docs/worlds.md).
export function startStates(templates: readonly Template[] = TEMPLATES): StateSet {
  return templates.map((_, ti) => pack(ti, 0, 0));
}

function successors(templates: readonly Template[], ti: number, ii: number, n: number, ch: string, out: Set<State>): void {
  const items = templates[ti]!.items;
  if (ii >= items.length) return; // complete: nothing may follow
  const item = items[ii]!;
  if (typeof item === 'string') {
    if (item[n] === ch) out.add(n + 1 < item.length ? pack(ti, ii, n + 1) : pack(ti, ii + 1, 0));
    return;
  }
  if (item.chars.has(ch) && n < item.maxLen) out.add(pack(ti, ii, n + 1));
  // Long enough: close the hole and hand `ch` to the next item.
  if (n >= item.minLen) successors(templates, ti, ii + 1, 0, ch, out);
}

/** Consume one character (one code point). */
export function step(states: StateSet, ch: string, templates: readonly Template[] = TEMPLATES): StateSet {
  const out = new Set<State>();
  for (const s of states) successors(templates, s >> 16, (s >> 8) & 0xff, s & 0xff, ch, out);
  return out.size === 0 ? EMPTY : [...out].sort((a, b) => a - b);
}
const EMPTY: StateSet = Object.freeze([]) as StateSet;

/**
 * The templates with `prefix` to be read before each (a SentencePiece tokenizer's prefix space
 * before the call's first character); the same templates when prefix is ''.
 */
export function templatesWithPrefix(templates: readonly Template[], prefix: string): readonly Template[] {
  if (prefix === '') return templates;
  return templates.map((t) => {
    const [first, ...rest] = t.items;
    return { ...t, items: typeof first === 'string' ? [prefix + first, ...rest] : [prefix, ...t.items] };
  });
}

/** True iff some live state sits at the end of its template: `<|end|>` is legal now. */
export function accepts(states: StateSet, templates: readonly Template[] = TEMPLATES): boolean {
  return states.some((s) => (s >> 8 & 0xff) >= templates[s >> 16]!.items.length);
}

function collectAllowed(templates: readonly Template[], ti: number, ii: number, n: number, out: Set<string>): void {
  const items = templates[ti]!.items;
  if (ii >= items.length) return;
  const item = items[ii]!;
  if (typeof item === 'string') {
    out.add(item[n]!);
    return;
  }
  if (n < item.maxLen) for (const c of item.chars) out.add(c);
  if (n >= item.minLen) collectAllowed(templates, ti, ii + 1, 0, out);
}

/** Every single character that keeps at least one state alive, sorted by code point. */
export function allowedChars(states: StateSet, templates: readonly Template[] = TEMPLATES): string[] {
  const out = new Set<string>();
  for (const s of states) collectAllowed(templates, s >> 16, (s >> 8) & 0xff, s & 0xff, out);
  return [...out].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
}

export interface GrammarVerdict {
  /** No character was rejected. */
  accepted: boolean;
  /** Accepted and the acceptor accepts at the end (a `<|end|>` would be legal). */
  complete: boolean;
  /** Code-point index of the first rejected character, or null. */
  rejectedAt: number | null;
  /** Characters legal at `rejectedAt` (or after the end when incomplete); [] when complete. */
  expected: string[];
}

/** Run the acceptor over a call body (the JSON between `<|tool_call|>` and `<|end|>`). */
export function checkCall(body: string, templates: readonly Template[] = TEMPLATES): GrammarVerdict {
  let states = startStates(templates);
  let index = 0;
  for (const ch of body) {
    const next = step(states, ch, templates);
    if (next.length === 0) {
      return { accepted: false, complete: false, rejectedAt: index, expected: allowedChars(states, templates) };
    }
    states = next;
    index++;
  }
  const complete = accepts(states, templates);
  return { accepted: true, complete, rejectedAt: null, expected: complete ? [] : allowedChars(states, templates) };
}

/** Which template item the live states are in, for messages ("in the value of k"). */
export function describeStates(states: StateSet): string[] {
  const out = new Set<string>();
  for (const s of states) {
    const { template, item } = unpackState(s);
    const t = TEMPLATES[template]!;
    const it = t.items[item];
    if (it === undefined) out.add(`${t.tool}: complete`);
    else if (typeof it === 'string') out.add(`${t.tool}: literal ${JSON.stringify(it)}`);
    else out.add(`${t.tool}: ${it.name} (${it.minLen}-${it.maxLen} chars)`);
  }
  return [...out];
}
