// The call grammar's verdict in words: what was legal where a call broke, for diagnostics
// and hovers ("expected a digit 1-9 for k, got '0'"). The grammar is the textbook's unless a
// caller passes a world's (core/worldTools.ts templatesFor: a narrowed or calc-less one). The
// acceptor runs over a body here only (runGrammar, memoised); the Grammar Debugger's
// step-by-step trace (./grammarTrace.ts) is the same run, described state by state.
import { Hole, StateSet, TEMPLATES, type Template, accepts, startStates, step, unpackState } from '../grammar';

const HOLE_PHRASES: Record<string, string> = {
  k: 'a digit 1-9 for k',
  query: 'a query character (a letter, a digit, a space or one of . _ , ( ) -) for query',
  expr: 'an expression character (a digit, a space or one of + - * / . ( )) for expr',
};

/** A character as a message shows it: `'0'`, `a newline`, `U+0007`. */
export function describeChar(ch: string): string {
  if (ch === '\n') return 'a newline';
  if (ch === '\r') return 'a carriage return';
  if (ch === '\t') return 'a tab';
  if (ch === ' ') return "' ' (a space)";
  const cp = ch.codePointAt(0)!;
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
  if (ch === "'") return `"'"`;
  return `'${ch}'`;
}

const quote = (ch: string): string => (ch === "'" ? `"'"` : `'${ch}'`);

/** The textbook's holes by name: a world's hole with other characters is described by its own. */
const DEFAULT_HOLES = new Map(TEMPLATES.flatMap((t) => t.items.filter((i): i is Hole => typeof i !== 'string')).map((h) => [h.name, h]));

function holePhrase(h: Hole): string {
  const textbook = DEFAULT_HOLES.get(h.name);
  const same = textbook !== undefined && textbook.chars.size === h.chars.size && [...h.chars].every((c) => textbook.chars.has(c));
  if (same && HOLE_PHRASES[h.name]) return HOLE_PHRASES[h.name]!;
  const chars = [...h.chars].sort().join('');
  return `a character of ${h.name} (one of the world's ${JSON.stringify(chars.length > 40 ? `${chars.slice(0, 40)}…` : chars)})`;
}

/** "X", "X or Y", "X, Y or Z". */
function joinOr(parts: readonly string[]): string {
  if (parts.length <= 1) return parts[0] ?? 'nothing';
  return `${parts.slice(0, -1).join(', ')} or ${parts[parts.length - 1]}`;
}

/** What the live states allow next, as a phrase list (deduplicated, in template order). */
export function expectedPhrases(states: StateSet, grammar: readonly Template[] = TEMPLATES): string[] {
  const phrases: string[] = [];
  const add = (p: string): void => {
    if (!phrases.includes(p)) phrases.push(p);
  };
  const templates = new Set(states.map((s) => unpackState(s).template));
  // Literal characters that differ between live templates get the tool's name.
  const literalChars = new Set<string>();
  for (const s of states) {
    const { template, item, consumed } = unpackState(s);
    const it = grammar[template]!.items[item];
    if (typeof it === 'string') literalChars.add(it[consumed]!);
  }
  const nameTools = templates.size > 1 && literalChars.size > 1;
  for (const s of states) {
    const { template, item, consumed } = unpackState(s);
    const t = grammar[template]!;
    const it = t.items[item];
    if (it === undefined) continue;
    if (typeof it === 'string') {
      add(nameTools ? `${quote(it[consumed]!)} (${t.tool})` : quote(it[consumed]!));
      continue;
    }
    if (consumed < it.maxLen) add(holePhrase(it));
    if (consumed >= it.minLen) {
      const next = t.items[item + 1];
      const close = typeof next === 'string' ? quote(next[0]!) : 'the end of the call';
      add(consumed >= it.maxLen ? `${close} (${it.name} is at its maximum of ${it.maxLen} characters)` : `${close} to end ${it.name}`);
    }
  }
  return phrases;
}

export function describeExpected(states: StateSet, grammar: readonly Template[] = TEMPLATES): string {
  return `expected ${joinOr(expectedPhrases(states, grammar))}`;
}

/**
 * The shortest text that completes the call from these states, when one template is live
 * (`'"}}'`); null when several are or a hole still needs characters.
 */
export function shortestCompletion(states: StateSet, grammar: readonly Template[] = TEMPLATES): string | null {
  const templates = new Set(states.map((s) => unpackState(s).template));
  if (templates.size !== 1) return null;
  let best: string | null = null;
  for (const s of states) {
    const { template, item, consumed } = unpackState(s);
    const items = grammar[template]!.items;
    let rest = '';
    let ok = true;
    for (let i = item; i < items.length; i++) {
      const it = items[i]!;
      const n = i === item ? consumed : 0;
      if (typeof it === 'string') rest += it.slice(n);
      else if (n < it.minLen) ok = false;
    }
    if (ok && (best === null || rest.length < best.length)) best = rest;
  }
  return best;
}

