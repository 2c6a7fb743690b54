// GRPO against its SFT starting point, measured side by side by `agent-lab eval` on the
// same 50 held-out tasks (greedy, grammar-constrained):
//
//   npm run build && npx tsx bench/grpo.ts --from runs/student [--run runs/grpo] [--steps N] [--minutes M] [--extra 'ARGS']
//
// 1. `agent-lab eval --run FROM --split heldout --json` (the SFT student).
// 2. `agent-lab train grpo --from FROM --run RUN` with the defaults (or --steps/--minutes):
//    pre-flight, rollouts, metrics.jsonl.
// 3. `agent-lab eval --run RUN --split heldout --json` (the GRPO student).
// Prints both accuracies (overall and per shape), the run's frac_reward_zero_std curve and
// reward/accuracy per step, and its flat-line warnings. The last line is JSON. Not run by
// CI: a default-length run takes minutes (DESIGN.md, "What CI runs").
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

function evalHeldout(run: string): { accuracy: number; n: number; by_kind: Record<string, { n: number; accuracy: number }>; failures: Record<string, number> } {
  const out = agentLab(['eval', '--run', run, '--split', 'heldout', '--json']);
  return JSON.parse(out.trim().split('\n').pop()!);
}

const from = arg('from');
if (!from) {
  console.error('usage: npx tsx bench/grpo.ts --from SFT_RUN [--run DIR] [--steps N | --minutes M] [--extra "more train grpo options"]');
  process.exit(2);
}
const run = arg('run') ?? path.join(path.dirname(path.resolve(from)), `grpo-bench-${Date.now()}`);
const budget = arg('steps') ? ['--steps', arg('steps')!] : arg('minutes') ? ['--minutes', arg('minutes')!] : [];
const extra = (arg('extra') ?? '').split(' ').filter((x) => x !== '');

const sft = evalHeldout(from);
const t0 = Date.now();
agentLab(['train', 'grpo', '--from', from, ...budget, ...extra, '--run', run]);
const minutes = (Date.now() - t0) / 60000;
const grpo = evalHeldout(run);

const lines = parseMetricsText(fs.readFileSync(path.join(run, 'metrics.jsonl'), 'utf8')).lines;
const steps = lines.filter((l): l is Extract<typeof l, { phase: string }> => 'phase' in l && l.phase === 'grpo');
const zeroStd = steps.map((l) => Number(l['frac_reward_zero_std']));
const warnings = steps.filter((l) => typeof l['warning'] === 'string').map((l) => `step ${l.step}: ${String(l['warning'])}`);
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
console.log(`GRPO from ${from} -> ${run} (${steps.length} steps, ${minutes.toFixed(1)} min wall)`);
console.log(`held-out exact match, agent-lab eval, same ${sft.n} tasks: SFT ${pct(sft.accuracy)}  GRPO ${pct(grpo.accuracy)}`);
for (const k of Object.keys(sft.by_kind)) {
  console.log(`  ${k.padEnd(8)} SFT ${pct(sft.by_kind[k]!.accuracy)}  GRPO ${pct(grpo.by_kind[k]?.accuracy ?? 0)}  (n ${sft.by_kind[k]!.n})`);
}
console.log(`failures SFT ${JSON.stringify(sft.failures)}  GRPO ${JSON.stringify(grpo.failures)}`);
console.log(`frac_reward_zero_std per step: ${zeroStd.map((x) => x.toFixed(2)).join(' ')}`);
console.log(`  mean ${mean(zeroStd).toFixed(3)}; steps with every group flat: ${zeroStd.filter((x) => x === 1).length}/${zeroStd.length}`);
console.log(`rollout accuracy per step: ${steps.map((l) => Number(l['accuracy']).toFixed(2)).join(' ')}`);
for (const w of warnings) console.log(`warning ${w}`);
console.log(
  JSON.stringify({
    from,
    run,
    steps: steps.length,
    wall_minutes: minutes,
    sft: { accuracy: sft.accuracy, by_kind: sft.by_kind, failures: sft.failures },
    grpo: { accuracy: grpo.accuracy, by_kind: grpo.by_kind, failures: grpo.failures },
    frac_reward_zero_std: zeroStd,
    rollout_accuracy: steps.map((l) => l['accuracy']),
    reward_mean: steps.map((l) => l['reward_mean']),
    kl: steps.map((l) => l['kl']),
    warnings,
  }),
);
