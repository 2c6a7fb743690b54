// The seed's safe calculator (tools.py `calc`): parse Python's expression grammar, walk the
// tree allowing only numbers, + - * / // % ** and unary + -, and return the result or the
// error as a string. Nothing is ever evaluated as code. Results and runtime errors are
// CPython 3.11's; syntax errors are "CalcError: " + a message of ours. Deliberate
// deviations (docs/architecture.md, "Calculator bounds"): ints over 4300 digits, complex results,
// True/False, and bounds on input length and nesting so that nothing can hang. Float `**`
// is correctly rounded, where CPython's glibc pow is not always (about 1 in 1000 random
// float powers differ in the last bit, e.g. 10.0**23).
import {
  PyError,
  bigIntToFloat,
  bigIntTrueDiv,
  bitLength,
  floatToBigInt,
  isIntegerFloat,
  pyFloatFloorDiv,
  pyFloatMod,
  pyFloatPow,
  pyFloatRepr,
  pyFloatTrueDiv,
} from '../pyfloat';

/** Longest expression (after strip) the calculator reads. */
export const CALC_MAX_INPUT_CHARS = 10_000;
/** CPython's int <-> str limit: the reference cannot print a longer int. */
export const CALC_MAX_INT_DIGITS = 4300;
/** Ints met on the way to a result may be longer, up to this many digits. */
export const CALC_MAX_INTERMEDIATE_DIGITS = 20_000;
/** Deepest expression tree (and parser recursion) accepted. */
export const CALC_MAX_DEPTH = 1000;
/** CPython's tokenizer limit on nested brackets. */
const MAX_BRACKET_LEVEL = 200;

// 10**4300 > 2**14284 and 2**66438 < 10**20000: the bit counts below are safe bounds.
const INT_DIGITS_SURELY_OK_BITS = 14284;
const INTERMEDIATE_MAX_BITS = Math.floor(CALC_MAX_INTERMEDIATE_DIGITS * Math.log2(10));

type Value = bigint | number;
type ArithOp = '+' | '-' | '*' | '/' | '//' | '%' | '**';
const ARITH_OPS: ReadonlySet<string> = new Set(['+', '-', '*', '/', '//', '%', '**']);

/** The tree the walk needs: children of disallowed nodes are never visited, so not kept. */
type Node =
  | { readonly k: 'num'; readonly v: Value; readonly d: number }
  | { readonly k: 'const'; readonly bool: 'True' | 'False' | null; readonly d: number }
  | { readonly k: 'unary'; readonly op: '+' | '-'; readonly e: Node; readonly d: number }
  | { readonly k: 'bin'; readonly op: ArithOp; readonly l: Node; readonly r: Node; readonly d: number }
  | { readonly k: 'bad'; readonly name: string; readonly d: number; readonly target?: boolean };

/** A syntax error: ours, not CPython's wording. */
class CalcSyntaxError extends Error {}
/** One of docs/architecture.md's deliberate deviations from the reference. */
class CalcDeviation extends Error {}

/** `target`: the node is also an assignment target (a comprehension's `for` part). */
function bad(name: string, target = false): Node {
  return target ? { k: 'bad', name, d: 1, target } : { k: 'bad', name, d: 1 };
}

function isTarget(n: Node): boolean {
  return n.k === 'bad' && n.target === true;
}

// ---------------------------------------------------------------------------------------
// Tokenizer (CPython 3.11's rules for what is one token and what is an error).

type TokKind = 'num' | 'str' | 'name' | 'kw' | 'op' | 'newline' | 'end';

interface Token {
  readonly kind: TokKind;
  readonly text: string;
  readonly pos: number;
  /** num: the value, or null for an imaginary literal. */
  readonly value?: Value | null;
  /** str: the lower-cased prefix. */
  readonly prefix?: string;
  /** str: the text between the quotes. */
  readonly body?: string;
}

const KEYWORDS: ReadonlySet<string> = new Set([
  'False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break', 'class',
  'continue', 'def', 'del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global',
  'if', 'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return',
  'try', 'while', 'with', 'yield',
]);

const STRING_PREFIXES: ReadonlySet<string> = new Set(['r', 'u', 'f', 'b', 'br', 'rb', 'fr', 'rf']);

// Longest first within each length so that a prefix never shadows a longer operator.
const OPERATORS = [
  '**=', '//=', '>>=', '<<=', '...',
  '!=', '%=', '&=', '**', '*=', '+=', '-=', '->', '//', '/=', ':=', '<<', '<=', '<>', '==',
  '>=', '>>', '@=', '^=', '|=',
  '%', '&', '(', ')', '*', '+', ',', '-', '.', '/', ':', ';', '<', '=', '>', '@', '[', ']',
  '^', '{', '|', '}', '~',
];

const XID_START = /^[\p{XID_Start}_]$/u;
const XID_CONTINUE = /^\p{XID_Continue}$/u;

function isDigit(c: string | undefined): boolean {
  return c !== undefined && c >= '0' && c <= '9';
}
function isHexDigit(c: string | undefined): boolean {
  return c !== undefined && /^[0-9a-fA-F]$/.test(c);
}
function isIdentStart(c: string | undefined): boolean {
  return c !== undefined && (/^[A-Za-z_]$/.test(c) || c.charCodeAt(0) >= 128);
}
function isIdentChar(c: string | undefined): boolean {
  return isIdentStart(c) || isDigit(c);
}

function syntax(msg: string, pos?: number): CalcSyntaxError {
  return new CalcSyntaxError(pos === undefined ? msg : `${msg} (at character ${pos + 1})`);
}

class Tokenizer {
  private i = 0;
  private readonly brackets: string[] = [];
  readonly tokens: Token[] = [];
  // Blank and comment-only lines produce no tokens; an indented first token is an error.
  private lineStart = true;
  private indented = false;
  private lineHasTokens = false;

  constructor(
    private readonly src: string,
    private readonly depth: number,
  ) {}

