// Verifiable rewards for RL and their audit. The seed's reward is exact match minus a step
// penalty; a user may add a format bonus (additive, capped on wrong answers) or — to see the
// failure it causes — a multiplicative format gate. The audit scores a fixed group of
// synthetic trajectories before any rollout: a reward whose group has no spread, or that
// ranks a wrong answer above a right one, gives GRPO no gradient or the wrong one.
import { DEFAULT_MAX_STEPS, normalize, rollout } from './distill';
import { ToolEnv } from './env';
import { makeStubTeacher } from './stubTeacher';
import type { Task } from './types';
import { GRPO_OPTION_DEFAULTS } from './protocol/grpoOptions';
import { buildCorpus, makeTaskPool } from './world';
import { ASST, END, FORCED_ANSWER_TEXT, TOOL_CALL, assistantTurns, parseAssistantStep, renderCall, renderToolResult } from './wire';


export interface RewardSpec {
  /** Reward for an exact-match answer (after normalize). */
  exact: number;
  /** lambda in - lambda * steps / maxSteps. */
  stepPenalty: number;
  /** Added when the trajectory is well formed (every call parsed, an answer of the policy's own). */
  formatBonus: number;
  /** A wrong answer's total is at most this (so formatting alone never pays); null: no cap. */
  wrongCap: number | null;
  /** Multiplicative gate: the whole reward times [the answer is wrapped in <answer>...</answer>]. */
  gate: 'none' | 'answer-tag';
}

/** The seed's reward: exact match - 0.05 * steps / max_steps. */
export const DEFAULT_REWARD: RewardSpec = { exact: 1, stepPenalty: 0.05, formatBonus: 0, wrongCap: null, gate: 'none' };
/** The GRPO option table's default reward (core/protocol/grpoOptions.ts), DEFAULT_REWARD written out. */
export const DEFAULT_REWARD_TEXT: string = GRPO_OPTION_DEFAULTS.reward;

export class RewardSpecError extends Error {}

/**
 * Parses a reward description: comma-separated parts `exact[=W]`, `step=L`, `format=B`,
 * `cap=C`, `gate=answer-tag`. Parts not named are off (no exact match unless `exact` is
 * given). E.g. the default `exact,step=0.05`; `exact,step=0.05,format=0.1,cap=0`.
 */
export function parseRewardSpec(text: string): RewardSpec {
  const spec: RewardSpec = { exact: 0, stepPenalty: 0, formatBonus: 0, wrongCap: null, gate: 'none' };
  const parts = text.split(',').map((p) => p.trim());
  if (parts.every((p) => p === '')) throw new RewardSpecError('reward: empty description (e.g. exact,step=0.05)');
  for (const part of parts) {
    if (part === '') continue;
    const [name, value] = part.split('=', 2).map((x) => x.trim()) as [string, string | undefined];
    const num = (): number => {
      const v = value === undefined ? NaN : Number(value);
      if (value === undefined || value === '' || !Number.isFinite(v)) {
        throw new RewardSpecError(`reward: '${part}' needs a number (${name}=<number>)`);
      }
      return v;
    };
    switch (name) {
      case 'exact':
        spec.exact = value === undefined ? 1 : num();
        break;
      case 'step':
        spec.stepPenalty = num();
        break;
      case 'format':
        spec.formatBonus = num();
        break;
      case 'cap':
        spec.wrongCap = num();
        break;
      case 'gate':
        if (value !== 'answer-tag') throw new RewardSpecError(`reward: unknown gate '${value ?? ''}' (known: answer-tag)`);
        spec.gate = 'answer-tag';
        break;
      default:
        throw new RewardSpecError(`reward: unknown part '${name}' in '${text}' (known: exact, step, format, cap, gate)`);
    }
  }
  return spec;
}

