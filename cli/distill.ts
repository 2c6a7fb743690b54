// `agent-lab distill`: the options made a distill job (trainer/agent/distillJob.ts: the stub
// teacher, byte-identical to the seed; an HTTP teacher, OpenAI chat-completions; or the
// student of a run folder), run in-process as the worker runs it for the editor. Progress
// goes to stderr, the summary to stdout; FILE is written atomically (a killed run leaves the
// old file or none; Ctrl-C stops new rollouts and writes the tasks already finished).
import { CliError, ParsedArgs, UsageError } from './args';
import type { DistillJobSpec, DistillTeacher } from '../core/protocol/worker';
import { DistillFailure } from '../trainer/agent/distillJob';
import { type JobHooks, UserError } from '../trainer/run/jobRun';
import { runJob } from '../trainer/run/jobs';

type Options = Record<string, string | number | boolean | undefined>;

export const DISTILL_USAGE =
  'agent-lab distill --split train|heldout|dev [--seed N] [--distractors N | --world DIR] [--teacher stub|http|student] [--samples N]\n' +
  '                  [--teacher-url URL --teacher-model M] [--temperature T] [--max-tokens N] [--timeout-ms N] [--retries N] [--concurrency N]\n' +
  '                  [--run DIR] [--checkpoint latest|step-N] [--backend B] [--roles] --out FILE   (--roles: also the query-writer and synthesizer sets)';

const HTTP_ONLY = ['teacher-url', 'teacher-model', 'max-tokens', 'timeout-ms', 'retries', 'concurrency'];
const STUDENT_ONLY = ['run', 'checkpoint', 'backend'];

export async function runDistillCommand(o: Options): Promise<void> {
  const teacherName = (o['teacher'] as DistillTeacher | undefined) ?? 'stub';
  const wrong = (names: string[], teacher: string): void => {
    const given = names.filter((n) => o[n] !== undefined);
    if (given.length) throw new UsageError(`${given.map((n) => `--${n}`).join(', ')} ${given.length > 1 ? 'apply' : 'applies'} to --teacher ${teacher} only`);
  };
  if (teacherName !== 'http') wrong(HTTP_ONLY, 'http');
  if (teacherName !== 'student') wrong(STUDENT_ONLY, 'student');
  if (teacherName === 'stub') wrong(['temperature'], 'http or student');
  if (o['world'] !== undefined && o['distractors'] !== undefined) throw new UsageError('--distractors builds a world; --world reads one: give one of them');
  const split = o['split'] as DistillJobSpec['split'];
  if (split === 'dev' && o['world'] === undefined) throw new UsageError("--split dev is a user's world's split: give --world DIR (agent-lab world --facts|--docs writes one)");

  const str = (k: string): string | undefined => o[k] as string | undefined;
  const int = (k: string): number | undefined => (typeof o[k] === 'number' ? o[k] : undefined);
  const spec: DistillJobSpec = {
    kind: 'distill',
    split,
    out: o['out'] as string,
    // The user named the file: it is replaced, as it always was.
    overwrite: true,
    world: str('world'),
    seed: int('seed'),
    distractors: int('distractors'),
    teacher: teacherName,
    samples: int('samples'),
    roles: o['roles'] === true,
    teacherUrl: str('teacher-url'),
    teacherModel: str('teacher-model'),
    temperature: parseTemperature(o['temperature']),
    maxTokens: int('max-tokens'),
    timeoutMs: int('timeout-ms'),
    retries: int('retries'),
    concurrency: int('concurrency'),
    run: str('run'),
    checkpoint: str('checkpoint'),
    backend: str('backend'),
  };
  const hooks = distillHooks(teacherName);
  try {
    const result = await runJob(spec, hooks);
    for (const line of result.summary.lines) console.log(line);
  } finally {
    hooks.dispose();
  }
}

/**
 * The job's reports as the command has always printed them: `distill N/M tasks (S s)` every
 * 2 s, the teacher's and failed rollouts' lines. A teacher's rollouts hear SIGINT and SIGTERM
 * (no new rollouts; the finished tasks are written; a second signal quits); the stub's
 * seconds of work end at a signal, as they always did.
 */
function distillHooks(teacher: DistillTeacher): JobHooks & { dispose(): void } {
  let cancelled = false;
  let interrupts = 0;
  let started = Date.now();
  let lastProgress = 0;
  let listening = false;
  const onSignal = (): void => {
    if (++interrupts > 1) process.exit(130);
    console.error('[agent-lab] stopping: no new rollouts; the finished tasks are written (Ctrl-C again to quit now)');
    cancelled = true;
  };
  const dispose = (): void => {
    if (!listening) return;
    listening = false;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  return {
    started: () => {
      started = Date.now();
      // The stub's first line comes 2 s in (a short run prints none); a teacher's at its first task.
      lastProgress = teacher === 'stub' ? started : 0;
      if (teacher === 'stub' || listening) return;
      listening = true;
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
    },
    progress: (_phase, done, total) => {
      const now = Date.now();
      const due = teacher === 'stub' ? now - lastProgress >= 2000 && done < total : now - lastProgress >= 2000 || done >= total;
      if (!due) return;
      lastProgress = now;
      console.error(`[agent-lab] distill ${done}/${total} tasks (${((now - started) / 1000).toFixed(0)} s)`);
    },
    metrics: () => {},
    log: (level, message) => console.error(`[agent-lab]${level === 'info' ? '' : ` ${level}:`} ${message}`),
    checkpoint: () => {},
    isCancelled: () => cancelled,
    dispose,
  };
}

function parseTemperature(v: string | number | boolean | undefined): number | undefined {
  if (v === undefined) return undefined;
  const s = String(v);
  const t = /^[0-9]*\.?[0-9]+$/.test(s) ? Number(s) : NaN;
  if (!Number.isFinite(t) || t > 2) throw new UsageError(`option '--temperature' needs a number from 0 to 2, got '${s}'`);
  return t;
}

/** `distill`: a teacher's failure (a fatal HTTP error, a broken student) is exit 1, not bad usage. */
export async function cmdDistill(a: ParsedArgs): Promise<void> {
  try {
    await runDistillCommand(a.options);
  } catch (err) {
    if (err instanceof DistillFailure) throw new CliError(err.message);
    if (err instanceof UserError) throw new UsageError(err.message);
    throw err;
  }
}