  run(): Token[] {
    for (;;) {
      const t = this.next();
      this.tokens.push(t);
      if (t.kind === 'end') return this.tokens;
    }
  }

  private next(): Token {
    const s = this.src;
    for (;;) {
      const c = s[this.i];
      if (c === ' ' || c === '\t' || c === '\f') {
        if (this.lineStart) this.indented = true;
        this.i++;
      } else if (c === '#') {
        while (this.i < s.length && s[this.i] !== '\n') this.i++;
      } else if (c === '\\') {
        if (s[this.i + 1] !== '\n') throw syntax('unexpected character after line continuation character', this.i);
        this.i += 2;
      } else if (c === '\n') {
        const pos = this.i++;
        // Inside brackets a newline is whitespace; outside, it ends the logical line.
        if (this.brackets.length === 0) {
          this.lineStart = true;
          this.indented = false;
          if (this.lineHasTokens) {
            this.lineHasTokens = false;
            return { kind: 'newline', text: '\n', pos };
          }
        }
      } else break;
    }
    const start = this.i;
    const c = s[start];
    if (c === undefined) return { kind: 'end', text: '', pos: start };
    if (this.lineStart && this.indented) throw syntax('unexpected indent', start);
    this.lineStart = false;
    this.lineHasTokens = true;
    if (isDigit(c) || (c === '.' && isDigit(s[start + 1]))) return this.number();
    if (c === '"' || c === "'") return this.string('', start);
    if (isIdentStart(c)) {
      let j = start;
      while (j < s.length && isIdentChar(s[j])) j++;
      const word = s.slice(start, j);
      const q = s[j];
      if ((q === '"' || q === "'") && STRING_PREFIXES.has(word.toLowerCase())) {
        this.i = j;
        return this.string(word.toLowerCase(), start);
      }
      this.i = j;
      if (/[^\x00-\x7f]/.test(word)) checkIdentifier(word, start);
      return { kind: KEYWORDS.has(word) ? 'kw' : 'name', text: word, pos: start };
    }
    for (const op of OPERATORS) {
      if (s.startsWith(op, start)) {
        this.i = start + op.length;
        this.trackBracket(op, start);
        return { kind: 'op', text: op, pos: start };
      }
    }
    const cp = s.codePointAt(start)!;
    throw syntax(`invalid character U+${cp.toString(16).toUpperCase().padStart(4, '0')}`, start);
  }

  private trackBracket(op: string, pos: number): void {
    if (op === '(' || op === '[' || op === '{') {
      if (this.brackets.length >= MAX_BRACKET_LEVEL) throw new CalcSyntaxError('too many nested parentheses');
      this.brackets.push(op);
    } else if (op === ')' || op === ']' || op === '}') {
      const open = this.brackets.pop();
      if (open === undefined) throw syntax(`unmatched '${op}'`, pos);
      const want = open === '(' ? ')' : open === '[' ? ']' : '}';
      if (op !== want) throw syntax(`closing '${op}' does not match opening '${open}'`, pos);
    }
  }

  /** CPython's verify_end_of_number: `1if x else y` is legal, `1x` is not. */
  private endOfNumber(kind: string): void {
    const s = this.src;
    const c = s[this.i];
    const rest = s.slice(this.i + 1, this.i + 4);
    const keywordAhead =
      (c === 'a' && rest.startsWith('nd')) ||
      (c === 'e' && rest.startsWith('lse')) ||
      (c === 'f' && rest.startsWith('or')) ||
      (c === 'i' && (rest[0] === 'f' || rest[0] === 'n' || rest[0] === 's')) ||
      (c === 'o' && rest.startsWith('r')) ||
      (c === 'n' && rest.startsWith('ot'));
    if (!keywordAhead && isIdentChar(c)) throw syntax(`invalid ${kind} literal`, this.i);
  }

  /** Digits with single underscores between them; the first digit is at this.i. */
  private decimalTail(): void {
    const s = this.src;
    for (;;) {
      while (isDigit(s[this.i])) this.i++;
      if (s[this.i] !== '_') return;
      this.i++;
      if (!isDigit(s[this.i])) throw syntax('invalid decimal literal', this.i);
    }
  }

  private number(): Token {
    const s = this.src;
    const start = this.i;
    const c = s[start]!;
    if (c === '0' && /[xXoObB]/.test(s[start + 1] ?? '')) {
      const p = s[start + 1]!.toLowerCase();
      const kind = p === 'x' ? 'hexadecimal' : p === 'o' ? 'octal' : 'binary';
      const ok = p === 'x' ? isHexDigit : p === 'o' ? (d?: string) => d !== undefined && d >= '0' && d <= '7' : (d?: string) => d === '0' || d === '1';
      this.i = start + 2;
      for (;;) {
        if (s[this.i] === '_') this.i++;
        if (!ok(s[this.i])) {
          if (p !== 'x' && isDigit(s[this.i])) throw syntax(`invalid digit '${s[this.i]}' in ${kind} literal`, this.i);
          throw syntax(`invalid ${kind} literal`, this.i);
        }
        while (ok(s[this.i])) this.i++;
        if (s[this.i] !== '_') break;
      }
      if (p !== 'x' && isDigit(s[this.i])) throw syntax(`invalid digit '${s[this.i]}' in ${kind} literal`, this.i);
      this.endOfNumber(kind);
      const text = s.slice(start, this.i);
      const value = BigInt('0' + p + text.slice(2).replace(/_/g, ''));
      return { kind: 'num', text, pos: start, value };
    }
    let isFloat = false;
    let leadingZeroInt = false;
    if (c === '.') {
      this.i++;
      this.decimalTail();
      isFloat = true;
    } else {
      if (c === '0') {
        // '0', '00', '0_0' ... are ints; other digits after leading zeros only in floats.
        this.i++;
        for (;;) {
          if (s[this.i] === '_') {
            this.i++;
            if (!isDigit(s[this.i])) throw syntax('invalid decimal literal', this.i);
          }
          if (s[this.i] !== '0') break;
          this.i++;
        }
        if (isDigit(s[this.i])) {
          leadingZeroInt = true;
          this.decimalTail();
        }
      } else {
        this.decimalTail();
      }
      if (s[this.i] === '.') {
        this.i++;
        isFloat = true;
        if (isDigit(s[this.i])) this.decimalTail();
      }
    }
    const e = s[this.i];
    if (e === 'e' || e === 'E') {
      const save = this.i;
      this.i++;
      if (s[this.i] === '+' || s[this.i] === '-') {
        this.i++;
        if (!isDigit(s[this.i])) throw syntax('invalid decimal literal', this.i);
      }
      if (isDigit(s[this.i])) {
        this.decimalTail();
        isFloat = true;
      } else {
        // '1else': the number ends before the 'e' (when a keyword follows).
        this.i = save;
        this.endOfNumber('decimal');
        return this.finishNumber(start, isFloat, leadingZeroInt);
      }
    }
    if (s[this.i] === 'j' || s[this.i] === 'J') {
      this.i++;
      this.endOfNumber('imaginary');
      return { kind: 'num', text: s.slice(start, this.i), pos: start, value: null };
    }
    this.endOfNumber('decimal');
    return this.finishNumber(start, isFloat, leadingZeroInt);
  }

