// What the GRPO and SFT option tables (./grpoOptions.ts, ./sftOptions.ts) share: their
// defaults, their job fields and reading parsed CLI flags through a table's rows. Pure: no Node, no DOM.

/** A row as these helpers need it: its kind, its CLI flag, whether a job spec carries it, its default. */
export interface FlagRow {
  kind: string;
  flag?: string;
  job?: true;
  default?: unknown;
}

/** Each row's default, keyed as the rows are (rows without one left out). */
export function rowDefaults<K extends string>(rows: readonly (readonly [K, FlagRow])[]): Record<K, unknown> {
  return Object.fromEntries(rows.filter(([, r]) => r.default !== undefined).map(([k, r]) => [k, r.default])) as Record<K, unknown>;
}

/** A job spec's fields of each value kind, in table order (what the worker's validator checks); `on|off` rows are booleans. */
export function jobFields<K extends string>(rows: readonly (readonly [K, FlagRow])[]): { strings: K[]; numbers: K[]; flags: K[] } {
  const of = (kinds: readonly string[]) => rows.filter(([, r]) => r.job && kinds.includes(r.kind)).map(([k]) => k);
  return { strings: of(['string']), numbers: of(['int', 'number']), flags: of(['flag', 'onOff']) };
}

/** Parsed flags as cli/args.ts gives them. */
export type ParsedFlags = Readonly<Record<string, string | number | boolean | undefined>>;

/**
 * The trainer's options from parsed CLI flags, keyed as the rows are: a flag not given is left
 * out (so the run's defaults apply), a `flag` row given is true, an `onOff` row is true for
 * `on`. The parser has checked each value against its row's kind and bounds.
 */
export function optionsFromFlags(rows: readonly (readonly [string, FlagRow])[], flags: ParsedFlags): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [key, r] of rows) {
    const v = r.flag === undefined ? undefined : flags[r.flag];
    if (v === undefined) continue;
    if (r.kind === 'flag') {
      if (v) out[key] = true;
    } else out[key] = r.kind === 'onOff' ? v === 'on' : v;
  }
  return out;
}

/** A row as a command's usage needs it (the columns both tables spell the same way). */
export interface UsageRow {
  kind: string;
  flag?: string;
  choices?: readonly string[];
  /** The usage line it is listed on (1-based). */
  usageLine?: number;
  /** Its place on that line where the table's order is not the usage's (rows without one keep table order, after those with one). */
  usageOrder?: number;
  /** Its value's name (`[--group G]`); choices and `on|off` spell themselves. */
  metavar?: string;
  /** Its whole text where that is not `[--flag VALUE]` ('' where another row's text names it). */
  usageText?: string;
  /** A note in parentheses after the options of a line: its own line's, or `usageNoteLine`'s. */
  usageNote?: string;
  usageNoteLine?: number;
}

/**
 * A command's usage from its rows: each line's options in order, then its notes, six spaces
 * apart; `tail` (e.g. "--run DIR") ends the last line's options. A line of notes alone is the note.
 */
export function usageFromRows(command: string, rows: readonly (readonly [string, UsageRow])[], tail: string): string {
  const listed = rows.map(([, r], i) => ({ r, i })).filter(({ r }) => r.usageLine !== undefined);
  listed.sort((a, b) => a.r.usageLine! - b.r.usageLine! || (a.r.usageOrder ?? 1e9 + a.i) - (b.r.usageOrder ?? 1e9 + b.i));
  const lines: string[][] = [];
  const notes: string[][] = [];
  for (const { r } of listed) {
    (lines[r.usageLine! - 1] ??= []).push(r.usageText ?? flagUsage(r));
    if (r.usageNote) (notes[(r.usageNoteLine ?? r.usageLine!) - 1] ??= []).push(r.usageNote);
  }
  const last = lines.length - 1;
  const texts = Array.from({ length: Math.max(lines.length, notes.length) }, (_, i) => {
    const options = [...(lines[i] ?? []), ...(i === last ? [tail] : [])].filter((p) => p !== '').join(' ');
    return [options, ...(notes[i] ?? [])].filter((p) => p !== '').join('      ');
  });
  return [`${command} ${texts[0]!}`, ...texts.slice(1).map((t) => `      ${t}`)].join('\n');
}

function flagUsage(r: UsageRow): string {
  if (r.kind === 'flag') return `[--${r.flag!}]`;
  const value = r.kind === 'onOff' ? 'on|off' : r.choices ? r.choices.join('|') : r.metavar;
  if (value === undefined) throw new Error(`option --${r.flag!}: its row names no metavar for the usage`);
  return `[--${r.flag!} ${value}]`;
}
