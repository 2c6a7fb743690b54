// Offsets inside one JSONL row's string value (the `text` of a dataset or eval row): a
// decoded UTF-16 offset of the transcript maps to its column in the raw line and back,
// escape-exact (`\n` and `\"` are two columns, `\uXXXX` six). Pure: no vscode, no Node.
// The one home of that escape rule: the language server's row scan (./jsonRow.ts) builds
// its decoded-to-column map with `escapeWidth` too.

/** Raw columns that the decoded UTF-16 unit at raw column `i` takes: `\uXXXX` six, another escape two, a plain character one. */
export function escapeWidth(line: string, i: number): number {
  return line.charCodeAt(i) === 0x5c /* \ */ ? (line[i + 1] === 'u' ? 6 : 2) : 1;
}

/** Raw [start, end) of the content of the top-level string property `key` (without quotes). */
export function stringValueRange(line: string, key = 'text'): { start: number; end: number } | null {
  let depth = 0;
  let i = 0;
  let lastKey: string | null = null;
  let expectValueOf: string | null = null;
  while (i < line.length) {
    const c = line[i]!;
    if (c === '"') {
      const start = i + 1;
      let j = start;
      while (j < line.length && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      if (j >= line.length) return null; // unterminated string
      const raw = line.slice(start, j);
      if (depth === 1 && expectValueOf !== null) {
        if (expectValueOf === key) return { start, end: j };
        expectValueOf = null;
      } else if (depth === 1) {
        lastKey = raw;
      }
      i = j + 1;
      continue;
    }
    if (c === ':' && depth === 1 && lastKey !== null) {
      expectValueOf = decodeKey(lastKey);
      lastKey = null;
    } else if (c === '{' || c === '[') {
      depth++;
      expectValueOf = null;
    } else if (c === '}' || c === ']') {
      depth--;
    } else if (c === ',') {
      expectValueOf = null;
      lastKey = null;
    }
    i++;
  }
  return null;
}

function decodeKey(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw;
  }
}

/** Raw column of decoded offset `offset` in the string value starting at raw `start`. */
export function rawColumnOf(line: string, range: { start: number; end: number }, offset: number): number {
  let raw = range.start;
  let decoded = 0;
  while (raw < range.end && decoded < offset) {
    raw += escapeWidth(line, raw);
    decoded++;
  }
  return Math.min(raw, range.end);
}

/** Decoded offset of raw column `column` (a column inside an escape maps to the escape's unit). */
export function decodedOffsetAt(line: string, range: { start: number; end: number }, column: number): number {
  let raw = range.start;
  let decoded = 0;
  while (raw < range.end) {
    const width = escapeWidth(line, raw);
    if (column < raw + width) return decoded;
    raw += width;
    decoded++;
  }
  return decoded;
}