  private finishNumber(start: number, isFloat: boolean, leadingZeroInt: boolean): Token {
    const text = this.src.slice(start, this.i);
    const clean = text.replace(/_/g, '');
    if (isFloat) return { kind: 'num', text, pos: start, value: Number(clean) };
    if (leadingZeroInt) {
      throw syntax('leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers', start);
    }
    const digits = clean.replace(/^0+/, '').length;
    if (digits > CALC_MAX_INT_DIGITS) {
      throw syntax(`integer literal has ${digits} digits, more than Python's limit of ${CALC_MAX_INT_DIGITS}`, start);
    }
    return { kind: 'num', text, pos: start, value: BigInt(clean) };
  }

  private string(prefix: string, start: number): Token {
    const s = this.src;
    const quote = s[this.i]!;
    const triple = s.startsWith(quote.repeat(3), this.i);
    const qlen = triple ? 3 : 1;
    this.i += qlen;
    const bodyStart = this.i;
    for (;;) {
      const ch = s[this.i];
      if (ch === undefined) throw syntax(triple ? 'unterminated triple-quoted string literal' : 'unterminated string literal', start);
      if (!triple && ch === '\n') throw syntax('unterminated string literal', start);
      if (ch === '\\') {
        this.i += 2;
        continue;
      }
      if (ch === quote && (!triple || s.startsWith(quote.repeat(3), this.i))) break;
      this.i++;
    }
    const body = s.slice(bodyStart, this.i);
    this.i += qlen;
    checkStringLiteral(prefix, body, start, this.depth);
    return { kind: 'str', text: s.slice(start, this.i), pos: start, prefix, body };
  }
}

function checkIdentifier(word: string, pos: number): void {
  const cps = Array.from(word);
  cps.forEach((ch, i) => {
    if (i === 0 ? !XID_START.test(ch) : !XID_CONTINUE.test(ch)) {
      const cp = ch.codePointAt(0)!;
      throw syntax(`invalid character U+${cp.toString(16).toUpperCase().padStart(4, '0')} in identifier`, pos);
    }
  });
}

// ---------------------------------------------------------------------------------------
// String literals: only whether CPython accepts them matters (any string is non-numeric).

function checkStringLiteral(prefix: string, body: string, pos: number, depth: number): void {
  const raw = prefix.includes('r');
  const bytes = prefix.includes('b');
  if (bytes && /[^\x00-\x7f]/.test(body)) throw syntax('bytes can only contain ASCII literal characters', pos);
  if (prefix.includes('f')) checkFString(body, raw, pos, depth);
  else if (!raw) checkEscapes(body, bytes, pos);
}

/** The escapes CPython rejects; unknown escapes are only a warning there. */
function checkEscapes(body: string, bytes: boolean, pos: number): void {
  for (let i = 0; i < body.length; i++) {
    if (body[i] !== '\\') continue;
    const c = body[++i];
    const hex = (n: number): string | null => {
      const h = body.slice(i + 1, i + 1 + n);
      return h.length === n && /^[0-9a-fA-F]+$/.test(h) ? h : null;
    };
    if (c === 'x') {
      if (hex(2) === null) throw syntax('truncated \\xXX escape in string literal', pos);
      i += 2;
    } else if (!bytes && c === 'u') {
      if (hex(4) === null) throw syntax('truncated \\uXXXX escape in string literal', pos);
      i += 4;
    } else if (!bytes && c === 'U') {
      const h = hex(8);
      if (h === null) throw syntax('truncated \\UXXXXXXXX escape in string literal', pos);
      if (parseInt(h, 16) > 0x10ffff) throw syntax('illegal Unicode character in string literal', pos);
      i += 8;
    } else if (!bytes && c === 'N') {
      // Without a Unicode name table only the name's form is checked (letters, digits,
      // spaces, hyphens); CPython also rejects well-formed names it does not know.
      const close = body[i + 1] === '{' ? body.indexOf('}', i + 2) : -1;
      if (close < 0 || close === i + 2) throw syntax('malformed \\N character escape in string literal', pos);
      if (!/^[A-Za-z][A-Za-z0-9]*(?:[ -][A-Za-z0-9]+)*$/.test(body.slice(i + 2, close))) throw syntax('unknown Unicode character name', pos);
      i = close;
    }
  }
}

