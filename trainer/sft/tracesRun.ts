// Prepares a new SFT run folder from trajectories the user distilled (e.g.
// runs/world-…/train.traces.jsonl, from any teacher), so that "Agent Lab: Train (SFT)" trains
// on exactly them: `agent-lab train sft --run DIR` trains on DIR/data/train.traces.jsonl
// when it and DIR/tokenizer.json exist (trainer/sft/prepare.ts dataFiles), and only builds the
// default world when they do not. The run folder gets what trainer/sft/prepare.ts would write:
// world/, data/train.traces.jsonl, data/train.tasks.jsonl, data/heldout.traces.jsonl,
// tokenizer.json, tokenizer_config.json, plus data/source.json naming the file the rows
// came from. The user's file is only read; the run folder must be new (never written over).
// Rows whose task overlaps the held-out split the trainer evaluates on (same kind, same
// facts) are left out and counted, as the trainer's own preparation does. The worker runs it
// for an SFT job given `traces` alone (trainer/run/jobs.ts): the editor prepares nothing itself.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TraceRow, ToolEnv, distill, makeStubTeacher } from '../../core/distill';
import { overlapKey } from '../../core/overlap';
import { canonicalTokenizerJson, tokenizerConfig, trainBpe } from '../../core/tokenizer';
import { TASK_KINDS, type Passage, type Task, type TaskKind } from '../../core/types';
import { buildCorpus, makeTaskPool, passageToRow, taskToRow } from '../../core/world';
import { rowToPassage, rowToTask } from '../../core/worldRows';
import { writeFileAtomic, writeJsonAtomic, writeJsonlAtomic } from '../../store/files';
import { prepareWorldRunData } from './prepare';
import { DEFAULT_WORLD_RECIPE, RECIPES } from './recipes';
import { readWorldFolder } from '../../store/worldFolder';
import type { PreparedTraces } from '../../core/protocol/worker';
import { CORPUS_FILE, DATA_DIR, HELDOUT_FILE, HELDOUT_TRACES_FILE, RUN_WORLD_DIR, SOURCE_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TRAIN_FILE, TRAIN_TASKS_FILE, TRAIN_TRACES_FILE, WORLD_MANIFEST } from '../../core/protocol/folders';

/** Samples per held-out task when the held-out reference transcripts are distilled here. */
const HELDOUT_SAMPLES = 4;
const KINDS: readonly string[] = TASK_KINDS;

/** How the run folder was made (core/protocol/worker.ts: the SFT job's summary carries it). */
export type PreparedSftData = PreparedTraces;

/** Parses a traces file; a bad line is an error naming the file, the line and the field. */
export function readTraceRows(file: string): TraceRow[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
  const rows: TraceRow[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${file}:${i + 1}`;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (err) {
      throw new Error(`${where}: not JSON (${(err as Error).message})`);
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${where}: expected an object {"task", "text", "kind"}`);
    const r = v as Record<string, unknown>;
    if (typeof r['text'] !== 'string') throw new Error(`${where}: field "text" must be a string (the transcript)`);
    if (typeof r['task'] !== 'string') throw new Error(`${where}: field "task" must be a string (the question)`);
    if (!KINDS.includes(r['kind'] as string)) throw new Error(`${where}: field "kind" must be one of ${KINDS.join(', ')}`);
    rows.push({ task: r['task'], text: r['text'], kind: r['kind'] as TaskKind });
  });
  return rows;
}

function readRows<T>(file: string, parse: (row: unknown, where: string) => T): T[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .map((line, i) => ({ line, i }))
    .filter(({ line }) => line.trim() !== '')
    .map(({ line, i }) => {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch (err) {
        throw new Error(`${file}:${i + 1}: not JSON (${(err as Error).message})`);
      }
      return parse(v, `${file}:${i + 1}`);
    });
}

interface World {
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
  source: 'folder' | 'default';
}

/** The world beside a traces file (a world folder), else the default world. */
export function worldOf(tracesFile: string): World {
  const dir = path.dirname(tracesFile);
  const corpusFile = path.join(dir, CORPUS_FILE);
  if (fs.existsSync(corpusFile)) {
    const tasks = (split: string) => {
      const f = path.join(dir, `${split}.jsonl`);
      return fs.existsSync(f) ? readRows(f, rowToTask) : [];
    };
    return { corpus: readRows(corpusFile, rowToPassage), train: tasks('train'), heldout: tasks('heldout'), source: 'folder' };
  }
  const pool = makeTaskPool(0);
  return { corpus: buildCorpus(0), train: pool.train, heldout: pool.heldout, source: 'default' };
}

function prepareUserWorldRun(runDir: string, tracesFile: string, worldDir: string, rows: number): PreparedSftData {
  let prepared;
  try {
    // A user's world's default recipe's reading augmentation (worlds derived from a fact table), as `train sft --world` draws it.
    prepared = prepareWorldRunData(runDir, { world: readWorldFolder(worldDir), traces: path.resolve(tracesFile) }, () => {}, RECIPES[DEFAULT_WORLD_RECIPE]!);
  } catch (err) {
    throw new Error((err as Error).message);
  }
  writeJsonAtomic(path.join(runDir, DATA_DIR, SOURCE_FILE), {
    traces: path.resolve(tracesFile),
    rows,
    kept: prepared.train.rows.length,
    ...(prepared.augment ? { augmentation: { worlds: prepared.augment.worlds.length, transcripts: prepared.augment.rows } } : {}),
    excluded_overlapping_heldout: rows - prepared.train.rows.length,
    world: worldDir,
    heldout_traces: "stub teacher on the world's held-out split (tasks with hints)",
    created: new Date().toISOString(),
  });
  return {
    runDir,
    tracesFile,
    trainRows: prepared.train.rows.length,
    excluded: rows - prepared.train.rows.length,
    unknownTasks: 0,
    heldoutRows: prepared.heldout.rows.length,
    world: 'folder',
    heldoutSource: 'stub teacher',
    vocabSize: prepared.tokenizer.vocabSize,
  };
}

