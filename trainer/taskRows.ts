// Task rows (world/*.jsonl, data/train.tasks.jsonl) back to Tasks, validated.
import { TASK_KINDS as KINDS, type Task, type TaskKind, type TaskOp } from '../core/types';

export interface TaskRowLike {
  question: unknown;
  gold: unknown;
  kind: unknown;
  hints: unknown;
}

export function taskFromRow(row: TaskRowLike, where = 'task row'): Task {
  const fail = (what: string): never => {
    throw new Error(`${where}: ${what}`);
  };
  if (typeof row.question !== 'string') fail('"question" must be a string');
  if (typeof row.gold !== 'string') fail('"gold" must be a string');
  if (!KINDS.includes(row.kind as TaskKind)) fail(`"kind" must be one of ${KINDS.join(', ')}`);
  const h = row.hints as { queries?: unknown; facts?: unknown; op?: unknown; names?: unknown } | null;
  if (typeof h !== 'object' || h === null) fail('"hints" must be an object');
  const queries = h!.queries;
  const facts = h!.facts;
  if (!Array.isArray(queries) || !queries.every((q) => typeof q === 'string')) fail('"hints.queries" must be strings');
  if (!Array.isArray(facts) || !facts.every((f) => Array.isArray(f) && f.length === 2 && f.every((x) => typeof x === 'string'))) {
    fail('"hints.facts" must be [entity, attribute] pairs');
  }
  const op = h!.op;
  if (op !== null && op !== 'double' && op !== 'sum' && op !== 'compare' && op !== 'difference') fail('"hints.op" must be null, double, sum, compare or difference');
  const names = h!.names;
  return {
    question: row.question as string,
    gold: row.gold as string,
    kind: row.kind as TaskKind,
    hints: {
      queries: queries as string[],
      facts: facts as [string, string][],
      op: op as TaskOp,
      ...(Array.isArray(names) ? { names: names as [string, string] } : {}),
    },
  };
}