/** CPython 3.11's f-string scanner (string_parser.c), expressions parsed with our parser. */
function checkFString(body: string, raw: boolean, pos: number, depth: number): void {
  if (depth > 8) throw syntax('f-string nested too deeply', pos);
  let i = 0;
  const end = body.length;
  const fail = (msg: string): never => {
    throw syntax(`f-string: ${msg}`, pos);
  };

  // Scans literal text; returns true when it stopped at a doubled brace (keep scanning).
  const findLiteral = (level: number): boolean => {
    const litStart = i;
    const done = (stop: number, doubled: boolean): boolean => {
      if (!raw) checkEscapes(body.slice(litStart, stop), false, pos);
      return doubled;
    };
    while (i < end) {
      let ch = body[i++]!;
      if (!raw && ch === '\\' && i < end) {
        ch = body[i++]!;
        if (ch === 'N') {
          if (i < end && body[i++] === '{') {
            while (i < end && body[i++] !== '}') {
              /* skip the name */
            }
          }
          continue;
        }
      }
      if (ch === '{' || ch === '}') {
        if (level === 0) {
          if (i < end && body[i] === ch) {
            const stop = i;
            i++;
            return done(stop, true);
          }
          if (ch === '}') fail("single '}' is not allowed");
        }
        i--;
        break;
      }
    }
    return done(i, false);
  };

  const findExpr = (level: number): void => {
    if (level >= 2) fail('expressions nested too deeply');
    i++; // the '{'
    const exprStart = i;
    const stack: string[] = [];
    let quote = '';
    let tripleQuote = false;
    for (; i < end; i++) {
      const ch = body[i]!;
      if (ch === '\\') fail('expression part cannot include a backslash');
      if (quote) {
        if (ch === quote) {
          if (!tripleQuote) quote = '';
          else if (body[i + 1] === ch && body[i + 2] === ch) {
            i += 2;
            quote = '';
          }
        }
        continue;
      }
      if (ch === "'" || ch === '"') {
        tripleQuote = body[i + 1] === ch && body[i + 2] === ch;
        if (tripleQuote) i += 2;
        quote = ch;
      } else if (ch === '[' || ch === '{' || ch === '(') {
        if (stack.length >= MAX_BRACKET_LEVEL) fail('too many nested parenthesis');
        stack.push(ch);
      } else if (ch === '#') {
        fail("expression part cannot include '#'");
      } else if (stack.length === 0 && '!:}=<>'.includes(ch)) {
        const nx = body[i + 1];
        if (nx === '=' && (ch === '!' || ch === '=' || ch === '<' || ch === '>')) {
          i++;
          continue;
        }
        if (ch === '<' || ch === '>') continue;
        break;
      } else if (ch === ']' || ch === '}' || ch === ')') {
        const open = stack.pop();
        if (open === undefined) fail(`unmatched '${ch}'`);
        if ((open === '(' && ch !== ')') || (open === '[' && ch !== ']') || (open === '{' && ch !== '}')) {
          fail(`closing parenthesis '${ch}' does not match opening parenthesis '${open}'`);
        }
      }
    }
    if (quote) fail('unterminated string');
    if (stack.length > 0) fail(`unmatched '${stack[stack.length - 1]}'`);
    if (i >= end) fail("expecting '}'");
    const expr = body.slice(exprStart, i);
    if (/^[ \t\n\f]*$/.test(expr)) fail('empty expression not allowed');
    try {
      parseSource(`(${expr})`, depth + 1);
    } catch (e) {
      if (e instanceof CalcSyntaxError) fail(`invalid expression: ${e.message}`);
      throw e;
    }
    if (body[i] === '=') {
      i++;
      while (i < end && ' \t\n\v\f\r'.includes(body[i]!)) i++;
      if (i >= end) fail("expecting '}'");
    }
    if (body[i] === '!') {
      i++;
      if (i >= end) fail("expecting '}'");
      const conv = body[i++];
      if (conv !== 's' && conv !== 'r' && conv !== 'a') fail("invalid conversion character: expected 's', 'r', or 'a'");
    }
    if (i < end && body[i] === ':') {
      i++;
      if (i >= end) fail("expecting '}'");
      parseLevel(level + 1);
    }
    if (i >= end || body[i] !== '}') fail("expecting '}'");
    i++;
  };

  const parseLevel = (level: number): void => {
    for (;;) {
      if (findLiteral(level)) continue;
      if (i >= end || body[i] === '}') break;
      findExpr(level);
    }
    if (level !== 0 && body[i] !== '}') fail("expecting '}'");
  };

  parseLevel(0);
}

// ---------------------------------------------------------------------------------------
// Parser: CPython 3.11's expression grammar (eval mode), recursive descent.

const BINARY_LEVELS: readonly (readonly string[])[] = [
  ['|'],
  ['^'],
  ['&'],
  ['<<', '>>'],
  ['+', '-'],
  ['*', '/', '//', '%', '@'],
];
const COMPARE_OPS: ReadonlySet<string> = new Set(['==', '!=', '<', '<=', '>', '>=']);

interface Parsed {
  node: Node;
  /** How the expression was written, for the few places the grammar cares. */
  form: 'plain' | 'starred' | 'walrus';
  /** For a starred item, whether what follows the '*' is a target. */
  starredTarget?: boolean;
}

/** An item of a tuple or list that may stand in a target list. */
function isStarTarget(p: Parsed): boolean {
  return p.form === 'starred' ? p.starredTarget === true : p.form === 'plain' && isTarget(p.node);
}

class Parser {
  private p = 0;
  private depth = 0;

  constructor(private readonly toks: Token[]) {}

  // -- token helpers

