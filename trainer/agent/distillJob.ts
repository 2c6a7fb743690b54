// The distill job (core/protocol/worker.ts DistillJobSpec): a teacher run through the real
// ReAct loop on one split of a world, the solved and de-duplicated trajectories written to
// `out`. The stub teacher (byte-identical to the seed), an OpenAI-compatible HTTP teacher or
// a run's student. The worker runs it for the editor, `agent-lab distill` in-process; both
// print `summary.lines`. `out` is written atomically once the rollouts end: a cancel stops
// new rollouts and the finished tasks are written; a killed job leaves the old file or none.
import * as path from 'node:path';
import type { DistillJobSpec, DistillJobSummary, JobResult } from '../../core/protocol/worker';
import { DistillStats, ToolEnv, TraceRow, distill, makeStubTeacher } from '../../core/distill';
import { AsyncDistillStats, AsyncTeacher, DEFAULT_CONCURRENCY, OFF_TOOLS, distillAsync, newDistillStats } from '../../core/distillAsync';
import { API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, makeHttpTeacher } from '../../core/teachers/http';
import { TeacherConfigError, TeacherError } from '../../core/teachers/teacher';
import type { Passage, Task } from '../../core/types';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { rowToPassage, rowToTask } from '../../core/worldRows';
import { isHinted } from '../../core/worldSource';
import type { McpTool } from '../../core/tools/schemas';
import { parseToolList, systemPromptFor, transcriptToolViolation } from '../../core/worldTools';
import { splitRoles } from '../../core/roles';
import { CORPUS_FILE, TOOLS_FILE } from '../../core/protocol/folders';
import { INPUT_LIMITS, InputError, checkDirCreatable, checkWritableTarget, exists, readInputText, writeJsonlAtomic } from '../../store/files';
import type { BackendAsk } from '../model/backend';
import { makeStudentTeacher } from '../sft/studentTeacher';
import { type JobHooks, UserError } from '../run/jobRun';

/** A failure that is not a mistake in what was asked (a world file that is not JSON, a teacher that serves nothing): the CLI exits 1. */
export class DistillFailure extends Error {}

interface DistillWorld {
  corpus: Passage[];
  tasks: Task[];
  tools?: McpTool[];
}

/** Where the rollouts leave a distillation: the kept rows, the tasks they came from, the lines after the role split's. */
interface Distilled {
  rows: TraceRow[];
  tasks: number;
  cancelled: boolean;
  unsolved: Record<string, number>;
  /** The summary lines, once `out` is written. */
  lines(out: string): string[];
}

export async function runDistillJob(spec: DistillJobSpec, hooks: JobHooks): Promise<JobResult<'distill'>> {
  if (spec.world !== undefined && spec.distractors !== undefined) throw new UserError('--distractors builds a world; --world reads one: give one of them');
  if (spec.split === 'dev' && spec.world === undefined) throw new UserError("--split dev is a user's world's split: give --world DIR (agent-lab world --facts|--docs writes one)");
  const out = spec.out;
  // The output is checked before any rollout: a teacher paid by the token must not be wasted on a file that cannot be written.
  const roles = spec.roles === true ? roleFiles(out) : null;
  checkTarget(out, spec.overwrite === true);
  checkDirCreatable(path.dirname(path.resolve(out)));
  if (roles) for (const f of Object.values(roles)) checkTarget(f, spec.overwrite === true);
  const world = spec.world !== undefined ? readWorld(spec.world, spec.split) : defaultWorld(spec.seed ?? 0, spec.distractors, spec.split);
  const env = new ToolEnv(world.corpus, world.tools ? systemPromptFor(world.tools) : undefined);
  const samples = spec.samples ?? 4;
  const done = (spec.teacher ?? 'stub') === 'stub' ? await distillWithStub(world, env, samples, hooks) : await distillWithTeacher(spec, world, env, samples, hooks);
  writeJsonlAtomic(out, done.rows);
  const lines = roles ? [writeRoleFiles(roles, done.rows)] : [];
  lines.push(...done.lines(out));
  const summary: DistillJobSummary = { out, tasks: done.tasks, kept: done.rows.length, unsolved: done.unsolved, lines };
  return { kind: 'distill', cancelled: done.cancelled, summary };
}

/** An output the job may write: a new file, or (with `overwrite`) a regular file it replaces. */
function checkTarget(file: string, overwrite: boolean): void {
  checkWritableTarget(file);
  if (!overwrite && exists(file)) throw new UserError(`${file} already exists: a distillation never writes over a file (choose another name)`);
}

