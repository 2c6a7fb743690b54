// The Grammar Debugger's data: the call grammar's acceptor (core/grammar.ts) run over a
// tool-call body character by character (the run the diagnostics use, ./grammarText.ts's
// runGrammar), keeping the live states and the characters allowed before each character,
// and where and why it was rejected; and the tool call under a cursor in a transcript.
// Pure: no vscode, no Node.
import type { GrammarStep, GrammarTrace } from '../protocol/panels';
import { StateSet, TEMPLATES, accepts, allowedChars, unpackState } from '../grammar';
import { runGrammar } from './grammarText';
import { ASST, END, SYS, TOOL_CALL, TOOL_RESULT, USER } from '../wire';

/** Characters as a reader scans them: ranges (a-z, 0-9, 1-9), named blanks, the rest one by one. */
export function charGroups(chars: string): string[] {
  const cps = [...new Set([...chars])].map((c) => c.codePointAt(0)!).sort((a, b) => a - b);
  const out: string[] = [];
  const isAlnum = (cp: number) => (cp >= 48 && cp <= 57) || (cp >= 65 && cp <= 90) || (cp >= 97 && cp <= 122);
  for (let i = 0; i < cps.length; ) {
    let j = i;
    // A run of consecutive letters or digits (never across classes) of 3 or more is a range.
    while (j + 1 < cps.length && cps[j + 1] === cps[j]! + 1 && isAlnum(cps[j]!) && isAlnum(cps[j + 1]!) && sameClass(cps[j]!, cps[j + 1]!)) j++;
    if (j - i >= 2) {
      out.push(`${String.fromCodePoint(cps[i]!)}-${String.fromCodePoint(cps[j]!)}`);
      i = j + 1;
    } else {
      out.push(nameOf(String.fromCodePoint(cps[i]!)));
      i++;
    }
  }
  return out;
}

function sameClass(a: number, b: number): boolean {
  const cls = (cp: number) => (cp <= 57 ? 0 : cp <= 90 ? 1 : 2);
  return cls(a) === cls(b);
}

/** A character as the panel names it (blanks and quotes get a visible name). */
export function nameOf(ch: string): string {
  if (ch === ' ') return 'space';
  if (ch === '\n') return '\\n';
  if (ch === '\t') return '\\t';
  if (ch === '\r') return '\\r';
  return ch;
}

/**
 * One live state in words: the template, the item it is in, and how far:
 * `search: literal ", "k": " (0 of 8 typed)`, `search: query, 12 chars (1-64)`, `calc: complete`.
 */
export function describeState(state: number): string {
  const { template, item, consumed } = unpackState(state);
  const t = TEMPLATES[template]!;
  const it = t.items[item];
  if (it === undefined) return `${t.tool}: complete`;
  if (typeof it === 'string') return `${t.tool}: literal ‹${it}› (${consumed} of ${it.length} typed)`;
  return `${t.tool}: ${it.name}, ${consumed} char${consumed === 1 ? '' : 's'} (${it.minLen === it.maxLen ? `exactly ${it.minLen}` : `${it.minLen}-${it.maxLen}`})`;
}

function describeStep(states: StateSet): GrammarStep {
  const allowed = allowedChars(states).join('');
  return { states: [...new Set(states.map(describeState))], allowed, allowedGroups: charGroups(allowed), accepts: accepts(states) };
}

/** The acceptor over `text`, character (code point) by character, to the end or the first rejection. */
export function grammarTrace(text: string): GrammarTrace {
  const chars = [...text];
  const steps: GrammarStep[] = [];
  const { rejectedAt } = runGrammar(text, TEMPLATES, (states) => steps.push(describeStep(states)));
  const last = steps[steps.length - 1]!;
  const accepted = rejectedAt === null;
  const complete = accepted && last.accepts;
  const expected = complete ? [] : [...last.allowed];
  let reason: string | null = null;
  if (rejectedAt !== null) {
    const ch = chars[rejectedAt]!;
    reason =
      `'${nameOf(ch)}' (character ${rejectedAt + 1}) is not allowed: the call is in ${last.states.join(' or ')}, ` +
      `which allows ${last.allowedGroups.join(' ')}`;
  } else if (!complete) {
    reason =
      chars.length === 0
        ? `empty: a call starts with ${last.allowedGroups.join(' ')}`
        : `incomplete: the call ends in ${last.states.join(' or ')}; next comes ${last.allowedGroups.join(' ')} (<|end|> is not legal yet)`;
  }
  return { text, chars, steps, accepted, complete, rejectedAt, expected, reason };
}

export interface CallSpan {
  /** Offset of `<|tool_call|>`. */
  start: number;
  /** The body: [bodyStart, bodyEnd) between `<|tool_call|>` and `<|end|>` (or the next marker). */
  bodyStart: number;
  bodyEnd: number;
  /** After `<|end|>` (or bodyEnd when unterminated). */
  end: number;
}

const STOPS = [END, SYS, USER, ASST, TOOL_RESULT, TOOL_CALL];

/** Every tool call of a transcript. */
export function findCalls(text: string): CallSpan[] {
  const out: CallSpan[] = [];
  let i = text.indexOf(TOOL_CALL);
  while (i >= 0) {
    const bodyStart = i + TOOL_CALL.length;
    let stop = text.length;
    let marker = '';
    for (const m of STOPS) {
      const k = text.indexOf(m, bodyStart);
      if (k >= 0 && k < stop) {
        stop = k;
        marker = m;
      }
    }
    const end = marker === END ? stop + END.length : stop;
    out.push({ start: i, bodyStart, bodyEnd: stop, end });
    i = text.indexOf(TOOL_CALL, Math.max(end, bodyStart));
  }
  return out;
}

/** The call whose span [start, end] holds `offset` (a cursor just after `<|end|>` still counts). */
export function callAt(text: string, offset: number): CallSpan | null {
  for (const c of findCalls(text)) if (offset >= c.start && offset <= c.end) return c;
  return null;
}

/** Code-point index inside the body for a UTF-16 offset (clamped to the body). */
export function codePointIndex(text: string, call: CallSpan, offset: number): number {
  const o = Math.max(call.bodyStart, Math.min(offset, call.bodyEnd));
  return [...text.slice(call.bodyStart, o)].length;
}

/** UTF-16 offset of code-point index `index` of the body. */
export function offsetOfCodePoint(text: string, call: CallSpan, index: number): number {
  const body = text.slice(call.bodyStart, call.bodyEnd);
  let off = 0;
  let n = 0;
  for (const ch of body) {
    if (n === index) break;
    off += ch.length;
    n++;
  }
  return call.bodyStart + off;
}
