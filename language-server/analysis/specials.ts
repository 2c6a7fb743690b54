// Special-token spotting: the nine wire-format tokens, and near misses (`<|tool_cal|>`,
// `<|end>`, `<end|>`, `<|tool_call`) that the tokenizer would read as plain text.
import { SPECIAL_TOKENS, SpecialToken } from '../../core/wire';

export interface SpecialHit {
  start: number;
  end: number;
  /** The token, or null for a near miss. */
  token: SpecialToken | null;
  raw: string;
}

const KNOWN = new Set<string>(SPECIAL_TOKENS);
// Full form first, then the malformed shapes; each needs a '|' beside '<' or '>', so
// ordinary text such as `a<b` or `<b>` is never flagged.
const CANDIDATE = /<\|[A-Za-z_]{1,24}\|>|<\|[A-Za-z_]{1,24}(?:\||>)?|<[A-Za-z_]{1,24}\|>/g;

export function scanSpecials(text: string): SpecialHit[] {
  const steps = scanSpecialsSteps(text);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** scanSpecials as a generator that yields every 1,024 hits (a caller may pause there). */
export function* scanSpecialsSteps(text: string): Generator<void, SpecialHit[]> {
  const out: SpecialHit[] = [];
  // Its own RegExp: a paused scan must not share lastIndex with another one.
  const re = new RegExp(CANDIDATE.source, 'g');
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const raw = m[0];
    out.push({ start: m.index, end: m.index + raw.length, token: KNOWN.has(raw) ? (raw as SpecialToken) : null, raw });
    if ((out.length & 1023) === 0) yield;
  }
  return out;
}

function nameOf(raw: string): string {
  return raw.replace(/^<\|?/, '').replace(/\|?>?$/, '').replace(/\|$/, '');
}

function levenshtein(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length]!;
}

/** The special token a near miss most likely meant, or null when none is close. */
export function suggestSpecial(raw: string): SpecialToken | null {
  const name = nameOf(raw).toLowerCase();
  let best: SpecialToken | null = null;
  let bestD = Infinity;
  for (const tok of SPECIAL_TOKENS) {
    const d = levenshtein(name, tok.slice(2, -2));
    if (d < bestD) {
      bestD = d;
      best = tok;
    }
  }
  if (best === null) return null;
  return bestD <= Math.max(2, Math.floor(name.length / 3)) ? best : null;
}

/** What is wrong with a near miss, in words. */
export function describeNearMiss(raw: string): string {
  const suggestion = suggestSpecial(raw);
  const name = nameOf(raw);
  const fullForm = `<|${name}|>`;
  if (suggestion !== null && suggestion === fullForm) {
    return `malformed special token '${raw}': expected '${suggestion}' (a special token is '<|' name '|>')`;
  }
  const hint = suggestion !== null ? `; did you mean '${suggestion}'?` : `; the wire format's tokens are ${SPECIAL_TOKENS.join(' ')}`;
  return `unknown special token '${raw}': the tokenizer reads it as plain text${hint}`;
}
