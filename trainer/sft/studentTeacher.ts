// The trained student of a run folder as a teacher (self-distillation; with distill's
// "keep only solved rollouts" this is STaR-style filtering). Same AsyncTeacher interface as
// the HTTP teacher: given the wire-format prompt, it generates one assistant step the way
// the agent runtime does (grammar-constrained calls, role tokens forbidden, sampling at a
// temperature with a seeded generator) and records it in the canonical step form.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ToolEnv } from '../../core/env';
import { mulberry32 } from '../../core/mulberry32';
import { AsyncTeacher, TeacherConfigError, TeacherError, canonicalStep } from '../../core/teachers/teacher';
import { AgentRuntime } from '../agent/agentRuntime';
import { BackendAsk, initBackend } from '../model/backend';
import { loadCheckpoint } from '../run/checkpoint';
import { InputError } from '../../store/files';
import { StackModel } from '../model/model';
import { checkRunTokenizer, checkpointModelConfig, configModel, readRunConfig } from '../run/runGuards';
import { modelPolicy, tokenizerCallMask } from '../agent/policy';
import { dataFiles, loadTokenizer } from './prepare';

export const STUDENT_TEACHER_DEFAULTS = { temperature: 0.7, maxTurnTokens: 160, seed: 0 } as const;

export interface StudentTeacherOptions {
  runDir: string;
  /** 'latest' (default) or 'step-N'. */
  checkpoint?: string;
  /** > 0 so the samples of one task differ (default 0.7); 0 = greedy. */
  temperature?: number;
  seed?: number;
  backend?: BackendAsk;
  maxTurnTokens?: number;
}

export interface StudentTeacher {
  teacher: AsyncTeacher;
  /** The checkpoint's name (step-N) and step. */
  checkpoint: string;
  step: number;
  backend: string;
  dispose(): void;
}

/**
 * A runtime's student as an AsyncTeacher. Steps the student cannot finish become teacher
 * failures: `context` (the transcript outgrew its context), `malformed` / `off-grammar`.
 */
export function runtimeTeacher(runtime: AgentRuntime, o: { temperature: number; random: () => number; maxTurnTokens?: number }): AsyncTeacher {
  return async (prompt: string): Promise<string> => {
    // Yield first so progress output and Ctrl-C get a turn (on wasm generation is synchronous).
    await new Promise((resolve) => setImmediate(resolve));
    const turn = await runtime.continueTurnAsync(prompt, {
      temperature: o.temperature,
      random: o.random,
      constrained: true,
      maxTurnTokens: o.maxTurnTokens ?? STUDENT_TEACHER_DEFAULTS.maxTurnTokens,
    });
    if (turn.contextFull) throw new TeacherError('context', "the transcript no longer fits the student's context");
    try {
      return canonicalStep(turn.text);
    } catch (err) {
      if (err instanceof TeacherError && turn.truncated) throw new TeacherError(err.reason, `cut at ${o.maxTurnTokens ?? STUDENT_TEACHER_DEFAULTS.maxTurnTokens} tokens; ${err.detail}`);
      throw err;
    }
  };
}

/** Loads the run's tokenizer and checkpoint; throws TeacherConfigError when the run has no student. */
export async function makeStudentTeacher(o: StudentTeacherOptions): Promise<StudentTeacher> {
  const runDir = path.resolve(o.runDir);
  const temperature = o.temperature ?? STUDENT_TEACHER_DEFAULTS.temperature;
  if (!Number.isFinite(temperature) || temperature < 0 || temperature > 5) {
    throw new TeacherConfigError(`student temperature must be a number from 0 to 5 (got ${temperature})`);
  }
  if (!fs.existsSync(dataFiles(runDir).tokenizer)) throw new TeacherConfigError(`${runDir} is not a run folder with a student (no tokenizer.json)`);
  const which = o.checkpoint ?? 'latest';
  if (which !== 'latest' && !/^step-\d+$/.test(which)) throw new TeacherConfigError(`--checkpoint must be 'latest' or 'step-N' (got '${which}')`);
  let ck;
  try {
    ck = loadCheckpoint(runDir, which); // checked: shapes, finiteness (a NaN student would print <|bos|> forever)
  } catch (err) {
    throw new InputError(`cannot load the student's checkpoint '${which}' of ${runDir}: ${(err as Error).message}`);
  }
  const tokenizer = loadTokenizer(runDir);
  const run = readRunConfig(runDir);
  if (run) checkRunTokenizer(run.config, run.file, tokenizer);
  const cfg = checkpointModelConfig(ck, run ? { model: configModel(run.config, run.file), what: run.file } : null, tokenizer);
  let backend;
  try {
    backend = await initBackend(o.backend ?? 'auto');
  } catch (err) {
    throw new TeacherConfigError((err as Error).message);
  }
  const model = StackModel.fromWeights(cfg, ck.weights);
  // continueTurn never runs a tool: the runtime's environment is unused here.
  const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, new ToolEnv([]), tokenizerCallMask(tokenizer));
  const teacher = runtimeTeacher(runtime, {
    temperature,
    random: mulberry32(o.seed ?? STUDENT_TEACHER_DEFAULTS.seed),
    ...(o.maxTurnTokens !== undefined ? { maxTurnTokens: o.maxTurnTokens } : {}),
  });
  return { teacher, checkpoint: ck.name, step: ck.step, backend: backend.used, dispose: () => model.dispose() };
}
