// One JSONL row, scanned with jsonc-parser (offsets, decoded values, errors), and the map
// from a character of the decoded `text` string back to its column in the source line:
// `\n`, `\"` and `\uXXXX` each stand for one UTF-16 unit, so the map stays exact (the escape
// rule is ./jsonText.ts's, which the panels use on raw lines).
import { ParseErrorCode, createScanner, printParseErrorCode, visit } from 'jsonc-parser';
import { escapeWidth } from './jsonText';

export interface RowScan {
  /** The first JSON error: its column and a message. */
  error: { start: number; end: number; message: string } | null;
  /** The top level is an object. */
  isObject: boolean;
  /** The `text` property's string literal, when the row has one (the last one wins, as in Python). */
  text: RowString | null;
  /** Why there is no usable text (`text` missing or not a string). */
  textProblem: { start: number; end: number; message: string } | null;
  /** Other top-level string fields (task, kind, question, gold, answer, failure). */
  fields: Record<string, string>;
  /** Top-level keys, in order. */
  keys: string[];
}

export interface RowString {
  value: string;
  /** Column of the opening quote. */
  literalStart: number;
  /** Column just after the closing quote (or the end of the literal when unterminated). */
  literalEnd: number;
  /**
   * map[i] = column of the source text of decoded unit i; map[value.length] = the column
   * of the closing quote. A decoded range [a, b) covers columns [map[a], map[b]).
   */
  map: Int32Array;
  /** The decoded value and the map disagree (a broken escape): positions are approximate. */
  approximate: boolean;
}

const ERROR_WORDS: Partial<Record<string, string>> = {
  InvalidSymbol: 'an invalid symbol',
  InvalidNumberFormat: 'an invalid number',
  PropertyNameExpected: 'expected a property name in double quotes',
  ValueExpected: 'expected a value',
  ColonExpected: "expected ':'",
  CommaExpected: "expected ',' or the end of the object",
  CloseBraceExpected: "expected '}'",
  CloseBracketExpected: "expected ']'",
  EndOfFileExpected: 'expected the end of the row (one JSON value per line)',
  InvalidCommentToken: 'comments are not JSON',
  UnexpectedEndOfComment: 'comments are not JSON',
  UnexpectedEndOfString: 'the string is not closed',
  UnexpectedEndOfNumber: 'the number is not complete',
  InvalidUnicode: 'an invalid \\u escape (expected four hex digits)',
  InvalidEscapeCharacter: 'an invalid escape character',
  InvalidCharacter: 'an unescaped control character inside a string',
};

export function scanRow(line: string): RowScan {
  const out: RowScan = { error: null, isObject: false, text: null, textProblem: null, fields: {}, keys: [] };
  // Validity from the native parser (fast); the first error's place from jsonc-parser.
  try {
    JSON.parse(line);
  } catch {
    out.error = firstError(line);
  }
  // Offsets and decoded values from jsonc-parser's scanner.
  const sc = createScanner(line, true);
  let depth = 0;
  let expectKey = false;
  let key: string | null = null;
  let textKey: { start: number; end: number } | null = null;
  let first = true;
  for (let k = sc.scan(); k !== T_EOF; k = sc.scan()) {
    if (first) {
      out.isObject = k === T_OPEN_BRACE;
      first = false;
    }
    switch (k) {
      case T_OPEN_BRACE:
      case T_OPEN_BRACKET:
        if (depth === 1 && !expectKey && key === 'text') textProblem(out, sc.getTokenOffset(), line.length);
        depth++;
        if (depth === 1) expectKey = true;
        break;
      case T_CLOSE_BRACE:
      case T_CLOSE_BRACKET:
        depth--;
        break;
      case T_COMMA:
        if (depth === 1) expectKey = true;
        break;
      case T_COLON:
        if (depth === 1) expectKey = false;
        break;
      case T_STRING:
        if (depth !== 1) break;
        if (expectKey) {
          key = sc.getTokenValue();
          out.keys.push(key);
          if (key === 'text') {
            textKey = { start: sc.getTokenOffset(), end: sc.getTokenOffset() + sc.getTokenLength() };
            out.text = null;
            out.textProblem = null;
          }
        } else if (key === 'text') {
          out.text = rowString(line, sc.getTokenValue(), sc.getTokenOffset(), sc.getTokenLength(), sc.getTokenError() !== 0);
        } else if (key !== null) out.fields[key] = sc.getTokenValue();
        break;
      default:
        if (depth === 1 && !expectKey && key === 'text') {
          const off = sc.getTokenOffset();
          out.textProblem = {
            start: off,
            end: off + sc.getTokenLength(),
            message: `the row's "text" is ${line.slice(off, off + sc.getTokenLength())}, not a string: expected the transcript as a JSON string`,
          };
        }
    }
  }
  const tk = textKey as { start: number; end: number } | null;
  if (tk !== null && out.text === null && out.textProblem === null) {
    out.textProblem = { ...tk, message: `the row's "text" is not a string: expected the transcript as a JSON string` };
  }
  if (out.text === null && out.textProblem === null && out.isObject) {
    out.textProblem = {
      start: 0,
      end: line.length,
      message: `the row has no "text" field: expected {"task": ..., "text": "<transcript>", "kind": ...}`,
    };
  }
  return out;
}

