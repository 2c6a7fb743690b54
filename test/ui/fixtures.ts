// Fixtures for the UI tests and the inspector benchmark, generated (never hand-written):
//
// - Synthetic eval rows: the default world's tasks played by the stub teacher through the
//   real tools, with scripted departures injected (a wrong final answer, a repeated call, a
//   malformed call, a broken calculator expression, a search for nothing, a loop until the
//   steps run out and the harness forces an answer). Each row is verified like an eval row
//   (normalised exact match against gold), labelled with the failure taxonomy (the first
//   step where it departs from the teacher's own trajectory), rewarded with the seed's
//   reward, and carries the generated flags the runtime would write (harness pieces 0,
//   policy turns 1, tokenized with the default tokenizer). They are labelled synthetic
//   (`"synthetic": true`): they exercise the inspector, they are not a model's results.
// - A synthetic GRPO metrics.jsonl (flat at first, every group with zero spread, then
//   learning), for the curves panel's GRPO charts: no GRPO trainer exists yet, and the
//   run folder says it is synthetic (README.txt).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_MAX_STEPS, normalize, renderPrompt } from '../../core/distill';
import { ToolEnv } from '../../core/env';
import { makeStubTeacher } from '../../core/stubTeacher';
import { trainDefaultTokenizer } from '../../core/tokenizer';
import type { Task } from '../../core/types';
import { ASST, END, parseAssistantStep, renderCall, renderToolResult } from '../../core/wire';
import { buildCorpus, makeTaskPool } from '../../core/world';
import { FORCED_ANSWER_TEXT, FORMAT_ERROR, REPEATED_CALL } from '../../trainer/agent/agentRuntime';
import { reward } from '../../trainer/agent/eval';
import { pyJsonDumps } from '../../core/pyjson';

export type Variant = 'teacher' | 'wrong-final' | 'repeat' | 'malformed' | 'out-of-steps' | 'bad-calc' | 'no-results';
export const VARIANTS: readonly Variant[] = ['teacher', 'teacher', 'teacher', 'wrong-final', 'repeat', 'malformed', 'out-of-steps', 'bad-calc', 'no-results'];

export interface SyntheticRow {
  question: string;
  gold: string;
  answer: string | null;
  solved: boolean;
  kind: string;
  failure: string | null;
  steps: number;
  reward: number;
  text: string;
  generated: number[];
  synthetic: true;
  variant: Variant;
}

interface Played {
  text: string;
  turns: string[];
  answer: string | null;
  forced: boolean;
  generated: number[];
}

function play(task: Task, teacherFor: (prompt: string) => string, env: ToolEnv, variant: Variant, encode: (s: string) => number[]): Played {
  let text = renderPrompt(task.question);
  const generated: number[] = encode(text).map(() => 0);
  const harness = (s: string) => {
    text += s;
    for (const _ of encode(s)) generated.push(0);
  };
  const policy = (s: string) => {
    text += s;
    for (const _ of encode(s)) generated.push(1);
  };
  const turns: string[] = [];
  const calls = new Set<string>();
  let answer: string | null = null;
  for (let s = 0; s < DEFAULT_MAX_STEPS; s++) {
    let turn: string;
    try {
      turn = teacherFor(text + ASST).split(END)[0]!;
    } catch {
      turn = 'Thought: I do not know.\nAnswer: unknown';
    }
    const firstCall = turns.find((t) => t.includes('<|tool_call|>'));
    if (variant === 'repeat' && s === 1 && firstCall) turn = firstCall;
    if (variant === 'malformed' && s === 0) turn = turn.replace(/\}\}$/, '}');
    if (variant === 'no-results' && s === 0) turn = `Thought: I need a fact. I'll search the corpus.\n${renderCall('search', { query: 'zzyzx qwv', k: 2 })}`;
    if (variant === 'bad-calc' && turn.includes('"calc"')) turn = turn.replace(/"expr": "([^"]*)"/, (_m, e: string) => `"expr": "${e}-"`);
    const action = parseAssistantStep(turn);
    if (variant === 'out-of-steps' && action.kind === 'final') {
      // Where the teacher answers, keep searching (a new k each time: no RepeatedCall).
      turn = `Thought: Let me check once more.\n${renderCall('search', { query: task.hints.queries[0] ?? task.question.slice(0, 40), k: (s % 9) + 1 })}`;
    }
    if (action.kind === 'final' && variant === 'wrong-final') {
      turn = turn.replace(/Answer:.*$/s, `Answer: ${/^\d+$/.test(task.gold) ? String(Number(task.gold) + 7) : 'unknown'}`);
    }
    harness(ASST);
    policy(turn + END);
    turns.push(turn);
    const a = parseAssistantStep(turn);
    if (a.kind === 'final') {
      answer = a.answer;
      break;
    }
    let obs: string;
    if (a.kind === 'malformed') obs = FORMAT_ERROR;
    else {
      const key = pyJsonDumps({ tool: a.tool, args: a.args });
      if (calls.has(key)) obs = REPEATED_CALL;
      else {
        calls.add(key);
        obs = env.runTool(a);
      }
    }
    harness(renderToolResult(obs));
  }
  let forced = false;
  if (answer === null) {
    forced = true;
    harness(ASST + FORCED_ANSWER_TEXT);
    policy(` unknown${END}`);
    answer = 'unknown';
    turns.push(`${FORCED_ANSWER_TEXT} unknown`);
  }
  return { text, turns, answer, forced, generated };
}

