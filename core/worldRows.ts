// Rows of a world folder (corpus.jsonl, train.jsonl, heldout.jsonl, as `agent-lab world`
// and "Agent Lab: Build World" write them) and of a run's data/train.tasks.jsonl back into the
// core's shapes: the inverses of core/world.ts's passageToRow/taskToRow, checked, with the row
// named in every error. The one task-row validator: the CLI, the trainer and the extension use it.
import { isObj } from './protocol/isObj';
import { TASK_KINDS as KINDS, type Passage, type Task, type TaskHints, type TaskKind, type TaskOp } from './types';

const OPS: readonly TaskOp[] = [null, 'double', 'sum', 'compare', 'difference'];

const isStr = (v: unknown): v is string => typeof v === 'string';
const isPair = (v: unknown): v is [string, string] => Array.isArray(v) && v.length === 2 && isStr(v[0]) && isStr(v[1]);

export function rowToPassage(row: unknown, where: string): Passage {
  if (!isObj(row) || !isStr(row['doc_id']) || !isStr(row['text'])) {
    throw new Error(`${where}: expected {"doc_id": string, "text": string}`);
  }
  return { docId: row['doc_id'], text: row['text'] };
}

export function rowToTask(row: unknown, where: string): Task {
  const bad = (what: string) => new Error(`${where}: ${what}`);
  if (!isObj(row)) throw bad('expected a task object');
  const { question, gold, kind, hints } = row;
  if (!isStr(question) || !isStr(gold)) throw bad('"question" and "gold" must be strings');
  if (!KINDS.includes(kind as TaskKind)) throw bad(`"kind" must be one of ${KINDS.join(', ')}`);
  if (!isObj(hints)) throw bad('"hints" must be an object');
  const { queries, facts, op, names } = hints;
  if (!Array.isArray(queries) || !queries.every(isStr)) throw bad('"hints.queries" must be a list of strings');
  if (!Array.isArray(facts) || !facts.every(isPair)) throw bad('"hints.facts" must be a list of [entity, attribute] pairs');
  if (!OPS.includes(op as TaskOp)) throw bad(`"hints.op" must be ${OPS.slice(0, -1).map(String).join(', ')} or ${String(OPS[OPS.length - 1])}`);
  const h: TaskHints =
    names === undefined
      ? { queries: [...queries], facts: facts.map(([e, a]) => [e, a]), op: op as TaskOp }
      : isPair(names)
        ? { queries: [...queries], facts: facts.map(([e, a]) => [e, a]), op: op as TaskOp, names: [names[0], names[1]] }
        : (() => {
            throw bad('"hints.names" must be a pair of strings');
          })();
  return { question, gold, kind: kind as TaskKind, hints: h };
}
