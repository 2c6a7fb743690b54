// `agent-lab train sft|grpo`, `agent-lab eval` and `agent-lab run` (asking the student): the
// worker's jobs, run in-process with the progress on stderr. Ctrl-C (or SIGTERM) stops after the current step with a checkpoint;
// before the first step (a world's data preparation, GRPO's pre-screen) it stops at once,
// leaving nothing half-written, and exits 130 (143). A second one exits at once; the last
// complete checkpoint is still there.
import { constants } from 'node:os';
import * as path from 'node:path';
import { BadInputError, CliError, OptionSpec, ParsedArgs, UsageError } from './args';
import { BACKEND_CHOICES } from '../trainer/model/backend';
import { InputError } from '../store/files';
import { PRESET_NAMES } from '../trainer/model/model';
import { RECIPE_NAMES } from '../trainer/sft/recipes';
import { Stopped, dataFiles } from '../trainer/sft/prepare';
import { checkBaseFolder } from '../trainer/hf/hfModel';
import { parseLoraSpec } from '../trainer/model/lora';
import { runJob, type JobHooks } from '../trainer/run/jobs';
import { UserError } from '../trainer/run/jobRun';
import { runSft } from '../trainer/sft/sft';
import { PreflightRefusal, runGrpo } from '../trainer/grpo/grpo';
import { grpoOnlyFlags, grpoOptionsFromFlags } from '../core/protocol/grpoOptions';
import { SFT_FLAG_NAMES, sftFlags, sftOptionsFromFlags } from '../core/protocol/sftOptions';
import type { AskJobSpec, AskJobSummary, EvalSplit } from '../core/protocol/worker';
import { QuestionTooLong } from '../trainer/agent/askJob';
import { failureMeaning } from '../core/protocol/panels';
import { evaluateFigure, figureText, rlBaselineLines, shapeLine, trainingFigure } from '../core/figures';

type Options = Record<string, string | number | boolean | undefined>;

/** Options of `train grpo` only (the GRPO option table, core/protocol/grpoOptions.ts; "GRPO defaults" for their defaults). */
export const GRPO_OPTIONS: Record<string, OptionSpec> = grpoOnlyFlags();

/**
 * Options of `train sft`, and those `train grpo` shares (the SFT option table,
 * core/protocol/sftOptions.ts); the value lists are the trainer's.
 */
export const SFT_OPTIONS: Record<string, OptionSpec> = sftFlags({ presets: PRESET_NAMES, recipes: RECIPE_NAMES, backends: BACKEND_CHOICES });

export function trainJobHooks(quiet = false): JobHooks & { cancel(): void } {
  let cancelled = false;
  let lastProgress = 0;
  return {
    cancel: () => (cancelled = true),
    started: (backend) => console.error(`[agent-lab] backend ${backend}`),
    progress: (phase, done, total, message) => {
      const now = Date.now();
      // A GRPO step's line (its zero-spread share) is printed every step: steps take seconds, and a flat one matters.
      if (quiet || (phase !== 'grpo' && now - lastProgress < 2000 && done < total)) return;
      lastProgress = now;
      console.error(`[agent-lab] ${phase} ${done}/${total}${message ? `  ${message}` : ''}`);
    },
    metrics: () => {},
    log: (level, message) => console.error(`[agent-lab]${level === 'info' ? '' : ` ${level}:`} ${message}`),
    checkpoint: (step, path) => console.error(`[agent-lab] checkpoint step ${step}: ${path}`),
    isCancelled: () => cancelled,
  };
}

/** A job a signal stopped before it made anything: main() prints the message and exits with `code`. */
export class SignalStop extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/** 128 + the signal's number, as a shell reports a process the signal ended: 130 for SIGINT, 143 for SIGTERM. */
const signalExitCode = (signal: NodeJS.Signals): number => 128 + constants.signals[signal];

