// One question put to a run's student through the real loop (`agent-lab run`, Ask the
// Student): the run's checkpoint and tokenizer checked against its config.json, the tools
// searching the run's own world (or the folder the job names), and the trajectory returned
// whole. Nothing is written: the editor saves the transcript, the CLI prints it.
import * as path from 'node:path';
import type { AskJobSpec, AskStep, JobResult } from '../../core/protocol/worker';
import { ToolEnv } from '../../core/env';
import { buildCorpus } from '../../core/world';
import { renderPrompt } from '../../core/distill';
import { worldEnv, worldTemplates } from '../../core/worlds';
import { CONFIG_FILE } from '../../core/protocol/folders';
import { readWorldFolder, runWorld } from '../../store/worldFolder';
import { AgentRuntime, type StepRecord } from './agentRuntime';
import { modelPolicy, tokenizerCallMask } from './policy';
import { BackendAsk, initBackend } from '../model/backend';
import { StackModel } from '../model/model';
import { loadCheckpoint } from '../run/checkpoint';
import { checkRunTokenizer, checkpointModelConfig, configModel, readRunConfig } from '../run/runGuards';
import { type JobHooks, UserError } from '../run/jobRun';
import { loadTokenizer } from '../sft/prepare';

/** The question's prompt alone fills the student's context: there is nothing to answer with (the CLI exits 1). */
export class QuestionTooLong extends Error {}

/**
 * Asks the student of `spec.runDir` one question. Refusals: `UserError` for a folder that is
 * no run or holds no trained model, a bad checkpoint name or a backend that cannot start;
 * `InputError` for a damaged run file; `QuestionTooLong` for a question the context cannot hold.
 */
export async function runAskJob(spec: AskJobSpec, hooks: JobHooks): Promise<JobResult<'ask'>> {
  const runDir = path.resolve(spec.runDir);
  const configFile = path.join(runDir, CONFIG_FILE);
  const run = readRunConfig(runDir);
  if (!run) throw new UserError(`${runDir} is not a run folder (no ${CONFIG_FILE})`);
  const configured = configModel(run.config, configFile);
  if (!configured) throw new UserError(`${runDir} holds no trained model; train one with agent-lab train sft --run ${runDir}`);
  const which = spec.checkpoint ?? 'latest';
  if (which !== 'latest' && !/^step-\d+$/.test(which)) throw new UserError(`--checkpoint must be 'latest' or 'step-N' (got '${which}')`);
  // The files first (a damaged one fails in a fraction of a second), then the backend.
  const ck = loadCheckpoint(runDir, which); // damaged or NaN: an InputError naming the file
  const tokenizer = loadTokenizer(runDir);
  checkRunTokenizer(run.config, configFile, tokenizer);
  const cfg = checkpointModelConfig(ck, { model: configured, what: configFile }, tokenizer);
  let backend;
  try {
    backend = await initBackend((spec.backend ?? 'auto') as BackendAsk);
  } catch (err) {
    throw new UserError((err as Error).message);
  }
  hooks.started(backend.used);
  const model = StackModel.fromWeights(cfg, ck.weights);
  try {
    // The tools search the run's own world (or the folder the job names); the textbook's by default.
    const world = spec.world !== undefined ? readWorldFolder(spec.world) : runWorld(runDir);
    const env = world ? worldEnv(world.id) : new ToolEnv(buildCorpus());
    const context = model.config.maxSeq;
    const promptTokens = tokenizer.encode(renderPrompt(spec.question, env.systemPrompt)).length;
    if (promptTokens + 2 > context) {
      throw new QuestionTooLong(`the question does not fit the student's context: the prompt is ${promptTokens} tokens, the context ${context} (shorten the question)`);
    }
    const runtime = new AgentRuntime(modelPolicy(model, tokenizer.vocabSize), tokenizer, env, tokenizerCallMask(tokenizer, world ? worldTemplates(world.id) : undefined));
    // One episode has no step boundary to stop at: a cancel is honoured by the caller killing the job.
    const ep = await runtime.runAsync({ question: spec.question });
    return {
      kind: 'ask',
      cancelled: hooks.isCancelled(),
      summary: {
        question: spec.question,
        answer: ep.answer,
        steps: ep.steps,
        outOfSteps: ep.outOfSteps,
        contextFull: ep.contextFull,
        text: ep.text,
        record: ep.record.map(askStep),
        checkpoint: ck.name,
        context,
      },
    };
  } finally {
    model.dispose();
  }
}

/** A step as the summary carries it: what `agent-lab run` prints (no absent keys). */
function askStep(step: StepRecord): AskStep {
  return {
    kind: step.kind,
    text: step.text,
    ...(step.guard ? { guard: step.guard } : {}),
    ...(step.truncated ? { truncated: true } : {}),
    ...(step.observation !== undefined ? { observation: step.observation } : {}),
  };
}
