// The Trajectory Inspector's data: a `.transcript`, a dataset (distilled rows
// {task, text, kind}) or eval rows ({question, gold, answer, solved, kind, failure, steps,
// reward, text, generated}) parsed into list summaries (small, for 10,000 rows) and, on
// demand, step cards (thought, tool call, observation, guard, answer). Pure: no vscode,
// no Node; the panel (inspector.ts) reads the file and posts the results.
import type { GuardName, SourceKind, StepCard, TrajectoryDetail, TrajectorySummary } from '../protocol/panels';
import { JsonValue, pyJsonDumps } from '../pyjson';
import { ASST, END, FORCED_ANSWER_TEXT, SYS, TOOL_CALL, TOOL_RESULT, USER, parseAssistantStep } from '../wire';
import { isObj } from '../protocol/isObj';

/** The guards' observations start with their names (core/wire.ts holds the harness's texts). */
const GUARD_PREFIXES: readonly [string, GuardName][] = [
  ['RepeatedCall:', 'RepeatedCall'],
  ['FormatError:', 'FormatError'],
  ['ToolError:', 'ToolError'],
  ['CalcError', 'CalcError'],
];

export interface Turn {
  role: 'system' | 'user' | 'assistant' | 'tool_result';
  /** Offset of the role marker. */
  start: number;
  /** Content [contentStart, contentEnd). */
  contentStart: number;
  contentEnd: number;
  /** After the closing `<|end|>` (or the content when unterminated). */
  end: number;
  closed: boolean;
}

const ROLE_OF: Record<string, Turn['role']> = { [SYS]: 'system', [USER]: 'user', [ASST]: 'assistant', [TOOL_RESULT]: 'tool_result' };
const OPENERS = [SYS, USER, ASST, TOOL_RESULT];

/** The turns of a transcript, in order. A turn ends at its `<|end|>`, or where the next turn opens. */
export function splitTurns(text: string): Turn[] {
  const turns: Turn[] = [];
  // The next occurrence of each opener (and of <|end|>) at or after the scan position,
  // refreshed only when passed: one pass over the text, not one search per marker per turn.
  const next = OPENERS.map((m) => text.indexOf(m));
  let nextEnd = text.indexOf(END);
  const firstOpener = (from: number): number => {
    let best = -1;
    for (let k = 0; k < OPENERS.length; k++) {
      if (next[k]! !== -1 && next[k]! < from) next[k] = text.indexOf(OPENERS[k]!, from);
      if (next[k]! !== -1 && (best < 0 || next[k]! < next[best]!)) best = k;
    }
    return best;
  };
  let i = 0;
  while (i < text.length) {
    const k = firstOpener(i);
    if (k < 0) break;
    const at = next[k]!;
    const marker = OPENERS[k]!;
    const contentStart = at + marker.length;
    const n = firstOpener(contentStart);
    const limit = n < 0 ? text.length : next[n]!;
    if (nextEnd !== -1 && nextEnd < contentStart) nextEnd = text.indexOf(END, contentStart);
    const closed = nextEnd >= 0 && nextEnd < limit;
    const contentEnd = closed ? nextEnd : limit;
    const end = closed ? nextEnd + END.length : limit;
    turns.push({ role: ROLE_OF[marker]!, start: at, contentStart, contentEnd, end, closed });
    i = end;
  }
  return turns;
}

export function guardOf(observation: string): GuardName | null {
  if (observation === 'NoResults') return 'NoResults';
  for (const [prefix, name] of GUARD_PREFIXES) if (observation.startsWith(prefix)) return name;
  return null;
}

const dump = (v: JsonValue): string => pyJsonDumps(v, { itemSeparator: ', ', keySeparator: ': ' });

/** `search("STaR publication year", 2)`: the values of the arguments, in order. */
export function compactCall(tool: string, args: Record<string, JsonValue>): string {
  return `${tool}(${Object.values(args).map(dump).join(', ')})`;
}