  private peek(offset = 0): Token {
    return this.toks[Math.min(this.p + offset, this.toks.length - 1)]!;
  }
  private at(text: string, offset = 0): boolean {
    const t = this.peek(offset);
    return (t.kind === 'op' || t.kind === 'kw') && t.text === text;
  }
  private accept(text: string): boolean {
    if (!this.at(text)) return false;
    this.p++;
    return true;
  }
  private expect(text: string): void {
    if (!this.accept(text)) throw this.unexpected(`expected '${text}'`);
  }
  private unexpected(why?: string): CalcSyntaxError {
    const t = this.peek();
    const what = t.kind === 'end' ? 'end of input' : t.kind === 'newline' ? 'line break' : `'${t.text.slice(0, 20)}'`;
    return syntax(`invalid syntax: unexpected ${what}${why ? ` (${why})` : ''}`, t.pos);
  }
  private name(): string {
    const t = this.peek();
    if (t.kind !== 'name') throw this.unexpected('expected a name');
    this.p++;
    return t.text;
  }
  private enter(): void {
    if (++this.depth > CALC_MAX_DEPTH) {
      throw new CalcDeviation(`expression is nested too deeply (more than ${CALC_MAX_DEPTH} levels)`);
    }
  }
  private leave(): void {
    this.depth--;
  }

  // -- entry

  /** eval: expressions NEWLINE* ENDMARKER */
  parseEval(): Node {
    if (this.peek().kind === 'end') throw new CalcSyntaxError('invalid syntax: empty expression');
    const first = this.expression();
    let node = first;
    if (this.at(',')) {
      while (this.accept(',')) {
        if (this.startsExpression()) this.expression();
        else break;
      }
      node = bad('Tuple');
    }
    while (this.peek().kind === 'newline') this.p++;
    if (this.peek().kind !== 'end') throw this.unexpected();
    return node;
  }

  private startsExpression(): boolean {
    const t = this.peek();
    if (t.kind === 'num' || t.kind === 'str' || t.kind === 'name') return true;
    if (t.kind === 'kw') return ['True', 'False', 'None', 'not', 'lambda', 'await'].includes(t.text);
    if (t.kind === 'op') return ['(', '[', '{', '-', '+', '~', '...'].includes(t.text);
    return false;
  }

  // -- expressions

  /** expression: disjunction ['if' disjunction 'else' expression] | lambdef */
  private expression(): Node {
    this.enter();
    try {
      if (this.accept('lambda')) {
        this.lambdaParams();
        this.expression();
        return bad('Lambda');
      }
      const body = this.disjunction();
      if (!this.accept('if')) return body;
      this.disjunction();
      this.expect('else');
      this.expression();
      return bad('IfExp');
    } finally {
      this.leave();
    }
  }

  /** named_expression: NAME ':=' expression | expression !':=' */
  private namedExpression(): Parsed {
    if (this.peek().kind === 'name' && this.at(':=', 1)) {
      this.p += 2;
      this.expression();
      return { node: bad('NamedExpr'), form: 'walrus' };
    }
    const node = this.expression();
    if (this.at(':=')) throw this.unexpected('only a plain name can be assigned with :=');
    return { node, form: 'plain' };
  }

  /** star_named_expression: '*' bitwise_or | named_expression */
  private starNamedExpression(): Parsed {
    if (this.accept('*')) {
      const inner = this.binary(0);
      return { node: bad('Starred'), form: 'starred', starredTarget: isTarget(inner) };
    }
    return this.namedExpression();
  }

  private disjunction(): Node {
    const first = this.conjunction();
    if (!this.at('or')) return first;
    while (this.accept('or')) this.conjunction();
    return bad('BoolOp');
  }

  private conjunction(): Node {
    const first = this.inversion();
    if (!this.at('and')) return first;
    while (this.accept('and')) this.inversion();
    return bad('BoolOp');
  }

  private inversion(): Node {
    if (!this.at('not')) return this.comparison();
    this.enter();
    try {
      this.p++;
      this.inversion();
      return bad('UnaryOp');
    } finally {
      this.leave();
    }
  }

  private comparison(): Node {
    const first = this.binary(0);
    let any = false;
    for (;;) {
      const t = this.peek();
      if (t.kind === 'op' && COMPARE_OPS.has(t.text)) this.p++;
      else if (this.at('in')) this.p++;
      else if (this.at('not') && this.at('in', 1)) this.p += 2;
      else if (this.at('is')) {
        this.p++;
        this.accept('not');
      } else break;
      this.binary(0);
      any = true;
    }
    return any ? bad('Compare') : first;
  }

  /** The left-associative binary levels, bitwise_or down to term. */
  private binary(level: number): Node {
    if (level === BINARY_LEVELS.length) return this.factor();
    const ops = BINARY_LEVELS[level]!;
    let left = this.binary(level + 1);
    for (;;) {
      const t = this.peek();
      if (t.kind !== 'op' || !ops.includes(t.text)) return left;
      this.p++;
      const right = this.binary(level + 1);
      left = ARITH_OPS.has(t.text) ? mkBin(t.text as ArithOp, left, right) : bad('BinOp');
    }
  }

  /** factor: ('+' | '-' | '~') factor | power */
  private factor(): Node {
    const t = this.peek();
    if (t.kind === 'op' && (t.text === '+' || t.text === '-' || t.text === '~')) {
      this.enter();
      try {
        this.p++;
        const e = this.factor();
        return t.text === '~' ? bad('UnaryOp') : mkUnary(t.text, e);
      } finally {
        this.leave();
      }
    }
    return this.power();
  }

  /** power: await_primary ['**' factor] */
  private power(): Node {
    let base: Node;
    if (this.accept('await')) {
      this.primary();
      base = bad('Await');
    } else {
      base = this.primary();
    }
    if (!this.accept('**')) return base;
    return mkBin('**', base, this.factor());
  }

  /** primary: atom followed by .name, (args), [slices] */
  private primary(): Node {
    let node = this.atom();
    for (;;) {
      if (this.accept('.')) {
        this.name();
        node = bad('Attribute', true);
      } else if (this.accept('(')) {
        this.callArgs();
        node = bad('Call');
      } else if (this.accept('[')) {
        this.slices();
        node = bad('Subscript', true);
      } else return node;
    }
  }