function failureOf(played: Played, teacher: Played, solved: boolean): string | null {
  if (solved) return null;
  for (let i = 0; i < played.turns.length; i++) {
    const s = played.turns[i]!;
    const a = parseAssistantStep(s);
    if (played.forced && i === played.turns.length - 1) return 'out_of_steps';
    if (a.kind === 'malformed') return 'format';
    const t = teacher.turns[i];
    if (t === undefined) return played.forced ? 'out_of_steps' : 'final';
    if (s === t) continue;
    const ta = parseAssistantStep(t);
    if (ta.kind === 'tool') return ta.tool === 'calc' ? 'calc' : 'search';
    // The teacher answered here.
    return a.kind !== 'final' && played.forced ? 'out_of_steps' : 'final';
  }
  return played.forced ? 'out_of_steps' : 'final';
}

/** `n` synthetic eval rows over the default world's tasks (both splits), deterministic. */
export function syntheticEvalRows(n: number): SyntheticRow[] {
  const corpus = buildCorpus(0, 120);
  const pool = makeTaskPool(0, 200, 50);
  const tasks = [...pool.heldout, ...pool.train];
  const env = new ToolEnv(corpus);
  const teacher = makeStubTeacher(tasks);
  const tok = trainDefaultTokenizer();
  const encode = (s: string) => tok.encode(s);
  const clean = new Map<string, Played>();
  const played = new Map<string, Played>();
  const rows: SyntheticRow[] = [];
  for (let i = 0; i < n; i++) {
    const task = tasks[i % tasks.length]!;
    const variant = VARIANTS[(i + Math.floor(i / tasks.length)) % VARIANTS.length]!;
    let t = clean.get(task.question);
    if (!t) clean.set(task.question, (t = play(task, teacher, env, 'teacher', encode)));
    const key = `${variant}\u0000${task.question}`;
    let p = variant === 'teacher' ? t : played.get(key);
    if (!p) played.set(key, (p = play(task, teacher, env, variant, encode)));
    const solved = p.answer !== null && normalize(p.answer) === normalize(task.gold);
    const steps = p.turns.length - (p.forced ? 1 : 0);
    rows.push({
      question: task.question,
      gold: task.gold,
      answer: p.answer,
      solved,
      kind: task.kind,
      failure: failureOf(p, t, solved),
      steps,
      reward: reward(solved, steps),
      text: p.text,
      generated: p.generated,
      synthetic: true,
      variant,
    });
  }
  return rows;
}

export function writeJsonl(file: string, rows: readonly unknown[]): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
}

/** A synthetic GRPO run: `steps` steps; the first third every group has zero reward spread. */
export function writeSyntheticGrpoRun(dir: string, steps = 40): void {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'README.txt'),
    'SYNTHETIC metrics for the Agent Lab UI tests (test/ui/fixtures.ts): not a training run.\n' +
      'The first third shows the failure mode of docs/architecture.md (every group scores the same: zero spread, no gradient).\n',
  );
  const lines: string[] = [];
  const flat = Math.floor(steps / 3);
  for (let s = 1; s <= steps; s++) {
    const learning = s > flat;
    const progress = learning ? (s - flat) / (steps - flat) : 0;
    const mean = learning ? -0.04 + 0.6 * progress + 0.03 * Math.sin(s) : 0;
    const std = learning ? 0.25 + 0.1 * Math.cos(s / 3) : 0;
    lines.push(
      JSON.stringify({
        phase: 'grpo',
        step: s,
        time: s * 4.2,
        reward_mean: mean,
        reward_std: std,
        accuracy: Math.max(0, mean),
        frac_reward_zero_std: learning ? Math.max(0, 0.5 - 0.5 * progress) : 1,
        skipped_groups: learning ? 1 : 4,
        kl: learning ? 0.002 + 0.01 * progress : 0,
        clip_ratio: 0,
        gen_tokens: 2400,
        completion_len: learning ? 60 - 20 * progress : 3,
        steps_mean: 2.5,
        entropy: 1.2 - 0.4 * progress,
        tokens_per_s: 900,
        synthetic: true,
      }),
    );
    if (s % 10 === 0) lines.push(JSON.stringify({ phase: 'eval', step: s, time: s * 4.2, split: 'heldout', accuracy: learning ? 0.1 + 0.3 * progress : 0.06, by_kind: {} }));
  }
  fs.writeFileSync(path.join(dir, 'metrics.jsonl'), lines.join('\n') + '\n');
}

if (require.main === module) {
  const n = Number(process.argv[2] ?? 90);
  const rows = syntheticEvalRows(n);
  const byVariant = new Map<string, { n: number; solved: number; failures: Record<string, number> }>();
  for (const r of rows) {
    const v = byVariant.get(r.variant) ?? { n: 0, solved: 0, failures: {} };
    v.n++;
    if (r.solved) v.solved++;
    if (r.failure) v.failures[r.failure] = (v.failures[r.failure] ?? 0) + 1;
    byVariant.set(r.variant, v);
  }
  console.log(JSON.stringify(Object.fromEntries(byVariant), null, 1));
}