/** The step cards of a transcript (one per assistant turn) and its question. */
export function parseSteps(text: string): { question: string; steps: StepCard[]; problems: string[]; calls: string[] } {
  const turns = splitTurns(text);
  const steps: StepCard[] = [];
  const calls: string[] = [];
  const problems: string[] = [];
  let question = '';
  for (let t = 0; t < turns.length; t++) {
    const turn = turns[t]!;
    const content = text.slice(turn.contentStart, turn.contentEnd);
    if (turn.role === 'user' && question === '') question = content;
    if (turn.role !== 'assistant') {
      if (turn.role === 'tool_result' && (t === 0 || turns[t - 1]!.role !== 'assistant')) {
        problems.push(`a tool result at offset ${turn.start} follows no assistant step`);
      }
      continue;
    }
    if (!turn.closed) problems.push(`the assistant turn at offset ${turn.start} has no <|end|>`);
    const action = parseAssistantStep(content);
    const harness = content.startsWith(FORCED_ANSWER_TEXT);
    const next = turns[t + 1];
    const result = next && next.role === 'tool_result' ? next : undefined;
    const observation = result ? text.slice(result.contentStart, result.contentEnd) : null;
    const card: StepCard = {
      n: steps.length + 1,
      thought: action.thought,
      call: action.kind === 'tool' ? { tool: action.tool, args: dump(action.args) } : null,
      malformed: action.kind === 'malformed' ? action.raw : null,
      observation,
      guard: harness ? 'ForcedAnswer' : observation !== null ? guardOf(observation) : null,
      answer: action.kind === 'final' ? action.answer : null,
      harness,
      start: turn.start,
      end: result ? result.end : turn.end,
    };
    // A turn whose text has a call marker but no parsable call is malformed even when the
    // wire parse fell through to an answer (it never does; kept for safety).
    if (card.call === null && card.malformed === null && content.includes(TOOL_CALL)) card.malformed = content;
    if (action.kind === 'tool') calls.push(compactCall(action.tool, action.args));
    else if (card.malformed !== null) calls.push(`malformed: ${card.malformed.slice(0, 80)}`);
    steps.push(card);
  }
  return { question, steps, problems, calls };
}

// ---- sources -----------------------------------------------------------------------------

export interface ParsedRow {
  summary: TrajectorySummary;
  /** The transcript. */
  text: string;
}