  private atom(): Node {
    const t = this.peek();
    switch (t.kind) {
      case 'num':
        this.p++;
        return t.value === null || t.value === undefined ? { k: 'const', bool: null, d: 1 } : { k: 'num', v: t.value, d: 1 };
      case 'str':
        return this.strings();
      case 'name':
        this.p++;
        return bad('Name', true);
      case 'kw':
        if (t.text === 'True' || t.text === 'False') {
          this.p++;
          return { k: 'const', bool: t.text, d: 1 };
        }
        if (t.text === 'None') {
          this.p++;
          return { k: 'const', bool: null, d: 1 };
        }
        throw this.unexpected();
      case 'op':
        if (t.text === '...') {
          this.p++;
          return { k: 'const', bool: null, d: 1 };
        }
        if (t.text === '(') return this.parenthesized();
        if (t.text === '[') return this.bracketed();
        if (t.text === '{') return this.braced();
        throw this.unexpected();
      default:
        throw this.unexpected();
    }
  }

  /** STRING+: implicit concatenation; bytes and str do not mix. */
  private strings(): Node {
    let bytes: boolean | null = null;
    let joined = false;
    while (this.peek().kind === 'str') {
      const t = this.peek();
      const b = t.prefix!.includes('b');
      if (bytes !== null && b !== bytes) throw syntax('cannot mix bytes and nonbytes literals', t.pos);
      bytes = b;
      if (t.prefix!.includes('f')) joined = true;
      this.p++;
    }
    return joined ? bad('JoinedStr') : { k: 'const', bool: null, d: 1 };
  }

  /** '(' ... ')': tuple, group, generator expression or yield. */
  private parenthesized(): Node {
    this.expect('(');
    if (this.accept(')')) return bad('Tuple', true);
    if (this.accept('yield')) {
      let name = 'Yield';
      if (this.accept('from')) {
        this.expression();
        name = 'YieldFrom';
      } else if (!this.at(')')) {
        this.starExpressions();
      }
      this.expect(')');
      return bad(name);
    }
    const first = this.starNamedExpression();
    if (first.form !== 'starred' && (this.at('for') || this.at('async'))) {
      this.comprehension();
      this.expect(')');
      return bad('GeneratorExp');
    }
    if (this.accept(')')) {
      if (first.form === 'starred') throw syntax('cannot use starred expression here', this.peek(-1).pos);
      return first.node;
    }
    this.expect(',');
    let target = isStarTarget(first);
    while (!this.at(')')) {
      if (!isStarTarget(this.starNamedExpression())) target = false;
      if (!this.accept(',')) break;
    }
    this.expect(')');
    return bad('Tuple', target);
  }

  /** star_expressions (after yield) */
  private starExpressions(): void {
    for (;;) {
      if (this.accept('*')) this.binary(0);
      else this.expression();
      if (!this.accept(',') || this.at(')')) return;
    }
  }

  private bracketed(): Node {
    this.expect('[');
    if (this.accept(']')) return bad('List', true);
    const first = this.starNamedExpression();
    if (first.form !== 'starred' && (this.at('for') || this.at('async'))) {
      this.comprehension();
      this.expect(']');
      return bad('ListComp');
    }
    let target = isStarTarget(first);
    while (this.accept(',')) {
      if (this.at(']')) break;
      if (!isStarTarget(this.starNamedExpression())) target = false;
    }
    this.expect(']');
    return bad('List', target);
  }

  private braced(): Node {
    this.expect('{');
    if (this.accept('}')) return bad('Dict');
    // A dict: '**' bitwise_or or expression ':' expression items.
    const dictItem = (): 'unpack' | 'pair' => {
      if (this.accept('**')) {
        this.binary(0);
        return 'unpack';
      }
      this.expression();
      this.expect(':');
      this.expression();
      return 'pair';
    };
    let isDict: boolean;
    let firstKind: 'unpack' | 'pair' | Parsed['form'];
    if (this.at('**')) {
      isDict = true;
      firstKind = dictItem();
    } else {
      const first = this.starNamedExpression();
      if (this.at(':') && first.form === 'plain') {
        this.p++;
        this.expression();
        isDict = true;
        firstKind = 'pair';
      } else {
        isDict = false;
        firstKind = first.form;
      }
    }
    if ((this.at('for') || this.at('async')) && (firstKind === 'pair' || firstKind === 'plain' || firstKind === 'walrus')) {
      this.comprehension();
      this.expect('}');
      return bad(isDict ? 'DictComp' : 'SetComp');
    }
    while (this.accept(',')) {
      if (this.at('}')) break;
      if (isDict) dictItem();
      else this.starNamedExpression();
    }
    this.expect('}');
    return bad(isDict ? 'Dict' : 'Set');
  }

  /** for_if_clauses: (['async'] 'for' star_targets 'in' disjunction ('if' disjunction)*)+ */
  private comprehension(): void {
    do {
      this.accept('async');
      this.expect('for');
      this.starTargets();
      this.expect('in');
      this.disjunction();
      while (this.accept('if')) this.disjunction();
    } while (this.at('for') || this.at('async'));
  }

  /**
   * star_targets, up to the 'in'. Targets are a subset of expressions: parse each item as
   * one (bitwise_or, so the 'in' is not taken) and check its shape, with no backtracking.
   */
  private starTargets(): void {
    for (;;) {
      const t = this.peek();
      if (this.accept('*') && this.at('*')) throw this.unexpected();
      if (!isTarget(this.binary(0))) throw syntax('invalid assignment target in comprehension', t.pos);
      if (!this.accept(',') || this.at('in')) return;
    }
  }

