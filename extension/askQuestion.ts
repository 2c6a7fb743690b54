// Ask the Student's question and its check (issue 35): the box is filled with a held-out
// question of the run's own world (the textbook's question only for a textbook run), "Ask
// Again" keeps the last question asked, and a question that is one of the world's tasks is
// checked against its gold. Node only (no vscode), so the unit tests read it directly.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { normalize } from '../core/distill';
import type { Task } from '../core/types';
import { makeTaskPool, makeTasks } from '../core/world';
import { rowToTask } from '../core/worldRows';
import { RUN_WORLD_DIR, WORLD_MANIFEST } from '../core/protocol/folders';

/** The textbook world's question (a run without a world of its own). */
export const TEXTBOOK_QUESTION = 'What is the RoPE base of Stack-100M? Use the corpus.';

export interface SplitTask {
  /** 'other': a task the world makes that neither split holds (the textbook's pool leaves 12 out). */
  split: 'heldout' | 'train' | 'dev' | 'other';
  task: Task;
}

/** Task rows of a JSONL file; rows that do not read as tasks are skipped (the run's own readers name them). */
function readTasks(file: string): Task[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out: Task[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      out.push(rowToTask(JSON.parse(line), `${file}:${i + 1}`));
    } catch {
      /* not a task row */
    }
  });
  return out;
}

/**
 * The tasks of a run's world, held-out first: its world/ copy (a user's world), else the
 * textbook world's seed-0 pool.
 */
export function runWorldTasks(runDir: string): SplitTask[] {
  const world = path.join(runDir, RUN_WORLD_DIR);
  if (fs.existsSync(path.join(world, WORLD_MANIFEST))) {
    return (['heldout', 'train', 'dev'] as const).flatMap((split) => readTasks(path.join(world, `${split}.jsonl`)).map((task) => ({ split, task })));
  }
  const pool = makeTaskPool(0);
  const inSplits = new Set([...pool.heldout, ...pool.train].map((t) => t.question));
  return [
    ...pool.heldout.map((task) => ({ split: 'heldout' as const, task })),
    ...pool.train.map((task) => ({ split: 'train' as const, task })),
    ...makeTasks(0).filter((t) => !inSplits.has(t.question)).map((task) => ({ split: 'other' as const, task })),
  ];
}

/** The question the box starts with: the last one asked, else the run's world's first held-out lookup (else its first task). */
export function questionToAsk(runDir: string, last?: string): string {
  if (last !== undefined && last.trim() !== '') return last;
  const tasks = runWorldTasks(runDir);
  if (!fs.existsSync(path.join(runDir, RUN_WORLD_DIR, WORLD_MANIFEST))) return TEXTBOOK_QUESTION;
  const held = tasks.filter((t) => t.split === 'heldout');
  return (held.find((t) => t.task.kind === 'lookup') ?? held[0] ?? tasks[0])?.task.question ?? TEXTBOOK_QUESTION;
}

export interface AnswerCheck {
  gold: string;
  split: SplitTask['split'];
  correct: boolean;
  /** The task's shape (lookup, sum ...). */
  kind: string;
}

/** The answer against the gold of the world's task with this question (as eval normalises both), or null when it is no task of the world. */
export function checkAnswer(runDir: string, question: string, answer: string | null): AnswerCheck | null {
  const q = question.trim();
  const hit = runWorldTasks(runDir).find((t) => t.task.question === q);
  if (!hit) return null;
  return { gold: hit.task.gold, split: hit.split, correct: answer !== null && normalize(answer) === normalize(hit.task.gold), kind: hit.task.kind };
}

/** What the message says after the answer: "correct" or the gold, and which split the task is in. */
export function checkText(check: AnswerCheck | null): string {
  if (!check) return '';
  const where = { heldout: 'a held-out task', train: 'a training task', dev: 'a dev task', other: 'a task of the world in no split' }[check.split];
  return check.correct ? ` Correct (${where}).` : ` Wrong: the gold answer is ${JSON.stringify(check.gold)} (${where}).`;
}

/**
 * A checked answer as one eval row (the inspector's format: question, gold, answer, solved): the
 * inspector marks it right or wrong and shows the gold, which a bare .transcript cannot carry.
 */
export function askedEvalRow(question: string, answer: string | null, steps: number, text: string, check: AnswerCheck): Record<string, unknown> {
  return { question, kind: check.kind, gold: check.gold, answer, solved: check.correct, steps, split: check.split, text };
}