export interface CallVerdict {
  accepted: boolean;
  complete: boolean;
  /** UTF-16 offset of the first rejected character in the body, or null. */
  rejectedOffset: number | null;
  /** Code-point index of it (the CLI's `rejectedAt`), or null. */
  rejectedAt: number | null;
  /** The rejected character. */
  got: string | null;
  /** The states before the rejected character, or at the end of the body. */
  states: StateSet;
  /** The grammar the states are of (the textbook's, or a world's). */
  grammar: readonly Template[];
}

// The acceptor's transitions, memoised: state sets are interned (one array per distinct
// set), so a transition is two map lookups instead of a Set, a sort and an allocation.
// The sets are few (one per template position), the characters those calls use.
// One memo per grammar (a world's templates are another acceptor).
interface Memo {
  interned: Map<string, StateSet>;
  transitions: Map<StateSet, Map<string, StateSet>>;
  entries: number;
}
const memos = new WeakMap<readonly Template[], Memo>();
const MEMO_MAX = 200_000;

function memoOf(grammar: readonly Template[]): Memo {
  let m = memos.get(grammar);
  if (!m) {
    m = { interned: new Map(), transitions: new Map(), entries: 0 };
    memos.set(grammar, m);
  }
  return m;
}

function intern(m: Memo, states: StateSet): StateSet {
  const key = states.join(',');
  let hit = m.interned.get(key);
  if (!hit) {
    hit = states;
    m.interned.set(key, hit);
  }
  return hit;
}

function memoStep(m: Memo, grammar: readonly Template[], states: StateSet, ch: string): StateSet {
  let row = m.transitions.get(states);
  if (!row) {
    row = new Map();
    m.transitions.set(states, row);
  }
  let next = row.get(ch);
  if (next === undefined) {
    if (m.entries >= MEMO_MAX) {
      // Unbounded input (every character a new one): start over rather than grow.
      m.transitions.clear();
      m.interned.clear();
      m.entries = 0;
      return step(states, ch, grammar);
    }
    next = intern(m, step(states, ch, grammar));
    row.set(ch, next);
    m.entries++;
  }
  return next;
}

/**
 * Runs the acceptor over a call body, keeping the live states where it stopped; `onStates`
 * sees the live states at the start and after each accepted character (the Grammar
 * Debugger's steps, core/transcript/grammarTrace.ts).
 */
export function runGrammar(body: string, grammar: readonly Template[] = TEMPLATES, onStates?: (states: StateSet) => void): CallVerdict {
  const m = memoOf(grammar);
  let states = intern(m, startStates(grammar));
  onStates?.(states);
  let offset = 0;
  let index = 0;
  for (const ch of body) {
    const next = memoStep(m, grammar, states, ch);
    if (next.length === 0) {
      return { accepted: false, complete: false, rejectedOffset: offset, rejectedAt: index, got: ch, states, grammar };
    }
    states = next;
    onStates?.(states);
    offset += ch.length;
    index++;
  }
  return { accepted: true, complete: accepts(states, grammar), rejectedOffset: null, rejectedAt: null, got: null, states, grammar };
}

/** The rejection message: "tool call rejected by the grammar: expected ..., got '0'". */
export function rejectionMessage(v: CallVerdict): string {
  return `tool call rejected by the grammar: ${describeExpected(v.states, v.grammar)}, got ${describeChar(v.got ?? '')}`;
}

/** The incomplete-call message at `<|end|>`. */
export function incompleteMessage(v: CallVerdict): string {
  const rest = shortestCompletion(v.states, v.grammar);
  const tail = rest !== null && rest.length > 1 ? `; the call still needs '${rest}'` : '';
  return `incomplete tool call: <|end|> is legal only after a complete call; ${describeExpected(v.states, v.grammar)}${tail}`;
}

/** One line for hovers: "accepted (complete)", "incomplete: expected ...", "rejected at ...". */
export function verdictSummary(v: CallVerdict): string {
  if (v.complete) return 'accepted: a complete call (`<|end|>` is legal here)';
  if (v.accepted) return `incomplete: ${describeExpected(v.states, v.grammar)}`;
  return `rejected at character ${v.rejectedAt}: ${describeExpected(v.states, v.grammar)}, got ${describeChar(v.got ?? '')}`;
}
