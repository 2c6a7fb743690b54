// Python str semantics that JavaScript does not share. Python's whitespace (str.isspace,
// regex \s, strip(), split()) includes \x1c-\x1f and \x85 and excludes \ufeff; JS's
// trim() and \s differ exactly there, and transcripts are compared byte for byte.

/** The characters of Python's `str.isspace()`, as a regex character-class body. */
export const PY_SPACE_CLASS = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

const ONE_SPACE = new RegExp(`^[${PY_SPACE_CLASS}]$`);
const RUNS = new RegExp(`[${PY_SPACE_CLASS}]+`);

const ALL_SPACE = new RegExp(`^[${PY_SPACE_CLASS}]+$`);

/** `s.isspace()` */
export function pyIsSpace(s: string): boolean {
  return ALL_SPACE.test(s);
}

/** `s.strip()` */
export function pyStrip(s: string): string {
  // Index loops, not /\s+$/: that regex retries from every space of an inner run (quadratic).
  let start = 0;
  let end = s.length;
  while (start < end && ONE_SPACE.test(s[start]!)) start++;
  while (end > start && ONE_SPACE.test(s[end - 1]!)) end--;
  return s.slice(start, end);
}

/** `s.split()` (no separator): runs of whitespace, no empty pieces. */
export function pySplitWhitespace(s: string): string[] {
  const t = pyStrip(s);
  return t === '' ? [] : t.split(RUNS);
}

/** `s.rstrip(chars)` */
export function pyRstripChars(s: string, chars: string): string {
  let end = s.length;
  while (end > 0 && chars.includes(s[end - 1]!)) end--;
  return s.slice(0, end);
}

/** `s.split(sep, 1)` as [head, tail] with tail undefined when sep is absent. */
export function splitOnce(s: string, sep: string): [string, string | undefined] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, undefined] : [s.slice(0, i), s.slice(i + sep.length)];
}

/** Escapes a literal for use inside a RegExp (Python's re.escape, for our purposes). */
export function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}