async function withSigint<T>(hooks: { cancel(): void }, work: () => Promise<T>): Promise<T> {
  let heard: NodeJS.Signals | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (heard) process.exit(signalExitCode(signal));
    heard = signal;
    const again = signal === 'SIGINT' ? 'Ctrl-C' : 'a second signal';
    console.error(`[agent-lab] ${signal}: stopping after the current step (in data preparation or the pre-screen: at once); ${again} again quits now`);
    hooks.cancel();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await work();
  } catch (err) {
    if (err instanceof Stopped) {
      const signal: NodeJS.Signals = heard ?? 'SIGINT';
      throw new SignalStop(`stopped by ${signal} during ${err.phase}; nothing half-written: ${err.left}`, signalExitCode(signal));
    }
    if (err instanceof PreflightRefusal) throw new CliError(err.message);
    if (err instanceof UserError) throw new UsageError(err.message);
    if (err instanceof InputError) throw new CliError(err.message);
    throw err;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

export async function runTrainCommand(o: Options): Promise<void> {
  const hooks = trainJobHooks();
  const result = await withSigint(hooks, () =>
    runSft(
      {
        runDir: o['run'] as string,
        ...sftOptionsFromFlags(o),
        ...(o['threads'] !== undefined ? { parallel: (o['threads'] as number) - 1 } : {}),
      },
      hooks,
    ),
  );
  const s = result.summary;
  const figure = trainingFigure(s);
  console.log(
    `${result.cancelled ? 'stopped' : 'trained'}: ${s.steps} steps in ${s.minutes.toFixed(1)} min on ${s.backend}` +
      (figure ? `; ${figureText(figure, false)}${shapeLine(figure.byKind) ? ` (${shapeLine(figure.byKind)})` : ''}` : ''),
  );
  console.log(JSON.stringify(s));
}

/** `agent-lab train grpo`: RL from an SFT run; the pre-flight report, progress and warnings on stderr. */
export async function runGrpoCommand(o: Options): Promise<void> {
  const hooks = trainJobHooks();
  const result = await withSigint(hooks, () =>
    runGrpo(
      {
        runDir: o['run'] as string,
        ...grpoOptionsFromFlags(o),
        ...(o['threads'] !== undefined ? { parallel: (o['threads'] as number) - 1 } : {}),
      },
      hooks,
    ),
  );
  const s = result.summary;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  // A run that stopped itself on flat groups says why on stdout too (the warning went to stderr).
  if (s.stopped_flat) console.log(`stopped itself: ${s.stopped_flat}`);
  console.log(
    `${result.cancelled ? 'stopped' : 'trained'}: ${s.steps} ${s.objective === 'rft' ? 'RFT' : 'GRPO'} steps in ${s.minutes.toFixed(1)} min on ${s.backend}` +
      (s.heldout_accuracy_before !== undefined ? `; held-out exact match before ${pct(s.heldout_accuracy_before)}` : '') +
      (s.heldout_accuracy !== undefined ? `, after ${pct(s.heldout_accuracy)}` : ''),
  );
  if (!result.cancelled && s.steps > 0) for (const line of rlBaselineLines(s, path.basename(s.runDir))) console.log(line);
  console.log(JSON.stringify(s));
}

export async function runEvalCommand(o: Options): Promise<void> {
  const hooks = trainJobHooks(Boolean(o['json']));
  const result = await withSigint(hooks, () =>
    runJob(
      {
        kind: 'eval',
        runDir: o['run'] as string,
        split: ((o['split'] as string | undefined) ?? 'heldout') as EvalSplit,
        ...(o['checkpoint'] !== undefined ? { checkpoint: o['checkpoint'] as string } : {}),
        ...(o['backend'] !== undefined ? { backend: o['backend'] as string } : {}),
        ...(o['limit'] !== undefined ? { limit: o['limit'] as number } : {}),
        ...(o['world'] !== undefined ? { world: o['world'] as string } : {}),
        ...(o['copy-bias'] !== undefined ? { copyBias: o['copy-bias'] as number } : {}),
        ...(o['copy-stop'] !== undefined ? { copyStop: o['copy-stop'] === 'on' } : {}),
        ...(o['copy-values'] !== undefined ? { copyValues: o['copy-values'] === 'on' } : {}),
      },
      hooks,
    ),
  );
  const s = result.summary;
  if (!o['json']) {
    // The same figure the editor shows: split, task count (of the split's), checkpoint.
    console.log(`${figureText(evaluateFigure(s), false)} (checkpoint ${s.checkpoint}; mean ${s.steps_mean.toFixed(2)} steps)`);
    for (const [k, v] of Object.entries(s.by_kind)) console.log(`  ${k.padEnd(8)} ${(100 * v.accuracy).toFixed(1)}% of ${v.n}`);
    // The same labels as the eval rows and the inspector: each failure's first real mistake.
    const failed = Object.entries(s.failures).filter(([, v]) => v > 0);
    console.log(`  failures (first mistake): ${failed.length ? failed.map(([k, v]) => `${k} ${v}`).join(', ') : 'none'}`);
    for (const [k] of failed) if (failureMeaning(k)) console.log(`    ${k}: ${failureMeaning(k)}`);
    console.log(`  teacher-forced span accuracy: ${Object.entries(s.span_accuracy).map(([k, v]) => `${k} ${(100 * v).toFixed(1)}%`).join(', ')}`);
    console.log(`  contaminated: ${s.contaminated}`);
  }
  console.log(
    JSON.stringify({
      accuracy: s.accuracy,
      n: s.n,
      by_kind: s.by_kind,
      failures: s.failures,
      span_accuracy: s.span_accuracy,
      contaminated: s.contaminated,
      steps_mean: s.steps_mean,
      // What the figure is: of how many tasks the split holds, at which checkpoint.
      ...(s.of !== undefined ? { of: s.of } : {}),
      checkpoint: s.checkpoint,
      step: s.step,
      ...(s.copy_bias ? { copy_bias: s.copy_bias } : {}),
      ...(s.copy_stop ? { copy_stop: true } : {}),
      ...(s.copy_values ? { copy_values: true } : {}),
    }),
  );
}

/** `agent-lab run --run DIR QUESTION`: the student answers one question through the real loop (the ask job, in-process). */
export async function runAskCommand(o: Options, question: string): Promise<void> {
  // Quiet: `agent-lab run` prints the trajectory and nothing else (not even the backend).
  const hooks: JobHooks = { ...trainJobHooks(true), started: () => {} };
  let s: AskJobSummary;
  try {
    const spec: AskJobSpec = {
      kind: 'ask',
      runDir: o['run'] as string,
      question,
      ...(o['world'] !== undefined ? { world: o['world'] as string } : {}),
      ...(o['checkpoint'] !== undefined ? { checkpoint: o['checkpoint'] as string } : {}),
      ...(o['backend'] !== undefined ? { backend: o['backend'] as string } : {}),
    };
    s = (await runJob(spec, hooks)).summary;
  } catch (err) {
    if (err instanceof UserError) throw new UsageError(err.message);
    if (err instanceof QuestionTooLong) throw new CliError(err.message);
    throw err; // InputError and WorldFileError: main() reports them as it always has
  }
  if (o['json']) {
    console.log(JSON.stringify({ question, answer: s.answer, steps: s.steps, outOfSteps: s.outOfSteps, contextFull: s.contextFull, text: s.text }));
    return;
  }
  for (const step of s.record) {
    console.log(`--- step (${step.kind}${step.guard ? `, ${step.guard}` : ''}${step.truncated ? ', cut' : ''})`);
    console.log(step.text);
    if (step.observation !== undefined) console.log(`>>> ${step.observation}`);
  }
  const why = s.contextFull ? `, the trajectory outgrew the student's context of ${s.context} tokens` : s.outOfSteps ? ', out of steps' : '';
  console.log(`answer: ${s.answer ?? '(none)'}  (${s.steps} steps${why}, checkpoint ${s.checkpoint})`);
}

/** `train sft|grpo`: which options belong to which training, and what a resume may not change. */
export async function cmdTrain(a: ParsedArgs): Promise<void> {
  if (a.positional !== 'sft' && a.positional !== 'grpo') throw new UsageError(`unknown training '${a.positional}': this build has 'sft' and 'grpo'`);
  if (a.options['minutes'] !== undefined && a.options['steps'] !== undefined) throw new UsageError('give --minutes or --steps, not both');
  const misplaced = (names: readonly string[]) => names.filter((n) => a.options[n] !== undefined).map((n) => `--${n}`);
  // A resumed run keeps what it learns with (its config.json); silently ignoring a new value would mislead.
  const notOnResume = (names: readonly string[]): void => {
    const given = a.options['resume'] ? misplaced(names) : [];
    if (given.length) {
      throw new UsageError(
        `--resume continues the run with the settings in its config.json; ${given.join(', ')} cannot change them ` +
          '(drop them to continue the run as it was, or start a new run with another --run)',
      );
    }
  };
  if (a.positional === 'sft') {
    // --seed (model init and data order) and --from (continued SFT) are the SFT table's too.
    const wrong = misplaced(Object.keys(GRPO_OPTIONS).filter((n) => !SFT_FLAG_NAMES.includes(n)));
    if (wrong.length) throw new UsageError(`${wrong.join(', ')}: GRPO option(s), not for 'train sft'`);
    notOnResume(['preset', 'recipe', 'steps', 'minutes', 'seed', 'from', 'traces', 'base', 'lora']);
    const lora = a.options['lora'];
    if (lora !== undefined) {
      // A spec that does not parse, r <= 0, an unknown target, no --base: one line, exit 2, nothing written.
      if (a.options['base'] === undefined) throw new BadInputError('--lora trains adapters on a frozen base model: give --base HF_DIR too');
      try {
        parseLoraSpec(String(lora));
      } catch (err) {
        throw new BadInputError((err as Error).message);
      }
    }
    if (a.options['from'] !== undefined && a.options['world'] !== undefined) throw new UsageError("--from continues on that run's data and world: drop --world");
    const base = a.options['base'];
    if (typeof base === 'string') {
      if (a.options['from'] !== undefined) throw new UsageError('--base and --from both give the starting weights: give one of them');
      // A folder the lab cannot start from is bad input: one line, exit 2, before anything is written.
      try {
        checkBaseFolder(path.resolve(base), dataFiles(a.options['run'] as string).tokenizer);
      } catch (err) {
        if (err instanceof InputError) throw new BadInputError(err.message);
        throw err;
      }
    }
    await runTrainCommand(a.options);
    return;
  }
  notOnResume([...Object.keys(GRPO_OPTIONS), 'steps', 'minutes']);
  if (a.options['world'] !== undefined || a.options['traces'] !== undefined) {
    throw new UsageError("'train grpo' takes the world of its --from run (recorded in its config.json): drop --world/--traces");
  }
  const wrong = misplaced(['preset', 'recipe', 'base', 'lora']);
  if (wrong.length) throw new UsageError(`${wrong.join(', ')}: the GRPO run takes the model and data of its --from run`);
  if (!a.options['resume'] && a.options['from'] === undefined) throw new UsageError("'train grpo' needs --from SFT_RUN (or --resume)");
  await runGrpoCommand(a.options);
}

export async function cmdEval(a: ParsedArgs): Promise<void> {
  await runEvalCommand(a.options);
}
