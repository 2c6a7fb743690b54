// `agent-lab demo`: the main job on the embedded default world. Builds the world,
// distills it with the stub teacher, trains the tokenizer, formats the SFT data, writes
// a run folder and prints what it achieved.
import * as path from 'node:path';
import { DEFAULT_MAX_LEN, buildDataset, encodeWithMask } from '../core/sftFormat';
import { tokenizerHash } from '../core/tokenizer';
import { writeJsonAtomic } from '../store/files';
import { SAMPLES_PER_TASK, WORLD_SEED, prepareRunData, prepareWorldRunData } from '../trainer/sft/prepare';
import { readWorldFolder } from '../store/worldFolder';
import { runSft } from '../trainer/sft/sft';
import { PRESETS } from '../trainer/model/model';
import { DEFAULT_RECIPE, demoRecipeName, getRecipe } from '../trainer/sft/recipes';
import type { PoolName } from '../core/trainingPool';
import { trainJobHooks } from './train';
import { CONFIG_FILE, REPORT_FILE } from '../core/protocol/folders';
import { TASK_SHAPES } from '../core/types';

export interface DemoOptions {
  runDir?: string | undefined;
  /** Training budget in minutes after the data is ready; 0 = data only. */
  minutes?: number;
  /** The training pool (default: the default recipe's). */
  pool?: PoolName;
  log?: (line: string) => void;
  /** A user's world folder (docs/worlds.md) instead of the textbook world. */
  world?: string | undefined;
}

/** The demo's training budget (optimiser minutes): "a few minutes" (docs/architecture.md). */
export const DEMO_MINUTES = 5;

export interface DemoReport {
  runDir: string;
  passages: number;
  /** Tasks per shape: the training pool (overlaps excluded) and the held-out split. */
  tasks: Record<'train' | 'heldout', Record<string, number>>;
  /** Seed-split training tasks left out because they overlap a held-out task. */
  excludedOverlapping: number;
  teacherYield: Record<'train' | 'heldout', Record<string, { kept: number; tasks: number }>>;
  overlap: { exact: number; swapped: number };
  tokenizer: { vocabSize: number; sha256: string; trainSeconds: number };
  tokensPerTranscript: { mean: number; min: number; max: number };
  supervisedShare: number;
  sft: { examples: number; dropped: number; dropRate: number; maxLen: number };
  /** The recipe's counterfactual-value training worlds, when it has them (their rows are in data/train.traces.jsonl too). */
  augmentation?: { worlds: number; rows: number; share: number };
  seconds: number;
}


function timestamp(d = new Date()): string {
  return d.toISOString().replace(/[:]/g, '-').replace(/\..*$/, '');
}

