// JSONL text to values: the one line reader of the trainer's input files, the TRL export and
// the extension's world files. Blank lines are skipped; a line that is not JSON is an error
// naming `source:line`, of the caller's class (an InputError, an ExportError...).

/** A JSONL value, its 1-based line, and where it came from ("source:line"). */
export interface JsonlRow {
  value: unknown;
  line: number;
  where: string;
}

/** The values of `text`'s non-blank lines; `fail` makes the error of a line that is not JSON. */
export function parseJsonl(text: string, source: string, fail: (message: string) => Error = (message) => new Error(message)): JsonlRow[] {
  const out: JsonlRow[] = [];
  let at = 0;
  let line = 0;
  // indexOf, not split: a large data file is not copied into an array of lines first.
  while (at <= text.length) {
    let nl = text.indexOf('\n', at);
    if (nl === -1) nl = text.length;
    line++;
    const s = text.slice(at, nl);
    if (s.trim() !== '') {
      const where = `${source}:${line}`;
      try {
        out.push({ value: JSON.parse(s) as unknown, line, where });
      } catch (err) {
        throw fail(`${where}: not JSON (${(err as Error).message.split('\n')[0]})`);
      }
    }
    at = nl + 1;
  }
  return out;
}