export function formatRewardSpec(s: RewardSpec): string {
  const parts: string[] = [];
  if (s.exact !== 0) parts.push(s.exact === 1 ? 'exact' : `exact=${s.exact}`);
  if (s.stepPenalty !== 0) parts.push(`step=${s.stepPenalty}`);
  if (s.formatBonus !== 0) parts.push(`format=${s.formatBonus}`);
  if (s.wrongCap !== null) parts.push(`cap=${s.wrongCap}`);
  if (s.gate !== 'none') parts.push(`gate=${s.gate}`);
  return parts.join(',') || '(nothing)';
}

/** What a reward looks at in one trajectory. */
export interface Completion {
  /** The final answer (the policy's or after the forced prompt); null when none was given. */
  answer: string | null;
  /** Assistant turns the policy opened (the forced answer turn not counted). */
  steps: number;
  /** Every turn parsed as a call or an answer, none cut, and the answer is the policy's own. */
  wellFormed: boolean;
  /** The text of the last assistant turn (what a format gate inspects). */
  finalText: string;
}

/** Reads a trajectory in the wire format the way the reward sees an RL episode. */
export function completionFromTranscript(text: string): Completion {
  const turns = assistantTurns(text);
  const last = turns.at(-1) ?? '';
  const forced = last.startsWith(FORCED_ANSWER_TEXT);
  const own = forced ? turns.slice(0, -1) : turns;
  const actions = own.map((t) => parseAssistantStep(t));
  const lastAction = actions.at(-1);
  // The forced attempt's answer is what the policy wrote after the harness's `Answer:` (the
  // seed's decode(...).strip()); nothing written is no answer.
  const forcedAnswer = forced ? last.slice(FORCED_ANSWER_TEXT.length).trim() : '';
  const answer = forced ? forcedAnswer || null : lastAction?.kind === 'final' ? lastAction.answer : null;
  const wellFormed =
    !forced && answer !== null && HAS_ANSWER.test(last) && actions.every((a) => a.kind !== 'malformed') && !text.endsWith(ASST);
  return { answer, steps: own.length, wellFormed, finalText: last };
}

const ANSWER_TAG = /<answer>[^]*?<\/answer>/;
/** An `Answer:` with something after it (an empty one is not a well-formed answer). */
const HAS_ANSWER = /Answer:\s*\S/;

export interface RewardBreakdown {
  total: number;
  correct: boolean;
}

export function scoreCompletion(c: Completion, gold: string, spec: RewardSpec, maxSteps = DEFAULT_MAX_STEPS): RewardBreakdown {
  const correct = c.answer !== null && normalize(c.answer) === normalize(gold);
  let r = (correct ? spec.exact : 0) - (spec.stepPenalty * c.steps) / maxSteps;
  if (c.wellFormed) r += spec.formatBonus;
  if (!correct && spec.wrongCap !== null) r = Math.min(r, spec.wrongCap);
  if (spec.gate === 'answer-tag' && !ANSWER_TAG.test(c.finalText)) r *= 0;
  return { total: r === 0 ? 0 : r, correct };
}

/** GRPO's group-relative advantages: (r - mean) / (std + 1e-6), population std (ddof 0). */
export function groupAdvantages(rewards: readonly number[]): { advantages: number[]; mean: number; std: number } {
  const n = rewards.length;
  const mean = rewards.reduce((a, b) => a + b, 0) / Math.max(1, n);
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) * (r - mean), 0) / Math.max(1, n));
  return { advantages: rewards.map((r) => (r - mean) / (std + 1e-6)), mean, std };
}

/** A group is skipped when all its advantages are ~0 (every member scored the same). */
export const ZERO_ADVANTAGE = 1e-6;

// ---- the audit ---------------------------------------------------------------------------

export type AuditMember =
  | 'correct'
  | 'correct but wasteful'
  | 'wrong'
  | 'malformed call'
  | 'no answer'
  | 'empty answer'
  | 'format-only spam';

