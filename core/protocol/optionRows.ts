// What the GRPO and SFT option tables (./grpoOptions.ts, ./sftOptions.ts) share: reading
// parsed CLI flags through a table's rows. Pure: no Node, no DOM.

/** A row as the flag reader needs it: its kind and its CLI flag, if any. */
export interface FlagRow {
  kind: string;
  flag?: string;
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
