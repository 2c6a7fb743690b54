// Argument parsing for the `agent-lab` contract: options come before positionals, `--`
// ends options, and a token starting with '-' followed by a digit or '(' is a positional
// (so `agent-lab calc -3+4` works). Every problem is a UsageError (exit code 2).

export class UsageError extends Error {
  constructor(
    message: string,
    readonly usage?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A failure that is not bad usage: the command prints its message and exits 1. */
export class CliError extends Error {}

/**
 * A user's input file that fails its format (a world file, docs/worlds.md): one line
 * naming the file, the line and the field, exit 2, and nothing written.
 */
export class BadInputError extends Error {
  constructor(message: string) {
    super(message.replace(/\r?\n/g, '\\n'));
    this.name = 'BadInputError';
  }
}

export type OptionKind = 'string' | 'int' | 'number' | 'flag';
export interface OptionSpec {
  kind: OptionKind;
  /** For ints and numbers: inclusive bounds. */
  min?: number;
  max?: number;
  /** For strings: the allowed values. */
  choices?: readonly string[];
  /** For strings: a file or folder path (an empty string is bad usage, never "the current folder"). */
  path?: boolean;
  required?: boolean;
}

export interface CommandSpec {
  name: string;
  usage: string;
  options: Record<string, OptionSpec>;
  /** How many positionals: 'none', 'one' (exactly one), 'one-or-more' (joined by spaces), 'optional', 'at-most-one' (none or exactly one). */
  positionals: 'none' | 'one' | 'one-or-more' | 'optional' | 'at-most-one';
  positionalName?: string;
}

export interface ParsedArgs {
  options: Record<string, string | number | boolean | undefined>;
  /** The positionals joined with single spaces, or undefined when none were given. */
  positional: string | undefined;
}

const looksLikeNegativeArgument = (token: string): boolean => /^-[0-9(.]/.test(token);

export function parseArgs(argv: readonly string[], spec: CommandSpec): ParsedArgs {
  const options: ParsedArgs['options'] = {};
  const positionals: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === '--') {
      i++;
      break;
    }
    if (!token.startsWith('-') || token === '-' || looksLikeNegativeArgument(token)) break;
    if (!token.startsWith('--')) throw new UsageError(`unknown option '${token}' (options are spelled --name)`, spec.usage);
    const eq = token.indexOf('=');
    const name = eq >= 0 ? token.slice(2, eq) : token.slice(2);
    const opt = spec.options[name];
    if (!opt) throw new UsageError(`unknown option '--${name}' for '${spec.name}'`, spec.usage);
    if (opt.kind === 'flag') {
      if (eq >= 0) throw new UsageError(`option '--${name}' takes no value`, spec.usage);
      options[name] = true;
      continue;
    }
    let value: string;
    if (eq >= 0) value = token.slice(eq + 1);
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`option '--${name}' needs a value`, spec.usage);
      value = next;
      i++;
    }
    options[name] = convert(name, value, opt, spec.usage);
  }
  for (; i < argv.length; i++) positionals.push(argv[i]!);

  for (const [name, opt] of Object.entries(spec.options)) {
    if (opt.required && options[name] === undefined) throw new UsageError(`missing required option '--${name}'`, spec.usage);
  }
  if (spec.positionals === 'none' && positionals.length > 0) {
    throw new UsageError(`unexpected argument '${positionals[0]}' (options must come before arguments)`, spec.usage);
  }
  if ((spec.positionals === 'one-or-more' || spec.positionals === 'one') && positionals.length === 0) {
    throw new UsageError(`missing ${spec.positionalName ?? 'argument'}`, spec.usage);
  }
  if ((spec.positionals === 'one' || spec.positionals === 'at-most-one') && positionals.length > 1) {
    throw new UsageError(`expected one ${spec.positionalName ?? 'argument'}, got ${positionals.length} (${positionals.map((p) => JSON.stringify(p)).join(' ')})`, spec.usage);
  }
  if ((spec.positionals === 'one' || spec.positionals === 'at-most-one') && positionals[0] === '') throw new UsageError(`${spec.positionalName ?? 'the argument'} is an empty string`, spec.usage);
  return { options, positional: positionals.length ? positionals.join(' ') : undefined };
}

function convert(name: string, value: string, opt: OptionSpec, usage: string): string | number {
  if (opt.kind === 'int') {
    if (!/^-?[0-9]+$/.test(value)) throw new UsageError(`option '--${name}' needs an integer, got '${value}'`, usage);
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new UsageError(`option '--${name}' is out of range: ${value}`, usage);
    if (opt.min !== undefined && n < opt.min) throw new UsageError(`option '--${name}' must be at least ${opt.min}, got ${n}`, usage);
    if (opt.max !== undefined && n > opt.max) throw new UsageError(`option '--${name}' must be at most ${opt.max}, got ${n}`, usage);
    return n;
  }
  if (opt.kind === 'number') {
    const n = /^-?([0-9]+\.?[0-9]*|\.[0-9]+)(e[-+]?[0-9]+)?$/i.test(value) ? Number(value) : NaN;
    if (!Number.isFinite(n)) throw new UsageError(`option '--${name}' needs a number, got '${value}'`, usage);
    if (opt.min !== undefined && n < opt.min) throw new UsageError(`option '--${name}' must be at least ${opt.min}, got ${n}`, usage);
    if (opt.max !== undefined && n > opt.max) throw new UsageError(`option '--${name}' must be at most ${opt.max}, got ${n}`, usage);
    return n;
  }
  if (opt.path && value === '') throw new UsageError(`option '--${name}' needs a path, got an empty string`, usage);
  if (opt.choices && !opt.choices.includes(value)) {
    throw new UsageError(`option '--${name}' must be one of ${opt.choices.join(', ')}; got '${value}'`, usage);
  }
  return value;
}

/** An int option's value, or `fallback` when it was not given. */
export function intOption(a: ParsedArgs, name: string, fallback: number): number {
  const v = a.options[name];
  return typeof v === 'number' ? v : fallback;
}
