// Python's `json` module, as the wire format needs it. `json.dumps` with ensure_ascii
// escapes every character outside ' '..'~' as \uXXXX (lowercase hex, UTF-16 units), which
// JSON.stringify does not; `json.loads` accepts NaN/Infinity and keeps big integers exact,
// which JSON.parse does not. The model's memorised groove depends on these bytes.
import { pyFloatRepr } from './pyfloat';

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export interface DumpsOptions {
  /** Python's `separators=(item, key)`; the default is Python's (', ', ': '). */
  itemSeparator?: string;
  keySeparator?: string;
}

/** Python's json.dumps(value, ensure_ascii=True, separators=...). */
export function pyJsonDumps(value: JsonValue, options: DumpsOptions = {}): string {
  const item = options.itemSeparator ?? ', ';
  const key = options.keySeparator ?? ': ';
  const out: string[] = [];
  const walk = (v: JsonValue): void => {
    if (v === null) out.push('null');
    else if (v === true) out.push('true');
    else if (v === false) out.push('false');
    else if (typeof v === 'bigint') out.push(v.toString());
    else if (typeof v === 'number') out.push(dumpNumber(v));
    else if (typeof v === 'string') out.push(encodeAsciiString(v));
    else if (Array.isArray(v)) {
      out.push('[');
      v.forEach((x, i) => {
        if (i > 0) out.push(item);
        walk(x);
      });
      out.push(']');
    } else {
      out.push('{');
      Object.keys(v).forEach((k, i) => {
        if (i > 0) out.push(item);
        out.push(encodeAsciiString(k), key);
        walk(v[k]!);
      });
      out.push('}');
    }
  };
  walk(value);
  return out.join('');
}

// A JS number that is integral stands for a Python int (the lab's own call arguments,
// such as k=2); anything else is a Python float.
function dumpNumber(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return 'Infinity';
  if (v === -Infinity) return '-Infinity';
  if (Number.isInteger(v) && !Object.is(v, -0)) return BigInt(v).toString();
  return pyFloatRepr(v);
}

/** Python's json encoder for str with ensure_ascii=True. */
export function encodeAsciiString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || c > 0x7e) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += s[i];
  }
  return out + '"';
}

export class PyJsonError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message}: char ${position}`);
    this.name = 'PyJsonError';
  }
}

const JSON_WS = ' \t\n\r';
const NUMBER_RE = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;

/**
 * Python's json.loads: standard JSON plus NaN, Infinity, -Infinity; integers stay exact
 * (a number when safe, a bigint otherwise); duplicate keys keep the last value.
 */
export function pyJsonLoads(text: string): JsonValue {
  let i = 0;
  const skip = (): void => {
    while (i < text.length && JSON_WS.includes(text[i]!)) i++;
  };
  const fail = (msg: string): never => {
    throw new PyJsonError(msg, i);
  };
  const parseValue = (depth: number): JsonValue => {
    if (depth > 1000) fail('Nesting too deep');
    skip();
    const c = text[i];
    if (c === '"') return parseString();
    if (c === '{') {
      i++;
      const obj: JsonObject = {};
      skip();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        skip();
        if (text[i] !== '"') fail('Expecting property name enclosed in double quotes');
        const k = parseString();
        skip();
        if (text[i] !== ':') fail("Expecting ':' delimiter");
        i++;
        const v = parseValue(depth + 1);
        Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
        skip();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail("Expecting ',' delimiter");
      }
    }
    if (c === '[') {
      i++;
      const arr: JsonValue[] = [];
      skip();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue(depth + 1));
        skip();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail("Expecting ',' delimiter");
      }
    }
    for (const [word, value] of [
      ['null', null],
      ['true', true],
      ['false', false],
      ['NaN', NaN],
      ['Infinity', Infinity],
      ['-Infinity', -Infinity],
    ] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return value;
      }
    }
    NUMBER_RE.lastIndex = i;
    const m = NUMBER_RE.exec(text);
    if (m) {
      i += m[0].length;
      if (m[1] === undefined && m[2] === undefined) {
        const n = BigInt(m[0]);
        return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
      }
      return Number(m[0]);
    }
    return fail('Expecting value');
  };
  const parseString = (): string => {
    i++; // opening quote
    let out = '';
    for (;;) {
      if (i >= text.length) fail('Unterminated string starting at');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i++;
        return out;
      }
      if (c < 0x20) fail('Invalid control character at');
      if (c !== 0x5c) {
        out += text[i++];
        continue;
      }
      const e = text[i + 1];
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && e in simple) {
        out += simple[e];
        i += 2;
      } else if (e === 'u') {
        const hex = text.slice(i + 2, i + 6);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('Invalid \\uXXXX escape');
        out += String.fromCharCode(parseInt(hex, 16));
        i += 6;
      } else {
        fail('Invalid \\escape');
      }
    }
  };
  const value = parseValue(0);
  skip();
  if (i !== text.length) fail('Extra data');
  return value;
}

export function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