/** Beside FILE (X.traces.jsonl or X.jsonl): X.query_writer.jsonl and X.synthesizer.jsonl. */
export function roleFiles(out: string): { queryWriter: string; synthesizer: string } {
  const base = out.replace(/\.traces\.jsonl$|\.jsonl$/, '');
  return { queryWriter: `${base}.query_writer.jsonl`, synthesizer: `${base}.synthesizer.jsonl` };
}

/** The seed's split_roles over every kept transcript: rows {"prefix", "target", "task", "kind"}; returns the line that says so. */
function writeRoleFiles(files: { queryWriter: string; synthesizer: string }, rows: readonly { task: string; text: string; kind: string }[]): string {
  const qw: unknown[] = [];
  const syn: unknown[] = [];
  for (const r of rows) {
    const split = splitRoles(r.text);
    for (const p of split.queryWriter) qw.push({ prefix: p.prefix, target: p.target, task: r.task, kind: r.kind });
    for (const p of split.synthesizer) syn.push({ prefix: p.prefix, target: p.target, task: r.task, kind: r.kind });
  }
  writeJsonlAtomic(files.queryWriter, qw);
  writeJsonlAtomic(files.synthesizer, syn);
  return `wrote the role split (split_roles): ${files.queryWriter} (${qw.length} query-writer pairs), ${files.synthesizer} (${syn.length} synthesizer pairs)`;
}

/** Lets a cancel (a worker message, a signal) arrive between synchronous chunks. */
const yieldToEvents = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The seed's path, unchanged: its output is compared byte for byte with the reference. */
async function distillWithStub(world: DistillWorld, env: ToolEnv, samples: number, hooks: JobHooks): Promise<Distilled> {
  const stats: DistillStats = { perKind: {} };
  // Unsolved tasks are counted by reason, never silently lost (docs/worlds.md).
  const unsolved: Record<string, number> = {};
  // A question without hints has no answer key for the stub teacher to follow.
  let tasks = world.tasks;
  const hintless = tasks.filter((t) => !isHinted(t));
  if (hintless.length) {
    unsolved['no_hints'] = hintless.length;
    tasks = tasks.filter(isHinted);
  }
  const teacher = makeStubTeacher(tasks);
  hooks.started('none');
  const rows: TraceRow[] = [];
  // A chunk of tasks at a time (distill is per task, so the rows are the same), a cancel heard between chunks.
  const CHUNK = 8;
  let finished = 0;
  while (finished < tasks.length && !hooks.isCancelled()) {
    rows.push(...distill(tasks.slice(finished, finished + CHUNK), teacher, env, samples, stats));
    finished = Math.min(tasks.length, finished + CHUNK);
    hooks.progress('distill', finished, tasks.length);
    await yieldToEvents();
  }
  const cancelled = finished < tasks.length;
  const offTools = world.tools ? dropOffTools(rows, world.tools, stats) : 0;
  if (offTools) unsolved[OFF_TOOLS] = offTools;
  if (!cancelled) {
    const solvedQuestions = new Set(rows.map((r) => r.task));
    const wrong = tasks.filter((t) => !solvedQuestions.has(t.question)).length - offTools;
    if (wrong) unsolved['wrong_answer'] = wrong;
  }
  // A stopped run counts no reasons: its unfinished tasks were not tried.
  const counted = cancelled ? {} : unsolved;
  const lines = (out: string): string[] => {
    const parts = Object.entries(stats.perKind).map(([k, s]) => `${k} ${s.kept}/${s.tasks}`);
    const stopped = cancelled ? ` (stopped: ${finished} of ${tasks.length} tasks finished)` : '';
    const result = [`wrote ${out}: ${rows.length} trajectories kept from ${finished} tasks${stopped} (${parts.join(', ')})`];
    if (Object.keys(counted).length) result.push(unsolvedLine(counted, world.tasks.length));
    return result;
  };
  return { rows, tasks: finished, cancelled, unsolved: counted, lines };
}

/**
 * The stub follows the answer key, whose calls the world's list may refuse (a query over
 * its maxLength): such a trajectory is not kept, as `train sft --traces` would refuse it.
 * Drops them from `rows` in place; returns how many tasks lost every trajectory so.
 */
function dropOffTools(rows: TraceRow[], tools: McpTool[], stats: DistillStats): number {
  const offTools = new Set<string>();
  const ok = rows.filter((r) => {
    if (transcriptToolViolation(r.text, tools) === null) return true;
    offTools.add(r.task);
    const k = stats.perKind[r.kind];
    if (k) k.kept--;
    return false;
  });
  rows.splice(0, rows.length, ...ok);
  const left = new Set(rows.map((r) => r.task));
  return [...offTools].filter((q) => !left.has(q)).length;
}

