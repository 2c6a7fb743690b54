// `agent-lab bench TARGET`: the benchmarks run in a child process from their own
// development bundle (dist/bench.js, which a production build does not make and the .vsix
// never ships) or from the source tree through tsx, so neither they nor the test harnesses
// they use (bench/lspClient.ts, the LSP client the LSP tier shares) are in dist/cli.js.
// A packaged install has no bench/ folder: it says so (exit 1). What the CLI keeps is the
// argument checking, so `bench nothing` is still bad usage (exit 2) without a checkout.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { CliError, CommandSpec, ParsedArgs, UsageError, parseArgs } from './args';
import { BACKEND_CHOICES, type BackendAsk } from '../trainer/model/backend';

export const BENCH_TARGETS = ['lsp', 'grammar', 'train', 'decode'] as const;
export type BenchTarget = (typeof BENCH_TARGETS)[number];

/** What bench/main.ts is asked to run: the CLI's options, already checked. */
export interface BenchRequest {
  target: BenchTarget;
  json: boolean;
  large: boolean;
  iterations?: number;
  backend?: BackendAsk;
  rounds?: number;
  warmup?: number;
  /** bench train: where a step's time goes, by phase and by op, instead of the comparison. */
  profile?: boolean;
  /** bench train: repeat the whole comparison this many times and report the medians. */
  runs?: number;
  /** bench train: the model timed (tiny, the default preset; llama, a generated Llama-shaped model). */
  model?: 'tiny' | 'llama';
}

export function checkBenchTarget(target: string): BenchTarget {
  const known = BENCH_TARGETS.find((t) => t === target);
  if (!known) throw new UsageError(`unknown bench '${target}': this build has ${BENCH_TARGETS.map((t) => `'${t}'`).join(', ')}`);
  return known;
}

/** The repository root above this bundle (dist/cli.js) or this source file (cli/bench.ts). */
function checkoutRoot(): string {
  return path.resolve(__dirname, '..');
}

/**
 * Runs the benchmarks in a child process: the development bundle dist/bench.js when the
 * build made one (the figures are then the bundled code's, as shipped), else bench/main.ts
 * through tsx. Resolves when the child exits with 0.
 */
export async function runBenchFromSource(request: BenchRequest): Promise<void> {
  const root = checkoutRoot();
  const bundle = path.join(root, 'dist', 'bench.js');
  const entry = path.join(root, 'bench', 'main.ts');
  let args: string[];
  if (fs.existsSync(bundle) && fs.existsSync(entry)) {
    args = ['-e', `require(${JSON.stringify(bundle)}).runBenchProcess(process.argv[1])`, JSON.stringify(request)];
  } else {
    try {
      if (!fs.existsSync(entry)) throw new Error('no bench/');
      // tsx's loader for both module systems: the benchmarks load their parts with import().
      args = ['--import', pathToFileURL(createRequire(entry).resolve('tsx')).href, entry, JSON.stringify(request)];
    } catch {
      throw new CliError(`the benchmarks run from a source checkout (bench/*.ts through tsx; npm ci there); this installation at ${root} has none`);
    }
  }
  const child = spawn(process.execPath, args, { cwd: process.cwd(), stdio: 'inherit' });
  const code = await new Promise<number>((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (status, signal) => resolve(status ?? (signal ? 1 : 0)));
  });
  // The child printed its own one-line error first.
  if (code !== 0) throw new CliError(`bench ${request.target} failed (exit ${code})`);
}

/** `bench`'s options, which may also follow the target. */
export const BENCH_SPEC: CommandSpec = {
  name: 'bench',
  usage: 'agent-lab bench lsp|grammar|train|decode [--json] [--large] [--iterations N] [--backend B] [--rounds N] [--warmup N] [--runs N] [--profile] [--model tiny|llama]',
  options: { json: { kind: 'flag' }, large: { kind: 'flag' }, profile: { kind: 'flag' }, runs: { kind: 'int', min: 1, max: 20 }, iterations: { kind: 'int', min: 1, max: 1000 }, backend: { kind: 'string', choices: BACKEND_CHOICES }, rounds: { kind: 'int', min: 1, max: 100 }, warmup: { kind: 'int', min: 0, max: 100 }, model: { kind: 'string', choices: ['tiny', 'llama'] } },
  positionals: 'none',
};

/** `bench TARGET [options]`: options may also follow the target (`bench lsp --json`). */
export async function cmdBench(a: ParsedArgs): Promise<void> {
  const [target, ...rest] = (a.positional ?? '').split(' ');
  const more = parseArgs(rest, BENCH_SPEC).options;
  const opt = (k: string): string | number | boolean | undefined => more[k] ?? a.options[k];
  const num = (k: string): number | undefined => (typeof opt(k) === 'number' ? (opt(k) as number) : undefined);
  const backend = opt('backend');
  // The benchmarks run from the source tree (cli/bench.ts): none of bench/ or test/ is bundled here.
  await runBenchFromSource({
    target: checkBenchTarget(target ?? ''),
    json: opt('json') === true,
    large: opt('large') === true,
    ...(num('iterations') !== undefined ? { iterations: num('iterations') } : {}),
    ...(typeof backend === 'string' ? { backend: backend as BackendAsk } : {}),
    ...(num('rounds') !== undefined ? { rounds: num('rounds') } : {}),
    ...(num('warmup') !== undefined ? { warmup: num('warmup') } : {}),
    ...(opt('profile') === true ? { profile: true } : {}),
    ...(num('runs') !== undefined ? { runs: num('runs') } : {}),
    ...(opt('model') === 'tiny' || opt('model') === 'llama' ? { model: opt('model') as 'tiny' | 'llama' } : {}),
  });
}
