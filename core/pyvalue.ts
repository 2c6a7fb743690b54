// Python's str() and int() of JSON-decoded values, for tool arguments a model wrote.
import { pyFloatRepr } from './pyfloat';
import type { JsonValue } from './pyjson';
import { pyStrip } from './pystr';

function pyReprString(s: string): string {
  // Python prefers single quotes unless the string has ' and no ".
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === quote || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + quote;
}

function pyNumber(v: number): string {
  return Number.isInteger(v) && !Object.is(v, -0) ? BigInt(v).toString() : pyFloatRepr(v);
}

/** Python's repr() of a JSON-decoded value. */
export function pyRepr(v: JsonValue): string {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return pyNumber(v);
  if (typeof v === 'string') return pyReprString(v);
  if (Array.isArray(v)) return '[' + v.map(pyRepr).join(', ') + ']';
  return '{' + Object.keys(v).map((k) => `${pyReprString(k)}: ${pyRepr(v[k]!)}`).join(', ') + '}';
}

/** Python's str() of a JSON-decoded value. */
export function pyStr(v: JsonValue): string {
  return typeof v === 'string' ? v : pyRepr(v);
}

const INT_LITERAL = /^[+-]?[0-9](?:_?[0-9])*$/;

/** Python's int(v), or null where Python raises. */
export function pyInt(v: JsonValue): bigint | null {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'boolean') return v ? 1n : 0n;
  if (typeof v === 'number') return Number.isFinite(v) ? BigInt(Math.trunc(v)) : null;
  if (typeof v === 'string') {
    const s = pyStrip(v);
    return INT_LITERAL.test(s) ? BigInt(s.replace(/_/g, '')) : null;
  }
  return null;
}
