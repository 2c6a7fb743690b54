// RL against the baselines a skeptic would run, side by side, over seeds (issue 28):
//
//   npm run build && npx tsx bench/grpo.ts --from runs/s0[,runs/s1,runs/s2] [--seeds 0,1,2] [--out DIR]
//       [--steps N] [--pool P] [--extra 'more train grpo options'] [--splits heldout,fresh-entities]
//       [--arms grpo,rft,sft]
//
// For each SFT student (one per seed; its seed is also the RL run's --seed):
// 1. `agent-lab eval --run FROM --split S --json` for each split (the start).
// 2. grpo: `agent-lab train grpo --from FROM --pool P --steps N --seed s` (its evals off).
// 3. rft: the same with `--objective rft`: the same pool, draws and steps, trained on the
//    student's own verified rollouts (rejection-sampling fine-tuning: no teacher, no advantages).
// 4. sft: `agent-lab train sft --from FROM --minutes W`: continued SFT on the teacher's data
//    for W = GRPO's rollout and update minutes (its evaluations not counted).
// 5. `agent-lab eval` of each on each split.
// Compute is reported per arm both ways: minutes of rollouts and updates, and tokens (generated
// plus trained). The pool's names against the fresh-entities split's are printed (0 shared:
// the run refuses otherwise). Prints each split's accuracy per arm as mean ± sd over the seeds
// and the lift over the start; the last line is JSON. Not run by CI: minutes per arm and seed.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseMetricsText, type MetricRecord } from '../core/protocol/metrics';
import { CONFIG_FILE, METRICS_FILE } from '../core/protocol/folders';