function countBy<T>(xs: readonly T[], key: (x: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[key(x)] = (out[key(x)] ?? 0) + 1;
  return out;
}

export function runDemo(options: DemoOptions = {}): DemoReport {
  const log = options.log ?? ((line: string) => console.log(line));
  const started = Date.now();
  const runDir = options.runDir ?? path.join('runs', timestamp());

  let stage = 0;
  const recipe = getRecipe(demoRecipeName(options.world !== undefined));
  const stageLog = (line: string) => log(`[${++stage}/5] ${line}`);
  const data =
    options.world !== undefined
      ? prepareWorldRunData(runDir, { world: readWorldFolder(options.world) }, stageLog, recipe)
      : prepareRunData(runDir, options.pool ?? recipe.pool, stageLog, recipe);
  const tokenizer = data.tokenizer;

  log(`[5/5] formatting the SFT data`);
  const dataset = buildDataset(
    data.train.rows.map((r) => r.text),
    tokenizer,
    DEFAULT_MAX_LEN,
  );
  let supervised = 0;
  let total = 0;
  const lengths: number[] = [];
  for (const r of [...data.train.rows, ...data.heldout.rows]) {
    const enc = encodeWithMask(r.text, tokenizer);
    lengths.push(enc.ids.length);
    total += enc.ids.length;
    supervised += enc.supervised.filter(Boolean).length;
  }
  const sha256 = tokenizerHash(tokenizer);

  const report: DemoReport = {
    runDir,
    passages: data.corpusSize,
    tasks: { train: countBy(data.train.tasks, (t) => t.kind), heldout: countBy(data.heldout.tasks, (t) => t.kind) },
    excludedOverlapping: data.train.excluded,
    teacherYield: { train: data.train.yield, heldout: data.heldout.yield },
    overlap: data.overlap,
    tokenizer: { vocabSize: tokenizer.vocabSize, sha256, trainSeconds: data.tokenizerSeconds },
    tokensPerTranscript: {
      mean: total / Math.max(1, lengths.length),
      min: Math.min(...lengths),
      max: Math.max(...lengths),
    },
    supervisedShare: supervised / Math.max(1, total),
    sft: { examples: dataset.examples.length, dropped: dataset.dropped, dropRate: dataset.dropRate, maxLen: dataset.maxLen },
    ...(data.augment && recipe.augment ? { augmentation: { worlds: data.augment.worlds.length, rows: data.augment.rows, share: recipe.augment.share } } : {}),
    seconds: (Date.now() - started) / 1000,
  };
  if ((options.minutes ?? DEMO_MINUTES) > 0) {
    writeJsonAtomic(path.join(runDir, REPORT_FILE), report);
    for (const line of formatReport(report)) log(line);
    return report;
  }
  writeJsonAtomic(path.join(runDir, CONFIG_FILE), {
    kind: 'demo',
    seeds: { world: WORLD_SEED, tasks: WORLD_SEED },
    distractors: 120,
    samplesPerTask: SAMPLES_PER_TASK,
    teacher: 'stub',
    pool: options.pool ?? recipe.pool,
    taskCounts: report.tasks,
    tokenizer: { sha256, vocabSize: tokenizer.vocabSize },
    sftMaxLen: DEFAULT_MAX_LEN,
    codeVersion: codeVersion(),
  });
  writeJsonAtomic(path.join(runDir, REPORT_FILE), report);
  for (const line of formatReport(report)) log(line);
  return report;
}

declare const __AGENT_LAB_VERSION__: string | undefined;
function codeVersion(): string {
  return typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

export function formatReport(r: DemoReport): string[] {
  const kinds = TASK_SHAPES;
  const per = (rec: Record<string, number>): string => kinds.map((k) => `${k} ${rec[k] ?? 0}`).join(', ');
  const yieldLine = (split: 'train' | 'heldout'): string =>
    kinds
      .map((k) => {
        const y = r.teacherYield[split][k] ?? { kept: 0, tasks: 0 };
        return `${k} ${y.kept}/${y.tasks}`;
      })
      .join(', ');
  return [
    '',
    `Agent Lab demo — run folder ${r.runDir}`,
    `  passages               ${r.passages}`,
    `  tasks (train)          ${per(r.tasks.train)} (${r.excludedOverlapping} overlapping held-out excluded)`,
    `  tasks (held-out)       ${per(r.tasks.heldout)}`,
    `  teacher yield (train)  ${yieldLine('train')}`,
    `  teacher yield (h-out)  ${yieldLine('heldout')}`,
    `  seed split overlap     ${r.overlap.exact} exact + ${r.overlap.swapped} operand-swapped held-out tasks (never trained on)`,
    `  tokenizer              ${r.tokenizer.vocabSize} tokens (byte-level BPE, trained in ${r.tokenizer.trainSeconds.toFixed(1)} s)`,
    `  tokens per transcript  mean ${r.tokensPerTranscript.mean.toFixed(1)}, min ${r.tokensPerTranscript.min}, max ${r.tokensPerTranscript.max}`,
    `  supervised share       ${pct(r.supervisedShare)} of tokens`,
    `  SFT examples (train)   ${r.sft.examples} kept, ${r.sft.dropped} dropped over ${r.sft.maxLen} tokens (drop rate ${pct(r.sft.dropRate)})`,
    ...(r.augmentation
      ? [`  augmentation           ${r.augmentation.rows} transcripts from ${r.augmentation.worlds} counterfactual-value worlds (${pct(r.augmentation.share)} of the training draws)`]
      : []),
    `  took                   ${r.seconds.toFixed(1)} s`,
  ];
}

/** The demo with its training: data, a short SFT run of the default student, its held-out accuracy. */
export async function runDemoWithTraining(options: DemoOptions = {}): Promise<void> {
  const log = options.log ?? ((line: string) => console.log(line));
  const minutes = options.minutes ?? DEMO_MINUTES;
  const report = runDemo({ ...options, log });
  const recipe = getRecipe(demoRecipeName(options.world !== undefined));
  if (minutes <= 0) {
    log('');
    log(`Train the student on this data: agent-lab train sft --run ${report.runDir}`);
    return;
  }
  log('');
  log(`Training the demo student (tiny preset, ${recipe.name} recipe) for ${minutes} minute(s); progress on stderr.`);
  const hooks = trainJobHooks();
  const result = await runSft({ runDir: report.runDir, minutes, evalPoints: [1], recipe: recipe.name, ...(options.world !== undefined ? { world: options.world } : {}) }, hooks);
  const s = result.summary;
  const pctOf = (x: number | undefined) => (x === undefined ? 'n/a' : `${(100 * x).toFixed(1)}%`);
  log('');
  log(`Student after ${minutes} minute(s) (${s.steps} optimiser steps on ${s.backend}):`);
  if (options.world === undefined) log(`  held-out exact match   ${pctOf(s.heldout_accuracy)} of 50 (chance is about 18%: a coin flip on the 18 compare tasks)`);
  else log(`  held-out exact match   ${pctOf(s.heldout_accuracy)} of ${Object.values(report.tasks.heldout).reduce((a, b) => a + b, 0)}`);
  if (s.by_kind) log(`  per shape              ${Object.entries(s.by_kind).map(([k, v]) => `${k} ${pctOf(v.accuracy)} of ${v.n}`).join(', ')}`);
  if (s.span_accuracy) log(`  teacher-forced spans   ${Object.entries(s.span_accuracy).map(([k, v]) => `${k} ${pctOf(v)}`).join(', ')}`);
  log('');
  const tiny = PRESETS.tiny;
  // Said from the preset itself, so these lines never drift from the defaults.
  const full = tiny.steps !== undefined ? `${tiny.steps} optimiser steps` : `${tiny.minutes} minutes of optimiser time, evaluations not counted`;
  const fullRecipe = options.world === undefined ? DEFAULT_RECIPE : recipe.name;
  log(`The full recipe (the tiny preset's default budget: ${full}; ${fullRecipe} recipe, which also copies names it never saw):`);
  log('  agent-lab train sft --run runs/student');
  log('  agent-lab eval --run runs/student --split heldout          # then --split fresh-values: does it read or remember?');
  log('  agent-lab train grpo --from runs/student --run runs/grpo');
}
