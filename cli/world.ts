// `agent-lab world`: the textbook's world, or a user's from --facts FILE or --docs DIR
// --tasks FILE (docs/worlds.md). The world job (trainer/run/worldJob.ts) does the work, as
// it does for the editor's Build World in the worker; this turns the options into its spec
// and prints its lines. A bad file (one line naming file, line and field; exit 2) writes nothing.
import { BadInputError, ParsedArgs, UsageError } from './args';
import { TASK_SHAPES } from '../core/types';
import type { WorldJobSpec } from '../core/protocol/worker';
import { WorldSourceError } from '../store/worldBuild';
import { type JobHooks, runJob } from '../trainer/run/jobs';
import { UserError } from '../trainer/run/jobRun';
import { trainJobHooks } from './train';

type Options = Record<string, string | number | boolean | undefined>;

export const WORLD_USAGE =
  'agent-lab world [--seed N] [--distractors N] [--train N] [--heldout N] --out DIR          (the textbook world)\n' +
  `  agent-lab world --facts FILE [--shapes ${TASK_SHAPES.join(',')}] [--distractors N] [--split train=N,heldout=N,dev=N] [--seed N] --out DIR\n` +
  '  agent-lab world --docs DIR --tasks FILE [--split train=N,heldout=N,dev=N] [--seed N] --out DIR      (formats: docs/worlds.md)\n' +
  '      either with [--tools FILE]: an MCP tool list narrowing search/calc (docs/worlds.md, "Tools")';

const TEXTS = ['facts', 'docs', 'tasks', 'tools', 'split', 'shapes'] as const;
const COUNTS = ['seed', 'distractors', 'train', 'heldout'] as const;

/** The job the options ask for (cli/commands.ts has checked each option's type). */
function worldSpecOf(o: Options): WorldJobSpec {
  const spec: WorldJobSpec = { kind: 'world', out: o['out'] as string };
  for (const k of TEXTS) if (o[k] !== undefined) spec[k] = String(o[k]);
  for (const k of COUNTS) if (typeof o[k] === 'number') spec[k] = o[k];
  return spec;
}

/** The job's reports as `agent-lab world` has always printed them: no progress or backend line, a warning as "warning:". */
function worldHooks(): JobHooks {
  const hooks = trainJobHooks(true);
  return { ...hooks, started: () => {}, log: (level, message) => (level === 'warn' ? console.error(`[agent-lab] warning: ${message}`) : hooks.log(level, message)) };
}

/** `world`: the textbook's world (seeded), or a user's from --facts or --docs and --tasks. */
export async function cmdWorld(a: ParsedArgs): Promise<void> {
  let lines: string[];
  try {
    lines = (await runJob(worldSpecOf(a.options), worldHooks())).summary.lines;
  } catch (err) {
    if (err instanceof UserError) throw new UsageError(err.message);
    if (err instanceof WorldSourceError) throw new BadInputError(err.message);
    throw err;
  }
  for (const line of lines) console.log(line);
}
