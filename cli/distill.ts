// `agent-lab distill`: the stub teacher (synchronous, byte-identical to the seed), an HTTP
// teacher (OpenAI chat-completions) or the student of a run folder. Progress goes to
// stderr, the summary to stdout; FILE is written atomically (a killed run leaves the old
// file or none; Ctrl-C stops new rollouts and writes the tasks already finished).
import * as path from 'node:path';
import { CliError, ParsedArgs, UsageError } from './args';
import { DistillStats, ToolEnv, distill, makeStubTeacher } from '../core/distill';
import { AsyncDistillStats, AsyncTeacher, DEFAULT_CONCURRENCY, OFF_TOOLS, distillAsync, newDistillStats } from '../core/distillAsync';
import { API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, makeHttpTeacher } from '../core/teachers/http';
import { TeacherConfigError, TeacherError } from '../core/teachers/teacher';
import type { Passage, Task } from '../core/types';
import { buildCorpus, makeTaskPool } from '../core/world';
import { rowToPassage, rowToTask } from '../core/worldRows';
import { isHinted } from '../core/worldSource';
import type { McpTool } from '../core/tools/schemas';
import { parseToolList, systemPromptFor, transcriptToolViolation } from '../core/worldTools';
import { splitRoles } from '../core/roles';
import { INPUT_LIMITS, InputError, checkDirCreatable, checkWritableTarget, exists, readInputText, writeJsonlAtomic } from '../store/files';
import type { BackendAsk } from '../trainer/model/backend';
import { makeStudentTeacher } from '../trainer/sft/studentTeacher';
import { CORPUS_FILE, TOOLS_FILE } from '../core/protocol/folders';

type Options = Record<string, string | number | boolean | undefined>;

/** A failure that is not bad usage (exit 1): main turns it into its CliError. */
export class DistillFailure extends Error {}

export const DISTILL_USAGE =
  'agent-lab distill --split train|heldout|dev [--seed N] [--distractors N | --world DIR] [--teacher stub|http|student] [--samples N]\n' +
  '                  [--teacher-url URL --teacher-model M] [--temperature T] [--max-tokens N] [--timeout-ms N] [--retries N] [--concurrency N]\n' +
  '                  [--run DIR] [--checkpoint latest|step-N] [--backend B] [--roles] --out FILE   (--roles: also the query-writer and synthesizer sets)';

const HTTP_ONLY = ['teacher-url', 'teacher-model', 'max-tokens', 'timeout-ms', 'retries', 'concurrency'];
const STUDENT_ONLY = ['run', 'checkpoint', 'backend'];

