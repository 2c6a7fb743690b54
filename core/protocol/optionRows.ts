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