/** The HTTP teacher or a run's student, through the asynchronous loop. */
async function distillWithTeacher(spec: DistillJobSpec, world: DistillWorld, env: ToolEnv, samples: number, hooks: JobHooks): Promise<Distilled> {
  const { teacher, dispose, concurrency } = await openTeacher(spec, world, hooks);
  const tasks = world.tasks;
  const stats = newDistillStats();
  const controller = new AbortController();
  // A cancel stops new rollouts; those under way end, and the finished tasks are kept.
  const poll = setInterval(() => hooks.isCancelled() && controller.abort(), 100);
  const shown: Record<string, number> = {};
  const firstFailure = new Map<string, string>();
  let rows: TraceRow[];
  try {
    if (hooks.isCancelled()) controller.abort();
    rows = await distillAsync(tasks, teacher, env, {
      samplesPerTask: samples,
      concurrency,
      stats,
      signal: controller.signal,
      tools: world.tools ?? null,
      onProgress: (done, total) => {
        hooks.progress('distill', done, total);
        if (hooks.isCancelled()) controller.abort();
      },
      onFailure: (task, err) => {
        if (!firstFailure.has(task.question)) firstFailure.set(task.question, err.reason);
        // The first few of each reason, so a broken setup shows itself early.
        if ((shown[err.reason] = (shown[err.reason] ?? 0) + 1) <= 3) hooks.log('info', `failed rollout (${JSON.stringify(task.question)}): ${err.message}`);
      },
    });
  } catch (err) {
    if (err instanceof TeacherError) throw new DistillFailure(`the teacher cannot serve any request: ${err.message}`);
    throw err;
  } finally {
    clearInterval(poll);
    dispose();
  }
  const unsolved: Record<string, number> = {};
  if (!stats.cancelled) {
    const solvedQuestions = new Set(rows.map((r) => r.task));
    for (const t of tasks) {
      if (solvedQuestions.has(t.question)) continue;
      const reason = firstFailure.get(t.question) ?? 'wrong_answer';
      unsolved[reason] = (unsolved[reason] ?? 0) + 1;
    }
  }
  const lines = (out: string): string[] => [...summaryLines(out, stats, tasks.length), ...(Object.keys(unsolved).length ? [unsolvedLine(unsolved, tasks.length)] : [])];
  return { rows, tasks: stats.tasks, cancelled: stats.cancelled, unsolved, lines };
}

interface OpenTeacher {
  teacher: AsyncTeacher;
  dispose(): void;
  concurrency: number;
}

/** The HTTP teacher (its key from this process's environment, never from the job) or the student of `spec.run`. */
async function openTeacher(spec: DistillJobSpec, world: DistillWorld, hooks: JobHooks): Promise<OpenTeacher> {
  try {
    if (spec.teacher === 'http') {
      const baseUrl = spec.teacherUrl ?? process.env[BASE_URL_ENV];
      const model = spec.teacherModel ?? process.env[MODEL_ENV];
      if (!baseUrl) throw new UserError(`--teacher http needs --teacher-url URL (or ${BASE_URL_ENV})`);
      if (!model) throw new UserError(`--teacher http needs --teacher-model M (or ${MODEL_ENV})`);
      const apiKey = process.env[API_KEY_ENV];
      const teacher = makeHttpTeacher({
        baseUrl,
        model,
        apiKey,
        ...(world.tools ? { tools: world.tools } : {}),
        ...(spec.temperature !== undefined ? { temperature: spec.temperature } : {}),
        ...(spec.maxTokens !== undefined ? { maxTokens: spec.maxTokens } : {}),
        ...(spec.timeoutMs !== undefined ? { timeoutMs: spec.timeoutMs } : {}),
        ...(spec.retries !== undefined ? { retries: spec.retries } : {}),
      });
      // Whether a key is set, never the key.
      hooks.log('info', `teacher: ${model} at ${baseUrl} (${apiKey ? `key from ${API_KEY_ENV}` : `no ${API_KEY_ENV}: no Authorization header`})`);
      hooks.started('none');
      return { teacher, dispose: () => {}, concurrency: spec.concurrency ?? DEFAULT_CONCURRENCY };
    }
    if (spec.run === undefined) throw new UserError('--teacher student needs --run DIR (a run folder with a trained student)');
    const student = await makeStudentTeacher({
      runDir: spec.run,
      ...(spec.checkpoint !== undefined ? { checkpoint: spec.checkpoint } : {}),
      ...(spec.temperature !== undefined ? { temperature: spec.temperature } : {}),
      seed: spec.seed ?? 0,
      ...(spec.backend !== undefined ? { backend: spec.backend as BackendAsk } : {}),
    });
    hooks.log('info', `teacher: the student of ${spec.run}, checkpoint ${student.checkpoint}, backend ${student.backend}`);
    hooks.started(student.backend);
    return { teacher: student.teacher, dispose: student.dispose, concurrency: 1 };
  } catch (err) {
    if (err instanceof TeacherConfigError) throw new UserError(err.message);
    throw err;
  }
}