export interface ParsedSource {
  kind: SourceKind;
  rows: ParsedRow[];
  /** Lines that are not rows (not JSON, no `text`), said once each. */
  problems: string[];
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/**
 * What the list needs of a transcript, cheaply (10,000 rows load in well under a second):
 * the question, the number of assistant steps, the calls (compact), the guards, the last
 * answer. Calls are read with the native JSON parser; only a call it refuses goes through
 * the wire format's own parse (the detail view always uses it).
 */
export function summarizeText(text: string): { question: string; steps: number; calls: string[]; guards: GuardName[]; answer: string | null } {
  const turns = splitTurns(text);
  let question = '';
  let steps = 0;
  const calls: string[] = [];
  const guards: GuardName[] = [];
  const addGuard = (g: GuardName | null) => {
    if (g && !guards.includes(g)) guards.push(g);
  };
  let lastAssistant: Turn | null = null;
  for (let t = 0; t < turns.length; t++) {
    const turn = turns[t]!;
    if (turn.role === 'user') {
      if (question === '') question = text.slice(turn.contentStart, turn.contentEnd);
      continue;
    }
    if (turn.role === 'tool_result') {
      const obs = text.slice(turn.contentStart, Math.min(turn.contentEnd, turn.contentStart + 16));
      addGuard(guardOf(obs));
      continue;
    }
    if (turn.role !== 'assistant') continue;
    steps++;
    lastAssistant = turn;
    if (text.startsWith(FORCED_ANSWER_TEXT, turn.contentStart)) addGuard('ForcedAnswer');
    const callAt = text.indexOf(TOOL_CALL, turn.contentStart);
    if (callAt < 0 || callAt >= turn.contentEnd) continue;
    const payload = text.slice(callAt + TOOL_CALL.length, turn.contentEnd).trim();
    let fast: string | null = null;
    try {
      const v = JSON.parse(payload) as unknown;
      if (isObj(v) && typeof v['tool'] === 'string' && (v['args'] === undefined || isObj(v['args']))) {
        const args = (v['args'] ?? {}) as Record<string, unknown>;
        fast = `${v['tool']}(${Object.values(args).map((a) => JSON.stringify(a)).join(', ')})`;
      }
    } catch {
      fast = null;
    }
    if (fast !== null) calls.push(fast);
    else {
      const a = parseAssistantStep(text.slice(turn.contentStart, turn.contentEnd));
      calls.push(a.kind === 'tool' ? compactCall(a.tool, a.args) : `malformed: ${payload.slice(0, 80)}`);
    }
  }
  let answer: string | null = null;
  if (lastAssistant) {
    const a = parseAssistantStep(text.slice(lastAssistant.contentStart, lastAssistant.contentEnd));
    if (a.kind === 'final') answer = a.answer;
  }
  return { question, steps, calls, guards, answer };
}

function summarize(index: number, line: number, text: string, row: Record<string, unknown> | null): ParsedRow {
  const { question, steps, calls, guards, answer } = summarizeText(text);
  const isEval = row !== null && ('solved' in row || 'gold' in row);
  const solved = row && typeof row['solved'] === 'boolean' ? row['solved'] : null;
  const summary: TrajectorySummary = {
    index,
    line,
    question: str(row?.['question']) ?? str(row?.['task']) ?? question,
    kind: str(row?.['kind']) ?? '',
    solved,
    failure: isEval ? str(row?.['failure']) : null,
    steps: (row && num(row['steps'])) ?? steps,
    reward: row ? num(row['reward']) : null,
    answer: isEval && row ? (row['answer'] === null ? null : str(row['answer'])) : answer,
    gold: row ? str(row['gold']) : null,
    guards,
    calls,
  };
  return { summary, text };
}

/** Strips the one trailing newline editors add (docs/architecture.md, transcript files). */
export function transcriptText(fileText: string): string {
  if (fileText.endsWith('\r\n')) return fileText.slice(0, -2);
  if (fileText.endsWith('\n')) return fileText.slice(0, -1);
  return fileText;
}

/** A `.transcript` (isTranscript) or a JSONL file with a transcript in each row's `text`. */
export function parseSource(fileText: string, isTranscript: boolean): ParsedSource {
  if (isTranscript) return { kind: 'transcript', rows: [summarize(0, 0, transcriptText(fileText), null)], problems: [] };
  const rows: ParsedRow[] = [];
  const problems: string[] = [];
  let evalRows = 0;
  const lines = fileText.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.endsWith('\r') ? lines[i]!.slice(0, -1) : lines[i]!;
    if (raw.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      problems.push(`line ${i + 1}: not JSON`);
      continue;
    }
    if (!isObj(v) || typeof v['text'] !== 'string') {
      problems.push(`line ${i + 1}: no "text" with a transcript`);
      continue;
    }
    if ('solved' in v || 'gold' in v) evalRows++;
    rows.push(summarize(rows.length, i, v['text'], v));
  }
  return { kind: evalRows > 0 && evalRows >= rows.length / 2 ? 'eval' : 'dataset', rows, problems };
}

/** The detail view of one row: its summary's verdict and its step cards. */
export function detailOf(row: ParsedRow): TrajectoryDetail {
  const { steps, problems } = parseSteps(row.text);
  const s = row.summary;
  return {
    index: s.index,
    line: s.line,
    question: s.question,
    kind: s.kind,
    solved: s.solved,
    failure: s.failure,
    reward: s.reward,
    answer: s.answer,
    gold: s.gold,
    steps,
    problems,
  };
}