const repoRoot = path.resolve(__dirname, '..');
const bin = path.join(repoRoot, 'bin', 'agent-lab');

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function agentLab(args: string[]): string {
  console.error(`$ agent-lab ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`agent-lab ${args[0]} ${args[1] ?? ''} exited ${r.status}`);
  return r.stdout;
}

interface Summary {
  accuracy: number;
  n: number;
  by_kind: Record<string, { n: number; accuracy: number }>;
  failures: Record<string, number>;
}

/** An evaluation, kept beside the run (a rerun of the bench reuses it). */
function evaluate(run: string, split: string): Summary {
  const file = path.join(run, `bench-eval-${split}.json`);
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as Summary;
  const out = agentLab(['eval', '--run', run, '--split', split, '--json']);
  const summary = JSON.parse(out.trim().split('\n').pop()!) as Summary;
  fs.writeFileSync(file, JSON.stringify(summary));
  return summary;
}

function records(run: string, phase: string): MetricRecord[] {
  const { lines } = parseMetricsText(fs.readFileSync(path.join(run, METRICS_FILE), 'utf8'));
  return lines.filter((l): l is MetricRecord => 'phase' in l && l.phase === phase);
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const mean = (xs: number[]) => (xs.length ? sum(xs) / xs.length : NaN);
const sd = (xs: number[]) => (xs.length > 1 ? Math.sqrt(sum(xs.map((x) => (x - mean(xs)) ** 2)) / (xs.length - 1)) : 0);
const pm = (xs: number[], digits = 3) => `${mean(xs).toFixed(digits)} ± ${sd(xs).toFixed(digits)}`;

/** Compute one arm spent: minutes of rollouts and updates, generated and trained tokens. */
interface Compute {
  steps: number;
  minutes: number;
  genTokens: number;
  trainedTokens: number;
}

function rlCompute(run: string): Compute & { zeroStd: number[]; kept: number[]; accuracy: number[] } {
  const steps = records(run, 'grpo');
  return {
    steps: steps.length,
    minutes: sum(steps.map((l) => num(l['rollout_s']) + num(l['update_s']))) / 60,
    genTokens: sum(steps.map((l) => num(l['gen_tokens']))),
    trainedTokens: sum(steps.map((l) => num(l['trained_tokens']))),
    zeroStd: steps.map((l) => num(l['frac_reward_zero_std'])),
    kept: steps.map((l) => num(l['groups_kept'])),
    accuracy: steps.map((l) => num(l['accuracy'])),
  };
}

function sftCompute(run: string): Compute {
  const steps = records(run, 'sft');
  return {
    steps: steps.length,
    // SFT's clock counts optimiser time only (its held-out losses and evaluations not).
    minutes: num(steps.at(-1)?.time) / 60,
    genTokens: 0,
    trainedTokens: sum(steps.map((l) => num(l['trained_tokens']))),
  };
}

const froms = (arg('from') ?? '').split(',').filter((x) => x !== '');
if (froms.length === 0) {
  console.error('usage: npx tsx bench/grpo.ts --from SFT_RUN[,SFT_RUN...] [--seeds 0,1,2] [--out DIR] [--steps N] [--pool P] [--extra "..."] [--splits a,b] [--arms grpo,rft,sft]');
  process.exit(2);
}
const seeds = (arg('seeds') ?? froms.map((_, i) => String(i)).join(',')).split(',').map(Number);
if (seeds.length !== froms.length) throw new Error(`--seeds names ${seeds.length} seeds for ${froms.length} students`);
const out = path.resolve(arg('out') ?? path.join(path.dirname(path.resolve(froms[0]!)), `rl-bench-${Date.now()}`));
const steps = arg('steps') ?? '60';
const pool = arg('pool');
const extra = (arg('extra') ?? '').split(' ').filter((x) => x !== '');
const splits = (arg('splits') ?? 'heldout,fresh-entities').split(',');
const arms = (arg('arms') ?? 'grpo,rft,sft').split(',');
fs.mkdirSync(out, { recursive: true });

type Arm = 'start' | 'grpo' | 'rft' | 'sft';
const acc: Record<Arm, Record<string, number[]>> = { start: {}, grpo: {}, rft: {}, sft: {} };
const compute: Record<string, Compute[]> = { grpo: [], rft: [], sft: [] };
const perSeed: Record<string, unknown>[] = [];
let names: unknown;
const record = (arm: Arm, split: string, s: Summary) => (acc[arm][split] ??= []).push(s.accuracy);

froms.forEach((from, i) => {
  const seed = seeds[i]!;
  const row: Record<string, unknown> = { from, seed };
  const start = Object.fromEntries(splits.map((s) => [s, evaluate(from, s)]));
  for (const s of splits) record('start', s, start[s]!);
  row['start'] = start;
  const rlArgs = ['--from', from, '--steps', steps, '--seed', String(seed), '--eval-limit', '0', ...(pool ? ['--pool', pool] : []), ...extra];
  let grpoMinutes: number | undefined;
  for (const arm of ['grpo', 'rft'] as const) {
    if (!arms.includes(arm)) continue;
    const run = path.join(out, `${arm}-s${seed}`);
    if (!fs.existsSync(path.join(run, 'bench-done'))) {
      agentLab(['train', 'grpo', ...rlArgs, ...(arm === 'rft' ? ['--objective', 'rft'] : []), '--run', run]);
      fs.writeFileSync(path.join(run, 'bench-done'), '');
    }
    const c = rlCompute(run);
    compute[arm]!.push(c);
    if (arm === 'grpo') grpoMinutes = c.minutes;
    names ??= (JSON.parse(fs.readFileSync(path.join(run, CONFIG_FILE), 'utf8')) as { data: { names?: unknown } }).data.names;
    const evals = Object.fromEntries(splits.map((s) => [s, evaluate(run, s)]));
    for (const s of splits) record(arm, s, evals[s]!);
    row[arm] = { evals, compute: c };
  }
  if (arms.includes('sft')) {
    const run = path.join(out, `sft-s${seed}`);
    if (!fs.existsSync(path.join(run, 'bench-done'))) {
      if (grpoMinutes === undefined) throw new Error('the sft arm takes its minutes from the grpo arm: run --arms with grpo');
      agentLab(['train', 'sft', '--from', from, '--minutes', grpoMinutes.toFixed(3), '--seed', String(seed), '--eval-limit', '0', '--run', run]);
      fs.writeFileSync(path.join(run, 'bench-done'), '');
    }
    const c = sftCompute(run);
    compute['sft']!.push(c);
    const evals = Object.fromEntries(splits.map((s) => [s, evaluate(run, s)]));
    for (const s of splits) record('sft', s, evals[s]!);
    row['sft'] = { evals, compute: c };
  }
  perSeed.push(row);
});

console.log(`RL against its baselines: ${froms.length} student(s) (seeds ${seeds.join(', ')}), ${steps} steps${pool ? `, pool ${pool}` : ''}${extra.length ? `, ${extra.join(' ')}` : ''} -> ${out}`);
console.log(`pool names vs the fresh-entities split's: ${JSON.stringify(names)}`);
for (const arm of Object.keys(compute).filter((a) => arms.includes(a))) {
  const c = compute[arm]!;
  console.log(
    `  ${arm.padEnd(4)} compute: ${pm(c.map((x) => x.minutes), 2)} min (rollouts and updates; SFT: optimiser), ` +
      `${Math.round(mean(c.map((x) => x.genTokens)))} generated + ${Math.round(mean(c.map((x) => x.trainedTokens)))} trained tokens, ${Math.round(mean(c.map((x) => x.steps)))} steps`,
  );
}
for (const s of splits) {
  const base = acc.start[s]!;
  console.log(`${s}: start ${pm(base)}`);
  for (const arm of ['grpo', 'rft', 'sft'] as const) {
    const xs = acc[arm][s];
    if (!xs) continue;
    const lifts = xs.map((x, i) => x - base[i]!);
    console.log(`  ${arm.padEnd(4)} ${pm(xs)}  lift ${pm(lifts)}  (per seed ${lifts.map((l) => (l >= 0 ? '+' : '') + l.toFixed(3)).join(' ')})`);
  }
}
for (const arm of ['grpo', 'rft'] as const) {
  const c = compute[arm];
  if (!c?.length) continue;
  const zs = (c as ReturnType<typeof rlCompute>[]).map((x) => mean(x.zeroStd));
  console.log(`${arm} frac_reward_zero_std mean over steps: ${zs.map((z) => z.toFixed(3)).join(' ')}; rollout accuracy mean: ${(c as ReturnType<typeof rlCompute>[]).map((x) => mean(x.accuracy).toFixed(3)).join(' ')}`);
}
console.log(JSON.stringify({ out, steps: Number(steps), pool: pool ?? null, extra, seeds, names, accuracy: acc, compute, per_seed: perSeed }));
