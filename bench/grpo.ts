// GRPO against its SFT starting point and against the same wall time of continued SFT
// from that start, measured side by side by `agent-lab eval` (greedy, grammar-constrained)
// on the seed's 50 held-out tasks and on the reserved fresh splits:
//
//   npm run build && npx tsx bench/grpo.ts --from runs/student [--run runs/grpo] [--steps N | --minutes M]
//       [--extra 'more train grpo options'] [--splits heldout,fresh-values] [--no-sft]
//
// 1. `agent-lab eval --run FROM --split S --json` for each split (the SFT student).
// 2. `agent-lab train grpo --from FROM --run RUN` (defaults, or --steps/--minutes/--extra);
//    its wall time W (rollouts, updates and its own held-out points).
// 3. `agent-lab train sft --from FROM --minutes W --run RUN-sft`: continued SFT for the same
//    minutes (the "same compute on more SFT" baseline; its budget counts optimiser time only,
//    so it gets slightly more compute than GRPO, which is said in the output). --no-sft skips it.
// 4. `agent-lab eval` of both on each split.
// Prints every accuracy (overall and per shape) and the memorised count, the run's
// frac_reward_zero_std and groups drawn/dropped per step, its flat-line warnings; the last
// line is JSON. Not run by CI: a default-length run takes minutes (docs/architecture.md, "What CI runs").
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseMetricsText } from '../core/protocol/metrics';

const repoRoot = path.resolve(__dirname, '..');
const bin = path.join(repoRoot, 'bin', 'agent-lab');

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function agentLab(args: string[]): string {
  console.error(`$ agent-lab ${args.join(' ')}`);
  const r = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`agent-lab ${args[0]} exited ${r.status}`);
  return r.stdout;
}

interface Summary {
  accuracy: number;
  n: number;
  by_kind: Record<string, { n: number; accuracy: number }>;
  failures: Record<string, number>;
}

function evaluate(run: string, split: string): Summary {
  const out = agentLab(['eval', '--run', run, '--split', split, '--json']);
  return JSON.parse(out.trim().split('\n').pop()!) as Summary;
}

const from = arg('from');
if (!from) {
  console.error('usage: npx tsx bench/grpo.ts --from SFT_RUN [--run DIR] [--steps N | --minutes M] [--extra "more train grpo options"] [--splits a,b] [--no-sft]');
  process.exit(2);
}
const run = arg('run') ?? path.join(path.dirname(path.resolve(from)), `grpo-bench-${Date.now()}`);
const budget = arg('steps') ? ['--steps', arg('steps')!] : arg('minutes') ? ['--minutes', arg('minutes')!] : [];
const extra = (arg('extra') ?? '').split(' ').filter((x) => x !== '');
const splits = (arg('splits') ?? 'heldout,fresh-values').split(',');
const withSft = !process.argv.includes('--no-sft');

const before: Record<string, Summary> = Object.fromEntries(splits.map((s) => [s, evaluate(from, s)]));
const t0 = Date.now();
agentLab(['train', 'grpo', '--from', from, ...budget, ...extra, '--run', run]);
const minutes = (Date.now() - t0) / 60000;
const grpo: Record<string, Summary> = Object.fromEntries(splits.map((s) => [s, evaluate(run, s)]));
let sftMore: Record<string, Summary> | null = null;
const sftRun = `${run}-sft`;
if (withSft) {
  agentLab(['train', 'sft', '--from', from, '--minutes', minutes.toFixed(2), '--eval-limit', '0', '--run', sftRun]);
  sftMore = Object.fromEntries(splits.map((s) => [s, evaluate(sftRun, s)]));
}

const lines = parseMetricsText(fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8')).lines;
const steps = lines.filter((l): l is Extract<typeof l, { phase: string }> => 'phase' in l && l.phase === 'grpo');
const zeroStd = steps.map((l) => Number(l['frac_reward_zero_std']));
const warnings = steps.filter((l) => typeof l['warning'] === 'string').map((l) => `step ${l.step}: ${String(l['warning'])}`);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

const pct = (x: number | undefined) => (x === undefined ? '-' : `${(100 * x).toFixed(1)}%`);
console.log(`GRPO from ${from} -> ${run} (${steps.length} steps, ${minutes.toFixed(1)} min wall)`);
if (withSft) console.log(`continued SFT from ${from} -> ${sftRun} (${minutes.toFixed(2)} min of optimiser time: GRPO's wall time, its evals included)`);
for (const s of splits) {
  const b = before[s]!;
  const g = grpo[s]!;
  const m = sftMore?.[s];
  console.log(`${s} (n ${b.n}): SFT ${pct(b.accuracy)}  GRPO ${pct(g.accuracy)}${m ? `  more SFT ${pct(m.accuracy)}` : ''}`);
  for (const k of Object.keys(b.by_kind)) {
    console.log(`  ${k.padEnd(8)} SFT ${pct(b.by_kind[k]!.accuracy)}  GRPO ${pct(g.by_kind[k]?.accuracy)}${m ? `  more SFT ${pct(m.by_kind[k]?.accuracy)}` : ''}  (n ${b.by_kind[k]!.n})`);
  }
  console.log(`  failures SFT ${JSON.stringify(b.failures)}\n           GRPO ${JSON.stringify(g.failures)}${m ? `\n           more SFT ${JSON.stringify(m.failures)}` : ''}`);
}
console.log(`frac_reward_zero_std per step: ${zeroStd.map((x) => x.toFixed(2)).join(' ')}`);
console.log(`  mean ${mean(zeroStd).toFixed(3)}; steps with every group flat: ${zeroStd.filter((x) => x === 1).length}/${zeroStd.length}`);
console.log(`groups drawn per step: ${steps.map((l) => String(l['groups_drawn'] ?? l['groups'])).join(' ')}`);
console.log(`rollout accuracy per step: ${steps.map((l) => Number(l['accuracy']).toFixed(2)).join(' ')}`);
for (const w of warnings) console.log(`warning ${w}`);
console.log(
  JSON.stringify({
    from,
    run,
    steps: steps.length,
    wall_minutes: minutes,
    sft: before,
    grpo,
    ...(sftMore ? { sft_more: sftMore, sft_more_run: sftRun } : {}),
    frac_reward_zero_std: zeroStd,
    groups_drawn: steps.map((l) => l['groups_drawn'] ?? l['groups']),
    rollout_accuracy: steps.map((l) => l['accuracy']),
    reward_mean: steps.map((l) => l['reward_mean']),
    kl: steps.map((l) => l['kl']),
    warnings,
  }),
);