// jsonc-parser's SyntaxKind values (a const enum, which isolatedModules cannot inline).
const T_OPEN_BRACE = 1;
const T_CLOSE_BRACE = 2;
const T_OPEN_BRACKET = 3;
const T_CLOSE_BRACKET = 4;
const T_COMMA = 5;
const T_COLON = 6;
const T_STRING = 10;
const T_EOF = 17;

function textProblem(out: RowScan, start: number, end: number): void {
  out.textProblem = { start, end, message: `the row's "text" is not a string: expected the transcript as a JSON string` };
}

function firstError(line: string): { start: number; end: number; message: string } {
  let error: { start: number; end: number; message: string } | null = null;
  visit(
    line,
    {
      onError: (code: ParseErrorCode, offset, length) => {
        if (error !== null) return;
        const name = printParseErrorCode(code);
        // An error at the end of the row (a missing '}') sits on its last character.
        const start = Math.max(0, Math.min(offset, line.length - 1));
        const end = Math.min(line.length, Math.max(offset + length, start + 1));
        error = { start, end: Math.max(end, start), message: `the row is not valid JSON: ${ERROR_WORDS[name] ?? name}` };
      },
    },
    { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false },
  );
  // JSON.parse rejected what jsonc-parser let through (e.g. a lone surrogate escape): the whole row.
  return error ?? { start: 0, end: line.length, message: 'the row is not valid JSON' };
}

function rowString(line: string, value: string, offset: number, length: number, scanError: boolean): RowString {
  const closed = length >= 2 && line[offset + length - 1] === '"' && !endsInsideEscape(line, offset + 1, offset + length - 1);
  const rawStart = offset + 1;
  const rawEnd = closed ? offset + length - 1 : offset + length;
  const map = new Int32Array(value.length + 1);
  let i = rawStart;
  let u = 0;
  while (i < rawEnd && u < value.length) {
    map[u++] = i;
    i += escapeWidth(line, i);
  }
  const approximate = scanError || u !== value.length || i !== rawEnd;
  for (; u <= value.length; u++) map[u] = rawEnd;
  return { value, literalStart: offset, literalEnd: offset + length, map, approximate };
}

/** Whether the quote at `quoteAt` is escaped (an odd run of backslashes before it). */
function endsInsideEscape(line: string, from: number, quoteAt: number): boolean {
  let n = 0;
  for (let i = quoteAt - 1; i >= from && line[i] === '\\'; i--) n++;
  return n % 2 === 1;
}

/** Whether a string looks like a wire-format transcript (content sniffing). */
export function looksLikeTranscript(s: string): boolean {
  return s.includes('<|assistant|>') || s.includes('<|user|>') || s.includes('<|system|>');
}