export interface AuditRow {
  member: AuditMember;
  steps: number;
  answer: string | null;
  wellFormed: boolean;
  reward: number;
  transcript: string;
}

export interface AuditCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface RewardAudit {
  reward: string;
  task: { question: string; gold: string };
  rows: AuditRow[];
  mean: number;
  std: number;
  checks: AuditCheck[];
  /** Not failures, but a reader should know (e.g. a multiplicative gate). */
  warnings: string[];
  ok: boolean;
}

/** The audit's minimum group std (the Contract's "clearly above 0"). */
export const AUDIT_MIN_STD = 0.1;

function wrongValue(gold: string): string {
  const n = Number(gold);
  if (Number.isFinite(n) && gold.trim() !== '') return String(n + 1);
  return gold === 'yes' ? 'no' : gold === 'no' ? 'yes' : `not ${gold}`;
}

/**
 * The fixed synthetic group on one task: the stub teacher's solved trajectory and variants
 * of it, each a transcript in the wire format (so the audit reads them as RL episodes are read).
 */
export function auditGroup(task?: Task, maxSteps = DEFAULT_MAX_STEPS): { task: Task; members: { member: AuditMember; transcript: string }[] } {
  const pool = makeTaskPool(0);
  const t = task ?? pool.train.find((x) => x.kind === 'sum') ?? pool.train[0]!;
  const env = new ToolEnv(buildCorpus());
  const solved = rollout(t, makeStubTeacher([t]), env, maxSteps).transcript;
  const lastAsst = solved.lastIndexOf(ASST);
  const body = solved.slice(0, lastAsst); // everything before the final answer turn
  const finalTurn = solved.slice(lastAsst + ASST.length, solved.lastIndexOf(END));
  const thought = finalTurn.slice(0, finalTurn.indexOf('Answer:'));
  const answerTurn = (answer: string) => `${ASST}${thought}Answer: ${answer}${END}`;
  // Redundant calls that change nothing (a wasteful but correct trajectory).
  let wasteful = body;
  for (let k = 0; wasteful.split(ASST).length - 1 < maxSteps - 1; k++) {
    const q = `${t.hints.queries[0] ?? 'Stack-100M'} ${k + 1}`;
    const call = renderCall('search', { query: q, k: 1 });
    wasteful += `${ASST}Thought: let me check again.\n${call}${renderToolResult(env.runTool({ kind: 'tool', thought: '', tool: 'search', args: { query: q, k: 1 } }))}`;
  }
  const malformedCall = `${ASST}Thought: compute it.\n${TOOL_CALL}{"tool": "calc", "args": {"expr": ${END}${renderToolResult('FormatError: emit a valid JSON tool call.')}`;
  let outOfSteps = body;
  while (outOfSteps.split(ASST).length - 1 < maxSteps) outOfSteps += malformedCall;
  const members: { member: AuditMember; transcript: string }[] = [
    { member: 'correct', transcript: solved },
    { member: 'correct but wasteful', transcript: wasteful + answerTurn(t.gold) },
    { member: 'wrong', transcript: body + answerTurn(wrongValue(t.gold)) },
    { member: 'malformed call', transcript: body + malformedCall + `${ASST}${FORCED_ANSWER_TEXT} ${wrongValue(t.gold)}${END}` },
    // Out of steps and the forced attempt says nothing: no answer at all.
    { member: 'no answer', transcript: outOfSteps + `${ASST}${FORCED_ANSWER_TEXT}${END}` },
    { member: 'empty answer', transcript: body + `${ASST}${thought}Answer:${END}` },
    { member: 'format-only spam', transcript: renderPromptOf(solved) + `${ASST}Thought: Thought: Thought:\nAnswer: Answer: <answer></answer>${END}` },
  ];
  return { task: t, members };
}

function renderPromptOf(transcript: string): string {
  return transcript.slice(0, transcript.indexOf(ASST));
}