export async function runDistillCommand(o: Options): Promise<void> {
  const teacherName = (o['teacher'] as string | undefined) ?? 'stub';
  const wrong = (names: string[], teacher: string): void => {
    const given = names.filter((n) => o[n] !== undefined);
    if (given.length) throw new UsageError(`${given.map((n) => `--${n}`).join(', ')} ${given.length > 1 ? 'apply' : 'applies'} to --teacher ${teacher} only`);
  };
  if (teacherName !== 'http') wrong(HTTP_ONLY, 'http');
  if (teacherName !== 'student') wrong(STUDENT_ONLY, 'student');
  if (teacherName === 'stub') wrong(['temperature'], 'http or student');
  if (o['world'] !== undefined && o['distractors'] !== undefined) throw new UsageError('--distractors builds a world; --world reads one: give one of them');

  const split = o['split'] as 'train' | 'heldout' | 'dev';
  if (split === 'dev' && o['world'] === undefined) throw new UsageError("--split dev is a user's world's split: give --world DIR (agent-lab world --facts|--docs writes one)");
  const seed = typeof o['seed'] === 'number' ? o['seed'] : 0;
  const samples = typeof o['samples'] === 'number' ? o['samples'] : 4;
  const out = o['out'] as string;
  // The output is checked before any rollout: a teacher paid by the token must not be wasted on a file that cannot be written.
  checkWritableTarget(out);
  checkDirCreatable(path.dirname(path.resolve(out)));
  const roles = o['roles'] === true ? roleFiles(out) : null;
  if (roles) for (const f of Object.values(roles)) checkWritableTarget(f);
  const world = o['world'] !== undefined ? readWorld(o['world'] as string, split) : defaultWorld(seed, o['distractors'], split as 'train' | 'heldout');
  const corpus = world.corpus;
  const env = new ToolEnv(corpus, world.tools ? systemPromptFor(world.tools) : undefined);
  // Unsolved tasks are counted by reason, never silently lost (docs/worlds.md).
  const unsolved: Record<string, number> = {};
  let tasks = world.tasks;

  if (teacherName === 'stub') {
    // The seed's path, unchanged: its output is compared byte for byte with the reference.
    const stats: DistillStats = { perKind: {} };
    // A question without hints has no answer key for the stub teacher to follow.
    const hintless = tasks.filter((t) => !isHinted(t));
    if (hintless.length) {
      unsolved['no_hints'] = hintless.length;
      tasks = tasks.filter(isHinted);
    }
    const teacher = makeStubTeacher(tasks);
    const rows: ReturnType<typeof distill> = [];
    // Task by task (distill is per task, so the rows are the same), with progress every 2 s.
    const started = Date.now();
    let lastProgress = started;
    const CHUNK = 8;
    for (let i = 0; i < tasks.length; i += CHUNK) {
      rows.push(...distill(tasks.slice(i, i + CHUNK), teacher, env, samples, stats));
      const now = Date.now();
      const done = Math.min(tasks.length, i + CHUNK);
      if (now - lastProgress >= 2000 && done < tasks.length) {
        lastProgress = now;
        console.error(`[agent-lab] distill ${done}/${tasks.length} tasks (${((now - started) / 1000).toFixed(0)} s)`);
      }
    }
    // The stub follows the answer key, whose calls the world's list may refuse (a query over
    // its maxLength): such a trajectory is not kept, as `train sft --traces` would refuse it.
    const tools = world.tools;
    if (tools) {
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
      const n = [...offTools].filter((q) => !left.has(q)).length;
      if (n) unsolved[OFF_TOOLS] = n;
    }
    writeJsonlAtomic(out, rows);
    if (roles) writeRoleFiles(roles, rows);
    const parts = Object.entries(stats.perKind).map(([k, s]) => `${k} ${s.kept}/${s.tasks}`);
    console.log(`wrote ${out}: ${rows.length} trajectories kept from ${tasks.length} tasks (${parts.join(', ')})`);
    const solvedQuestions = new Set(rows.map((r) => r.task));
    const wrong = tasks.filter((t) => !solvedQuestions.has(t.question)).length - (unsolved[OFF_TOOLS] ?? 0);
    if (wrong) unsolved['wrong_answer'] = wrong;
    if (Object.keys(unsolved).length) console.log(unsolvedLine(unsolved, world.tasks.length));
    return;
  }

  const temperature = parseTemperature(o['temperature']);
  let teacher: AsyncTeacher;
  let dispose = (): void => {};
  let concurrency = 1;
  if (teacherName === 'http') {
    const baseUrl = (o['teacher-url'] as string | undefined) ?? process.env[BASE_URL_ENV];
    const model = (o['teacher-model'] as string | undefined) ?? process.env[MODEL_ENV];
    if (!baseUrl) throw new UsageError(`--teacher http needs --teacher-url URL (or ${BASE_URL_ENV})`);
    if (!model) throw new UsageError(`--teacher http needs --teacher-model M (or ${MODEL_ENV})`);
    try {
      teacher = makeHttpTeacher({
        baseUrl,
        model,
        apiKey: process.env[API_KEY_ENV],
        ...(world.tools ? { tools: world.tools } : {}),
        ...(temperature !== undefined ? { temperature } : {}),
        ...(typeof o['max-tokens'] === 'number' ? { maxTokens: o['max-tokens'] } : {}),
        ...(typeof o['timeout-ms'] === 'number' ? { timeoutMs: o['timeout-ms'] } : {}),
        ...(typeof o['retries'] === 'number' ? { retries: o['retries'] } : {}),
      });
    } catch (err) {
      if (err instanceof TeacherConfigError) throw new UsageError(err.message);
      throw err;
    }
    concurrency = typeof o['concurrency'] === 'number' ? o['concurrency'] : DEFAULT_CONCURRENCY;
    console.error(`[agent-lab] teacher: ${model} at ${baseUrl} (${process.env[API_KEY_ENV] ? `key from ${API_KEY_ENV}` : `no ${API_KEY_ENV}: no Authorization header`})`);
  } else {
    if (o['run'] === undefined) throw new UsageError('--teacher student needs --run DIR (a run folder with a trained student)');
    try {
      const student = await makeStudentTeacher({
        runDir: o['run'] as string,
        ...(o['checkpoint'] !== undefined ? { checkpoint: o['checkpoint'] as string } : {}),
        ...(temperature !== undefined ? { temperature } : {}),
        seed,
        ...(o['backend'] !== undefined ? { backend: o['backend'] as BackendAsk } : {}),
      });
      teacher = student.teacher;
      dispose = student.dispose;
      console.error(`[agent-lab] teacher: the student of ${o['run'] as string}, checkpoint ${student.checkpoint}, backend ${student.backend}`);
    } catch (err) {
      if (err instanceof TeacherConfigError) throw new UsageError(err.message);
      throw err;
    }
  }

  const stats = newDistillStats();
  const controller = new AbortController();
  let interrupts = 0;
  const onSignal = (): void => {
    if (++interrupts > 1) process.exit(130);
    console.error('[agent-lab] stopping: no new rollouts; the finished tasks are written (Ctrl-C again to quit now)');
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const started = Date.now();
  let lastProgress = 0;
  const shown: Record<string, number> = {};
  const firstFailure = new Map<string, string>();
  let rows;
  try {
    rows = await distillAsync(tasks, teacher, env, {
      samplesPerTask: samples,
      concurrency,
      stats,
      signal: controller.signal,
      tools: world.tools ?? null,
      onProgress: (done, total) => {
        const now = Date.now();
        if (now - lastProgress < 2000 && done < total) return;
        lastProgress = now;
        console.error(`[agent-lab] distill ${done}/${total} tasks (${((now - started) / 1000).toFixed(0)} s)`);
      },
      onFailure: (task, err) => {
        if (!firstFailure.has(task.question)) firstFailure.set(task.question, err.reason);
        // The first few of each reason, so a broken setup shows itself early.
        if ((shown[err.reason] = (shown[err.reason] ?? 0) + 1) <= 3) console.error(`[agent-lab] failed rollout (${JSON.stringify(task.question)}): ${err.message}`);
      },
    });
  } catch (err) {
    if (err instanceof TeacherError) throw new DistillFailure(`the teacher cannot serve any request: ${err.message}`);
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    dispose();
  }
  writeJsonlAtomic(out, rows);
  if (roles) writeRoleFiles(roles, rows);
  for (const line of summaryLines(out, stats, tasks.length)) console.log(line);
  if (!stats.cancelled) {
    const solvedQuestions = new Set(rows.map((r) => r.task));
    for (const t of tasks) {
      if (solvedQuestions.has(t.question)) continue;
      const reason = firstFailure.get(t.question) ?? 'wrong_answer';
      unsolved[reason] = (unsolved[reason] ?? 0) + 1;
    }
    if (Object.keys(unsolved).length) console.log(unsolvedLine(unsolved, tasks.length));
  }
}

/** Beside FILE (X.traces.jsonl or X.jsonl): X.query_writer.jsonl and X.synthesizer.jsonl. */
export function roleFiles(out: string): { queryWriter: string; synthesizer: string } {
  const base = out.replace(/\.traces\.jsonl$|\.jsonl$/, '');
  return { queryWriter: `${base}.query_writer.jsonl`, synthesizer: `${base}.synthesizer.jsonl` };
}

/** The seed's split_roles over every kept transcript: rows {"prefix", "target", "task", "kind"}. */
function writeRoleFiles(files: { queryWriter: string; synthesizer: string }, rows: readonly { task: string; text: string; kind: string }[]): void {
  const qw: unknown[] = [];
  const syn: unknown[] = [];
  for (const r of rows) {
    const split = splitRoles(r.text);
    for (const p of split.queryWriter) qw.push({ prefix: p.prefix, target: p.target, task: r.task, kind: r.kind });
    for (const p of split.synthesizer) syn.push({ prefix: p.prefix, target: p.target, task: r.task, kind: r.kind });
  }
  writeJsonlAtomic(files.queryWriter, qw);
  writeJsonlAtomic(files.synthesizer, syn);
  console.log(`wrote the role split (split_roles): ${files.queryWriter} (${qw.length} query-writer pairs), ${files.synthesizer} (${syn.length} synthesizer pairs)`);
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

function parseTemperature(v: string | number | boolean | undefined): number | undefined {
  if (v === undefined) return undefined;
  const s = String(v);
  const t = /^[0-9]*\.?[0-9]+$/.test(s) ? Number(s) : NaN;
  if (!Number.isFinite(t) || t > 2) throw new UsageError(`option '--temperature' needs a number from 0 to 2, got '${s}'`);
  return t;
}

function defaultWorld(seed: number, distractors: string | number | boolean | undefined, split: 'train' | 'heldout'): { corpus: Passage[]; tasks: Task[]; tools?: McpTool[] } {
  const corpus = buildCorpus(seed, typeof distractors === 'number' ? distractors : 120);
  const pool = makeTaskPool(seed);
  return { corpus, tasks: split === 'train' ? pool.train : pool.heldout };
}

/** A world folder as `agent-lab world --out DIR` (or Build World) writes it. */
function readWorld(dir: string, split: 'train' | 'heldout' | 'dev'): { corpus: Passage[]; tasks: Task[]; tools?: McpTool[] } {
  const rows = (file: string): unknown[] => {
    if (!exists(file)) throw new UsageError(`cannot read ${file}: ENOENT (is ${dir} a world folder?)`);
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
      if (err instanceof UsageError || err instanceof DistillFailure || err instanceof InputError) throw err;
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

/** `distill`: a teacher's failure (a fatal HTTP error, a broken student) is exit 1, not bad usage. */
export async function cmdDistill(a: ParsedArgs): Promise<void> {
  try {
    await runDistillCommand(a.options);
  } catch (err) {
    if (err instanceof DistillFailure) throw new CliError(err.message);
    throw err;
  }
}
