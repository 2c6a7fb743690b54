// `agent-lab demo`: the main job on the embedded default world. Builds the world,
// distills it with the stub teacher, trains the tokenizer, formats the SFT data, writes
// a run folder and prints what it achieved.
import * as path from 'node:path';
import { DistillStats, ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { findOverlaps } from '../core/overlap';
import { DEFAULT_MAX_LEN, buildDataset, encodeWithMask } from '../core/sftFormat';
import { canonicalTokenizerJson, tokenizerConfig, tokenizerHash, trainBpe } from '../core/tokenizer';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../core/world';
import { writeFileAtomic, writeJsonAtomic, writeJsonlAtomic } from '../trainer/files';

export interface DemoOptions {
  runDir?: string | undefined;
  log?: (line: string) => void;
}

export interface DemoReport {
  runDir: string;
  passages: number;
  tasks: Record<'train' | 'heldout', Record<string, number>>;
  teacherYield: Record<'train' | 'heldout', Record<string, { kept: number; tasks: number }>>;
  overlap: { exact: number; swapped: number };
  tokenizer: { vocabSize: number; sha256: string; trainSeconds: number };
  tokensPerTranscript: { mean: number; min: number; max: number };
  supervisedShare: number;
  sft: { examples: number; dropped: number; dropRate: number; maxLen: number };
  seconds: number;
}

const SEED = 0;
const SAMPLES_PER_TASK = 4;

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

  log(`[1/4] building the world (seed ${SEED})`);
  const corpus = buildCorpus(SEED);
  const pool = makeTaskPool(SEED);
  writeJsonlAtomic(path.join(runDir, 'world', 'corpus.jsonl'), corpus.map(passageToRow));
  writeJsonlAtomic(path.join(runDir, 'world', 'train.jsonl'), pool.train.map(taskToRow));
  writeJsonlAtomic(path.join(runDir, 'world', 'heldout.jsonl'), pool.heldout.map(taskToRow));

  log('[2/4] distilling with the stub teacher');
  const env = new ToolEnv(corpus);
  const splits = { train: pool.train, heldout: pool.heldout } as const;
  const rows = { train: [] as ReturnType<typeof distill>, heldout: [] as ReturnType<typeof distill> };
  const teacherYield: DemoReport['teacherYield'] = { train: {}, heldout: {} };
  for (const split of ['train', 'heldout'] as const) {
    const stats: DistillStats = { perKind: {} };
    rows[split] = distill(splits[split], makeStubTeacher(splits[split]), env, SAMPLES_PER_TASK, stats);
    for (const [kind, s] of Object.entries(stats.perKind)) teacherYield[split][kind] = { kept: s.kept, tasks: s.tasks };
    writeJsonlAtomic(path.join(runDir, 'data', `${split}.traces.jsonl`), rows[split]);
  }

  log('[3/4] training the tokenizer on the world');
  const tokStart = Date.now();
  const texts = [...corpus.map((p) => p.text), ...rows.train.map((r) => r.text), ...rows.heldout.map((r) => r.text)];
  const tokenizer = trainBpe(texts);
  const trainSeconds = (Date.now() - tokStart) / 1000;
  const sha256 = tokenizerHash(tokenizer);
  writeFileAtomic(path.join(runDir, 'tokenizer.json'), canonicalTokenizerJson(tokenizer));
  writeJsonAtomic(path.join(runDir, 'tokenizer_config.json'), tokenizerConfig());

  log('[4/4] formatting the SFT data');
  const allTexts = [...rows.train, ...rows.heldout].map((r) => r.text);
  const dataset = buildDataset(
    rows.train.map((r) => r.text),
    tokenizer,
    DEFAULT_MAX_LEN,
  );
  let supervised = 0;
  let total = 0;
  const lengths: number[] = [];
  for (const t of allTexts) {
    const enc = encodeWithMask(t, tokenizer);
    lengths.push(enc.ids.length);
    total += enc.ids.length;
    supervised += enc.supervised.filter(Boolean).length;
  }
  const overlaps = findOverlaps(pool.train, pool.heldout);

  const report: DemoReport = {
    runDir,
    passages: corpus.length,
    tasks: { train: countBy(pool.train, (t) => t.kind), heldout: countBy(pool.heldout, (t) => t.kind) },
    teacherYield,
    overlap: { exact: overlaps.exact.length, swapped: overlaps.swapped.length },
    tokenizer: { vocabSize: tokenizer.vocabSize, sha256, trainSeconds },
    tokensPerTranscript: {
      mean: total / Math.max(1, lengths.length),
      min: Math.min(...lengths),
      max: Math.max(...lengths),
    },
    supervisedShare: supervised / Math.max(1, total),
    sft: { examples: dataset.examples.length, dropped: dataset.dropped, dropRate: dataset.dropRate, maxLen: dataset.maxLen },
    seconds: (Date.now() - started) / 1000,
  };
  writeJsonAtomic(path.join(runDir, 'config.json'), {
    kind: 'demo',
    seeds: { world: SEED, tasks: SEED },
    distractors: 120,
    samplesPerTask: SAMPLES_PER_TASK,
    teacher: 'stub',
    taskCounts: report.tasks,
    tokenizer: { sha256, vocabSize: tokenizer.vocabSize },
    sftMaxLen: DEFAULT_MAX_LEN,
    codeVersion: codeVersion(),
  });
  writeJsonAtomic(path.join(runDir, 'report.json'), report);
  for (const line of formatReport(report)) log(line);
  return report;
}

declare const __AGENT_LAB_VERSION__: string | undefined;
function codeVersion(): string {
  return typeof __AGENT_LAB_VERSION__ === 'string' ? __AGENT_LAB_VERSION__ : 'dev';
}

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;

export function formatReport(r: DemoReport): string[] {
  const kinds = ['lookup', 'double', 'sum', 'compare'];
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
    `  tasks (train)          ${per(r.tasks.train)}`,
    `  tasks (held-out)       ${per(r.tasks.heldout)}`,
    `  teacher yield (train)  ${yieldLine('train')}`,
    `  teacher yield (h-out)  ${yieldLine('heldout')}`,
    `  held-out overlap       ${r.overlap.exact} exact + ${r.overlap.swapped} operand-swapped with train`,
    `  tokenizer              ${r.tokenizer.vocabSize} tokens (byte-level BPE, trained in ${r.tokenizer.trainSeconds.toFixed(1)} s)`,
    `  tokens per transcript  mean ${r.tokensPerTranscript.mean.toFixed(1)}, min ${r.tokensPerTranscript.min}, max ${r.tokensPerTranscript.max}`,
    `  supervised share       ${pct(r.supervisedShare)} of tokens`,
    `  SFT examples (train)   ${r.sft.examples} kept, ${r.sft.dropped} dropped over ${r.sft.maxLen} tokens (drop rate ${pct(r.sft.dropRate)})`,
    `  took                   ${r.seconds.toFixed(1)} s`,
    '',
    'Training the student (agent-lab train sft) is not in this build yet; the run folder holds',
    'the world, the distilled data and the tokenizer it will train on.',
  ];
}