/** Scores the synthetic group with `spec` and checks spread and orderings. */
export function auditReward(spec: RewardSpec, opts: { task?: Task; maxSteps?: number } = {}): RewardAudit {
  const maxSteps = opts.maxSteps ?? DEFAULT_MAX_STEPS;
  const { task, members } = auditGroup(opts.task, maxSteps);
  const rows: AuditRow[] = members.map(({ member, transcript }) => {
    const c = completionFromTranscript(transcript);
    return { member, steps: c.steps, answer: c.answer, wellFormed: c.wellFormed, reward: scoreCompletion(c, task.gold, spec, maxSteps).total, transcript };
  });
  const { mean, std } = groupAdvantages(rows.map((r) => r.reward));
  const r = (m: AuditMember) => rows.find((x) => x.member === m)!.reward;
  const checks: AuditCheck[] = [
    {
      name: `group std >= ${AUDIT_MIN_STD}`,
      ok: std >= AUDIT_MIN_STD,
      detail: `std ${std.toFixed(4)}` + (std < 1e-9 ? ': every member scores the same, so every advantage is 0 and GRPO has no gradient' : ''),
    },
    { name: 'correct > wrong', ok: r('correct') > r('wrong'), detail: `${fmt(r('correct'))} vs ${fmt(r('wrong'))}` },
    {
      name: 'efficient > wasteful',
      ok: r('correct') > r('correct but wasteful'),
      detail: `${fmt(r('correct'))} vs ${fmt(r('correct but wasteful'))}`,
    },
  ];
  const warnings: string[] = [];
  if (spec.gate !== 'none') {
    warnings.push(
      `multiplicative gate (${spec.gate}): a trajectory that fails the gate scores 0 whatever else it did; ` +
        'when the policy never passes it, every group has zero spread. Prefer an additive format bonus with a cap (format=B,cap=C).',
    );
  }
  if (spec.exact === 0) warnings.push('no exact-match term: the reward does not look at whether the answer is right');
  const best = Math.max(...rows.filter((x) => x.member !== 'correct').map((x) => x.reward));
  if (best >= r('correct')) {
    const who = rows.filter((x) => x.member !== 'correct' && x.reward >= r('correct')).map((x) => x.member);
    warnings.push(`${who.join(', ')} score(s) at least as much as the correct trajectory`);
  }
  return { reward: formatRewardSpec(spec), task: { question: task.question, gold: task.gold }, rows, mean, std, checks, warnings, ok: checks.every((c) => c.ok) };
}

function fmt(x: number): string {
  return x.toFixed(4);
}

/** The audit as a table for a terminal. */
export function formatAudit(a: RewardAudit): string {
  const lines: string[] = [];
  lines.push(`Reward audit: ${a.reward}`);
  lines.push(`Task: ${a.task.question} (gold ${a.task.gold})`);
  lines.push('');
  const w = Math.max(...a.rows.map((r) => r.member.length), 'member'.length);
  lines.push(`${'member'.padEnd(w)}  steps  well-formed  answer        reward`);
  for (const r of a.rows) {
    const ans = r.answer === null ? '(none)' : JSON.stringify(r.answer);
    lines.push(`${r.member.padEnd(w)}  ${String(r.steps).padStart(5)}  ${(r.wellFormed ? 'yes' : 'no').padEnd(11)}  ${ans.slice(0, 12).padEnd(12)}  ${r.reward.toFixed(4).padStart(7)}`);
  }
  lines.push('');
  lines.push(`group mean ${a.mean.toFixed(4)}, std ${a.std.toFixed(4)} (population)`);
  for (const c of a.checks) lines.push(`${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail}`);
  for (const x of a.warnings) lines.push(`WARN  ${x}`);
  lines.push(a.ok ? 'The reward can rank this group: GRPO gets a gradient from it.' : 'The reward FAILS the audit: a GRPO run with it would learn nothing or the wrong thing.');
  return lines.join('\n');
}