/** "unsolved 7 of 40 tasks: no_hints 4, wrong_answer 3": the reasons, so no task is silently lost. */
export function unsolvedLine(unsolved: Record<string, number>, total: number): string {
  const n = Object.values(unsolved).reduce((a, b) => a + b, 0);
  return `  unsolved ${n} of ${total} tasks: ${Object.entries(unsolved).map(([r, k]) => `${r} ${k}`).join(', ')}`;
}

/** The summary: totals, failures by reason (with what the teacher said), and per kind. */
export function summaryLines(out: string, s: AsyncDistillStats, totalTasks: number): string[] {
  const failedTotal = Object.values(s.failed).reduce((a, b) => a + b, 0);
  const lines = [
    `wrote ${out}: ${s.kept} trajectories kept from ${s.tasks} tasks${s.cancelled ? ` (stopped: ${s.tasks} of ${totalTasks} tasks finished)` : ''}`,
    `  rollouts ${s.rollouts}, solved ${s.solved}, kept ${s.kept} (de-duplicated), failed ${failedTotal}` +
      (failedTotal ? ` (${Object.entries(s.failed).map(([r, n]) => `${r} ${n}`).join(', ')})` : ''),
  ];
  for (const message of Object.values(s.failureExamples)) lines.push(`  e.g. ${message}`);
  if (s.failed[OFF_TOOLS]) lines.push(`  ${OFF_TOOLS}: calls outside the world's tool list (tools.json): not run, not kept`);
  for (const [kind, k] of Object.entries(s.perKind)) {
    lines.push(`  ${kind.padEnd(8)} tasks ${k.tasks}, rollouts ${k.rollouts}, solved ${k.solved}, kept ${k.kept}, failed ${k.failed}`);
  }
  return lines;
}

function defaultWorld(seed: number, distractors: number | undefined, split: DistillJobSpec['split']): DistillWorld {
  if (split === 'dev') throw new UserError("--split dev is a user's world's split: give --world DIR (agent-lab world --facts|--docs writes one)");
  const corpus = buildCorpus(seed, distractors ?? 120);
  const pool = makeTaskPool(seed);
  return { corpus, tasks: split === 'train' ? pool.train : pool.heldout };
}

/** A world folder as `agent-lab world --out DIR` (or Build World) writes it. */
function readWorld(dir: string, split: DistillJobSpec['split']): DistillWorld {
  const rows = (file: string): unknown[] => {
    if (!exists(file)) throw new UserError(`cannot read ${file}: ENOENT (is ${dir} a world folder?)`);
    // A regular file under the size cap (a FIFO or a link to /dev/zero would hang).
    const text = readInputText(file, 'the world file', INPUT_LIMITS.data);
    return text
      .split('\n')
      .map((line, i) => ({ line, i }))
      .filter(({ line }) => line.trim() !== '')
      .map(({ line, i }) => {
        try {
          return JSON.parse(line) as unknown;
        } catch {
          throw new DistillFailure(`${file}:${i + 1}: not JSON`);
        }
      });
  };
  const parse = <T>(file: string, f: (row: unknown, where: string) => T): T[] => {
    try {
      return rows(file).map((r, i) => f(r, `${file} row ${i + 1}`));
    } catch (err) {
      if (err instanceof UserError || err instanceof DistillFailure || err instanceof InputError) throw err;
      throw new DistillFailure((err as Error).message);
    }
  };
  // The world's tool list (tools.json, docs/worlds.md "Tools"): the HTTP teacher is shown its schemas.
  const toolsFile = path.join(dir, TOOLS_FILE);
  let tools: McpTool[] | undefined;
  if (exists(toolsFile)) {
    try {
      tools = parseToolList(readInputText(toolsFile, 'the tool list', INPUT_LIMITS.json), toolsFile);
    } catch (err) {
      throw new DistillFailure((err as Error).message);
    }
  }
  return {
    corpus: parse(path.join(dir, CORPUS_FILE), rowToPassage),
    tasks: parse(path.join(dir, `${split}.jsonl`), rowToTask),
    ...(tools ? { tools } : {}),
  };
}