export function prepareSftRunData(runDir: string, tracesFile: string): PreparedSftData {
  if (fs.existsSync(runDir) && fs.readdirSync(runDir).length > 0) {
    throw new Error(`${runDir} already exists and is not empty; a new run needs a new folder`);
  }
  const rows = readTraceRows(tracesFile);
  if (rows.length === 0) throw new Error(`${tracesFile} holds no trajectories`);
  // A user's world (docs/worlds.md: its folder has a world.json): the run is that world's,
  // evaluated on its own held-out split, as `agent-lab train sft --world DIR --traces FILE`.
  const worldDir = path.dirname(path.resolve(tracesFile));
  if (fs.existsSync(path.join(worldDir, WORLD_MANIFEST))) return prepareUserWorldRun(runDir, tracesFile, worldDir, rows.length);
  const world = worldOf(tracesFile);
  // The trainer evaluates on the default held-out split (trainer/run/jobs.ts, sft.ts); a world
  // folder's own held-out split is excluded too, so neither can leak into training.
  const evalHeldout = makeTaskPool(0).heldout;
  const heldKeys = new Set([...evalHeldout, ...world.heldout].map(overlapKey));
  const byQuestion = new Map<string, Task>();
  for (const t of [...world.train, ...world.heldout, ...makeTaskPool(0).train, ...evalHeldout]) {
    if (!byQuestion.has(t.question)) byQuestion.set(t.question, t);
  }
  const kept: TraceRow[] = [];
  const trainTasks = new Map<string, Task>();
  let excluded = 0;
  let unknownTasks = 0;
  for (const r of rows) {
    const task = byQuestion.get(r.task);
    if (task && heldKeys.has(overlapKey(task))) {
      excluded++;
      continue;
    }
    if (!task) unknownTasks++;
    else if (!trainTasks.has(task.question)) trainTasks.set(task.question, task);
    kept.push(r);
  }
  if (kept.length === 0) {
    throw new Error(`every one of the ${rows.length} trajectories in ${tracesFile} overlaps the held-out split; training on them would contaminate evaluation`);
  }

  const heldoutFile = path.join(path.dirname(tracesFile), HELDOUT_TRACES_FILE);
  const useFolderHeldout = world.source === 'folder' && fs.existsSync(heldoutFile) && path.resolve(heldoutFile) !== path.resolve(tracesFile);
  const heldoutRows = useFolderHeldout
    ? readTraceRows(heldoutFile)
    : distill(evalHeldout, makeStubTeacher(evalHeldout), new ToolEnv(world.corpus), HELDOUT_SAMPLES);

  const tokenizer = trainBpe([...world.corpus.map((p) => p.text), ...kept.map((r) => r.text), ...heldoutRows.map((r) => r.text)]);
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, CORPUS_FILE), world.corpus.map(passageToRow));
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, TRAIN_FILE), world.train.map(taskToRow));
  writeJsonlAtomic(path.join(runDir, RUN_WORLD_DIR, HELDOUT_FILE), evalHeldout.map(taskToRow));
  writeJsonlAtomic(path.join(runDir, DATA_DIR, TRAIN_TRACES_FILE), kept);
  writeJsonlAtomic(path.join(runDir, DATA_DIR, HELDOUT_TRACES_FILE), heldoutRows);
  writeJsonlAtomic(path.join(runDir, DATA_DIR, TRAIN_TASKS_FILE), [...trainTasks.values()].map(taskToRow));
  writeJsonAtomic(path.join(runDir, DATA_DIR, SOURCE_FILE), {
    traces: path.resolve(tracesFile),
    rows: rows.length,
    kept: kept.length,
    excluded_overlapping_heldout: excluded,
    unknown_tasks: unknownTasks,
    world: world.source === 'folder' ? path.dirname(path.resolve(tracesFile)) : 'default (seed 0)',
    heldout_traces: useFolderHeldout ? path.resolve(heldoutFile) : 'stub teacher on the default held-out split',
    created: new Date().toISOString(),
  });
  writeJsonAtomic(path.join(runDir, TOKENIZER_CONFIG_FILE), tokenizerConfig());
  // Last: the trainer takes the data as given only when tokenizer.json is there too.
  writeFileAtomic(path.join(runDir, TOKENIZER_FILE), canonicalTokenizerJson(tokenizer));
  return {
    runDir,
    tracesFile,
    trainRows: kept.length,
    excluded,
    unknownTasks,
    heldoutRows: heldoutRows.length,
    world: world.source,
    heldoutSource: useFolderHeldout ? 'folder' : 'stub teacher',
    vocabSize: tokenizer.vocabSize,
  };
}

/** A base model's run uses the model's own tokenizer (the trainer writes it): the one prepared here goes, data/ stays. */
export function dropPreparedTokenizer(runDir: string): void {
  for (const f of [TOKENIZER_FILE, TOKENIZER_CONFIG_FILE]) fs.rmSync(path.join(runDir, f), { force: true });
}

/** The log line of a prepared run folder. */
export function preparedLine(p: PreparedTraces): string {
  return (
    `prepared ${p.runDir}: ${p.trainRows} trajectories from ${p.tracesFile}` +
    (p.excluded ? `, ${p.excluded} left out (their task overlaps the held-out split)` : '') +
    `, held-out references from the ${p.heldoutSource}, tokenizer of ${p.vocabSize} tokens`
  );
}