  /** '(' [arguments] ')' after a primary; the '(' is consumed. */
  private callArgs(): void {
    if (this.accept(')')) return;
    let seenKeyword = false;
    let seenDoubleStar = false;
    let count = 0;
    for (;;) {
      const t = this.peek();
      if (this.accept('*')) {
        if (seenDoubleStar) throw syntax('iterable argument unpacking follows keyword argument unpacking', t.pos);
        this.expression();
      } else if (this.accept('**')) {
        this.expression();
        seenDoubleStar = true;
      } else if (t.kind === 'name' && this.at('=', 1)) {
        this.p += 2;
        this.expression();
        seenKeyword = true;
      } else {
        const arg = this.namedExpression();
        if (this.at('=')) throw syntax('expression cannot contain assignment', this.peek().pos);
        if (count === 0 && arg.form === 'plain' && (this.at('for') || this.at('async'))) {
          this.comprehension();
          this.expect(')');
          return;
        }
        if (seenKeyword || seenDoubleStar) throw syntax('positional argument follows keyword argument', t.pos);
      }
      count++;
      if (this.accept(')')) return;
      this.expect(',');
      if (this.accept(')')) return;
    }
  }

  /** slices ']' after '['; the '[' is consumed. */
  private slices(): void {
    for (;;) {
      if (this.accept('*')) this.binary(0);
      else this.slice();
      if (this.accept(']')) return;
      this.expect(',');
      if (this.accept(']')) return;
    }
  }

  /** slice: [expression] ':' [expression] [':' [expression]] | named_expression */
  private slice(): void {
    const boundEnds = (): boolean => this.at(':') || this.at(',') || this.at(']');
    if (!this.at(':')) {
      const first = this.namedExpression();
      if (!this.at(':')) return;
      if (first.form === 'walrus') throw this.unexpected();
    }
    this.expect(':');
    if (!boundEnds()) this.expression();
    if (this.accept(':') && !boundEnds()) this.expression();
  }

  /** lambda_params up to and including the ':' */
  private lambdaParams(): void {
    let seenDefault = false;
    let seenSlash = false;
    let seenStar = false;
    let bareStar = false;
    let namedAfterStar = 0;
    let params = 0;
    for (;;) {
      if (this.accept(':')) {
        if (bareStar && namedAfterStar === 0) throw syntax('named arguments must follow bare *', this.peek(-1).pos);
        return;
      }
      const t = this.peek();
      if (this.accept('/')) {
        if (seenSlash || seenStar || params === 0) throw syntax("'/' is not allowed here", t.pos);
        seenSlash = true;
      } else if (this.accept('*')) {
        if (seenStar) throw syntax('* argument may appear only once', t.pos);
        seenStar = true;
        if (this.peek().kind === 'name') this.p++;
        else bareStar = true;
      } else if (this.accept('**')) {
        this.name();
        if (bareStar && namedAfterStar === 0) throw syntax('named arguments must follow bare *', t.pos);
        this.accept(',');
        this.expect(':');
        return;
      } else {
        this.name();
        const hasDefault = this.accept('=');
        if (hasDefault) this.expression();
        if (seenStar) namedAfterStar++;
        else if (hasDefault) seenDefault = true;
        else if (seenDefault) throw syntax('non-default argument follows default argument', t.pos);
        params++;
      }
      if (!this.accept(',')) {
        this.expect(':');
        if (bareStar && namedAfterStar === 0) throw syntax('named arguments must follow bare *', t.pos);
        return;
      }
    }
  }
}

function mkUnary(op: '+' | '-', e: Node): Node {
  return checkDepth({ k: 'unary', op, e, d: e.d + 1 });
}

function mkBin(op: ArithOp, l: Node, r: Node): Node {
  return checkDepth({ k: 'bin', op, l, r, d: Math.max(l.d, r.d) + 1 });
}

function checkDepth(n: Node): Node {
  if (n.d > CALC_MAX_DEPTH) throw new CalcDeviation(`expression is nested too deeply (more than ${CALC_MAX_DEPTH} levels)`);
  return n;
}

/** Tokenizes and parses source text (already stripped, newlines translated). */
function parseSource(src: string, nesting: number): Node {
  const tokens = new Tokenizer(src, nesting).run();
  return new Parser(tokens).parseEval();
}

// ---------------------------------------------------------------------------------------
// The walk and the arithmetic (CPython's int and float semantics).

function toFloat(v: Value): number {
  return typeof v === 'bigint' ? bigIntToFloat(v) : v;
}

function checkIntermediate(v: bigint): bigint {
  if (bitLength(v) > INTERMEDIATE_MAX_BITS) {
    throw new CalcDeviation(`integer intermediate result would have more than ${CALC_MAX_INTERMEDIATE_DIGITS} digits`);
  }
  return v;
}

/** Digits of |n| in base 10. */
function decimalDigits(n: bigint): number {
  return (n < 0n ? -n : n).toString().length;
}

function intPow(base: bigint, exp: bigint): bigint {
  if (exp === 0n) return 1n;
  if (base === 0n || base === 1n) return base;
  if (base === -1n) return exp % 2n === 0n ? 1n : -1n;
  // Check the size before computing it: 9**9**9 must not run.
  const tooBig = (): CalcDeviation =>
    new CalcDeviation(`exponentiation result would have more than ${CALC_MAX_INT_DIGITS} digits`);
  if (exp > 20_000n) throw tooBig(); // 2**20000 already has 6021 digits
  const bits = bitLength(base);
  const shift = Math.max(0, bits - 53);
  const abs = base < 0n ? -base : base;
  const log10 = Math.log10(Number(abs >> BigInt(shift))) + shift * Math.log10(2);
  if (Number(exp) * log10 > CALC_MAX_INT_DIGITS + 1) throw tooBig();
  const r = base ** exp;
  if (bitLength(r) > INT_DIGITS_SURELY_OK_BITS && decimalDigits(r) > CALC_MAX_INT_DIGITS) throw tooBig();
  return r;
}

function floorDivInt(a: bigint, b: bigint): bigint {
  if (b === 0n) throw new PyError('ZeroDivisionError', 'integer division or modulo by zero');
  const q = a / b;
  return (a % b !== 0n) && (a < 0n !== b < 0n) ? q - 1n : q;
}

