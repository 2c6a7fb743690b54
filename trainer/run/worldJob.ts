// The world job (`agent-lab world`, the editor's Build World; core/protocol/worker.ts
// WorldJobSpec): the textbook's seeded world, or a user's from a fact table or from
// documents and a tasks file (docs/worlds.md). Everything is read, built and checked
// before anything is written, and a cancel is looked for just before the writing: a
// cancelled build writes nothing.
import * as path from 'node:path';
import type { JobResult, WorldJobSpec } from '../../core/protocol/worker';
import { TASK_SHAPES, type TaskKind } from '../../core/types';
import { type FactSettings, type SplitSizes, parseSplitSpec } from '../../core/worldSource';
import { buildCorpus, makeTaskPool } from '../../core/world';
import {
  type WorldSource,
  buildSourceWorld,
  checkWorldOut,
  readDocsSource,
  readFactSource,
  readToolList,
  sourceWorldLines,
  textbookWorldLine,
  writeSourceWorld,
  writeTextbookWorld,
} from '../../store/worldBuild';
import { type JobHooks, UserError, cancelRequested } from './jobRun';

/** Progress is told in three steps: read (or the corpus), build (or the task pool), write. */
const STEPS = 3;

export async function runWorldJob(spec: WorldJobSpec, hooks: JobHooks): Promise<JobResult<'world'>> {
  hooks.started('none');
  const fromSource = spec.facts !== undefined || spec.docs !== undefined || spec.tasks !== undefined;
  if (!fromSource && (spec.shapes !== undefined || spec.split !== undefined || spec.tools !== undefined)) {
    throw new UserError('--shapes, --split and --tools describe a world from --facts FILE or --docs DIR --tasks FILE');
  }
  return fromSource ? sourceWorldJob(spec, hooks) : textbookWorldJob(spec, hooks);
}

function cancelledWorld(out: string): JobResult<'world'> {
  return { kind: 'world', cancelled: true, summary: { out, passages: 0, train: 0, heldout: 0, lines: [`cancelled: nothing was written to ${out}`] } };
}

/** The textbook's world: seed 0, 120 distractor passages, 200 training and 50 held-out tasks unless told otherwise. */
async function textbookWorldJob(spec: WorldJobSpec, hooks: JobHooks): Promise<JobResult<'world'>> {
  const seed = spec.seed ?? 0;
  const out = path.resolve(spec.out);
  hooks.progress('world', 0, STEPS, 'corpus');
  const corpus = buildCorpus(seed, spec.distractors ?? 120);
  if (await cancelRequested(hooks)) return cancelledWorld(out);
  hooks.progress('world', 1, STEPS, 'task pool');
  let pool;
  try {
    pool = makeTaskPool(seed, spec.train ?? 200, spec.heldout ?? 50);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  if (await cancelRequested(hooks)) return cancelledWorld(out);
  hooks.progress('world', 2, STEPS, 'writing files');
  // The line names `out` as it was given (the CLI prints it so).
  const world = { out: spec.out, corpus, train: pool.train, heldout: pool.heldout };
  writeTextbookWorld(world);
  hooks.progress('world', STEPS, STEPS);
  return { kind: 'world', cancelled: false, summary: { out, passages: corpus.length, train: pool.train.length, heldout: pool.heldout.length, lines: [textbookWorldLine(world)] } };
}

/** Options that do not fit a user's world, refused before any file is read (the CLI's flag names: what the user typed). */
function checkSourceSpec(spec: WorldJobSpec): void {
  const given = (names: (keyof WorldJobSpec)[]) => names.filter((n) => spec[n] !== undefined).map((n) => `--${n}`);
  if (spec.facts !== undefined && (spec.docs !== undefined || spec.tasks !== undefined)) throw new UserError('give --facts FILE, or --docs DIR with --tasks FILE, not both');
  if (spec.facts === undefined && (spec.docs === undefined || spec.tasks === undefined)) throw new UserError('--docs DIR and --tasks FILE go together');
  const textbook = given(['train', 'heldout']);
  if (textbook.length) throw new UserError(`${textbook.join(', ')}: the textbook world's options; a user's world takes --split train=N,heldout=N,dev=N`);
  if (spec.docs !== undefined) {
    const wrong = given(['shapes', 'distractors']);
    if (wrong.length) throw new UserError(`${wrong.join(', ')}: fact-table options, not for --docs`);
  }
}

function parseSplit(spec: string | undefined): Partial<SplitSizes> {
  if (spec === undefined) return {};
  try {
    return parseSplitSpec(spec);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
}

function parseShapes(v: string): TaskKind[] {
  const shapes = v.split(',').map((s) => s.trim());
  const bad = shapes.find((s) => !TASK_SHAPES.includes(s as TaskKind));
  if (bad === 'difference') throw new UserError("--shapes: 'difference' is a family no teacher demonstrates, never a world's shape: it is the evaluation split fresh-differences and the RL pool of that name");
  if (bad !== undefined) throw new UserError(`--shapes: unknown shape '${bad}' (known: ${TASK_SHAPES.join(', ')})`);
  return [...new Set(shapes as TaskKind[])];
}

/** A user's world: the tool list, the split, the target folder, the source, then the build; written last. */
async function sourceWorldJob(spec: WorldJobSpec, hooks: JobHooks): Promise<JobResult<'world'>> {
  checkSourceSpec(spec);
  const out = path.resolve(spec.out);
  const warn = (message: string) => hooks.log('warn', message);
  hooks.progress('world', 0, STEPS, 'reading the source');
  const toolsFile = spec.tools !== undefined ? path.resolve(spec.tools) : undefined;
  const tools = toolsFile !== undefined ? { list: readToolList(toolsFile, warn), file: toolsFile } : null;
  const split = parseSplit(spec.split);
  const seed = spec.seed ?? 0;
  checkWorldOut(out);
  let source: WorldSource;
  let settings: FactSettings = {};
  if (spec.facts !== undefined) {
    source = readFactSource(spec.facts, warn);
    // --shapes is checked once the table reads: a broken table is the first thing told.
    settings = {
      ...(spec.shapes !== undefined ? { shapes: parseShapes(spec.shapes) } : {}),
      ...(spec.distractors !== undefined ? { distractors: spec.distractors } : {}),
    };
  } else {
    source = readDocsSource(spec.docs!, spec.tasks!, warn);
  }
  if (await cancelRequested(hooks)) return cancelledWorld(out);
  hooks.progress('world', 1, STEPS, 'building');
  const world = buildSourceWorld(source, { out, seed, split, settings, tools });
  if (await cancelRequested(hooks)) return cancelledWorld(out);
  hooks.progress('world', 2, STEPS, 'writing files');
  writeSourceWorld(world);
  for (const w of world.built.warnings) hooks.log('warn', w);
  hooks.progress('world', STEPS, STEPS);
  const { built } = world;
  return {
    kind: 'world',
    cancelled: false,
    summary: { out, passages: built.corpus.length, train: built.train.length, heldout: built.heldout.length, dev: built.dev.length, lines: sourceWorldLines(world) },
  };
}