function modInt(a: bigint, b: bigint): bigint {
  if (b === 0n) throw new PyError('ZeroDivisionError', 'integer modulo by zero');
  const r = a % b;
  return r !== 0n && (r < 0n !== b < 0n) ? r + b : r;
}

function arith(op: ArithOp, a: Value, b: Value): Value {
  if (typeof a === 'bigint' && typeof b === 'bigint') {
    switch (op) {
      case '+':
        return checkIntermediate(a + b);
      case '-':
        return checkIntermediate(a - b);
      case '*':
        if (bitLength(a) + bitLength(b) > INTERMEDIATE_MAX_BITS + 1) {
          throw new CalcDeviation(`integer intermediate result would have more than ${CALC_MAX_INTERMEDIATE_DIGITS} digits`);
        }
        return checkIntermediate(a * b);
      case '/':
        return bigIntTrueDiv(a, b);
      case '//':
        return floorDivInt(a, b);
      case '%':
        return modInt(a, b);
      case '**':
        // A negative exponent makes it float ** float, conversions and all.
        return b < 0n ? pyFloatPow(toFloat(a), toFloat(b)) : intPow(a, b);
    }
  }
  const x = toFloat(a);
  const y = toFloat(b);
  switch (op) {
    case '+':
      return x + y;
    case '-':
      return x - y;
    case '*':
      return x * y;
    case '/':
      return pyFloatTrueDiv(x, y);
    case '//':
      return pyFloatFloorDiv(x, y);
    case '%':
      return pyFloatMod(x, y);
    case '**':
      return pyFloatPow(x, y);
  }
}

/** The seed's _eval_node: same order, so the same error wins. */
function evaluate(n: Node): Value {
  switch (n.k) {
    case 'num':
      return n.v;
    case 'const':
      if (n.bool !== null) {
        throw new CalcDeviation(`${n.bool} is a boolean, not a number (booleans are not allowed)`);
      }
      throw new PyError('ValueError', 'non-numeric constant');
    case 'bad':
      throw new PyError('ValueError', `disallowed expression node: ${n.name}`);
    case 'unary': {
      const v = evaluate(n.e);
      if (n.op === '+') return v;
      return typeof v === 'bigint' ? -v : -v; // one branch per type: TS types - per operand
    }
    case 'bin': {
      const l = evaluate(n.l);
      const r = evaluate(n.r);
      return arith(n.op, l, r);
    }
  }
}

function formatValue(v: Value): string {
  if (typeof v === 'number') {
    if (!isIntegerFloat(v)) return pyFloatRepr(v);
    v = floatToBigInt(v); // 4042.0 -> "4042", as the seed prints int(val)
  }
  if (bitLength(v) > INT_DIGITS_SURELY_OK_BITS && decimalDigits(v) > CALC_MAX_INT_DIGITS) {
    throw new CalcDeviation(`integer result has more than ${CALC_MAX_INT_DIGITS} digits`);
  }
  return v.toString();
}

// ---------------------------------------------------------------------------------------
// Input preparation.

const PY_SPACE = new Set(
  '\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000',
);

/** str.strip(), linear however the whitespace is laid out. */
function strip(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && PY_SPACE.has(s[a]!)) a++;
  while (b > a && PY_SPACE.has(s[b - 1]!)) b--;
  return s.slice(a, b);
}

/** CPython encodes the source as UTF-8 first: a lone surrogate fails there. */
function checkSurrogates(s: string): void {
  let cpIndex = 0;
  for (let i = 0; i < s.length; i++, cpIndex++) {
    const c = s.charCodeAt(i);
    const isPair = c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    if (isPair) {
      i++;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      let j = i + 1;
      while (j < s.length && isLoneSurrogateAt(s, j)) j++;
      const msg =
        j - i === 1
          ? `'utf-8' codec can't encode character '\\u${c.toString(16)}' in position ${cpIndex}: surrogates not allowed`
          : `'utf-8' codec can't encode characters in position ${cpIndex}-${cpIndex + j - i - 1}: surrogates not allowed`;
      throw new PyError('UnicodeEncodeError', msg);
    }
  }
}

function isLoneSurrogateAt(s: string, i: number): boolean {
  const c = s.charCodeAt(i);
  if (c < 0xd800 || c > 0xdfff) return false;
  if (c <= 0xdbff) return !(i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00);
  return true; // a low surrogate here has no high one before it (pairs were skipped)
}

/**
 * The seed's `calc`: evaluates an arithmetic expression and returns the result as Python
 * prints it, or `CalcError: <message>`. Never throws, never evaluates code.
 */
export function calc(expr: string): string {
  try {
    if (expr.length > 100 * CALC_MAX_INPUT_CHARS) {
      throw new CalcDeviation(`expression is too long (more than ${CALC_MAX_INPUT_CHARS} characters)`);
    }
    const src = strip(expr);
    if (src.length > CALC_MAX_INPUT_CHARS) {
      throw new CalcDeviation(`expression is too long (more than ${CALC_MAX_INPUT_CHARS} characters)`);
    }
    checkSurrogates(src);
    if (src.includes('\0')) throw new PyError('ValueError', 'source code string cannot contain null bytes');
    // CPython reads \r\n and \r as \n.
    const tree = parseSource(src.replace(/\r\n?/g, '\n'), 0);
    return formatValue(evaluate(tree));
  } catch (e) {
    if (e instanceof PyError) {
      if (e.pyType === 'complex') return `CalcError: complex result not supported: ${e.message}`;
      return `CalcError: ${e.message}`;
    }
    if (e instanceof CalcSyntaxError || e instanceof CalcDeviation) return `CalcError: ${e.message}`;
    if (e instanceof RangeError) return 'CalcError: expression is too complex';
    return `CalcError: internal error: ${e instanceof Error ? e.message : String(e)}`;
  }
}
