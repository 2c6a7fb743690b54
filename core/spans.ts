// What each supervised character of a transcript is for. The loss mask says WHETHER a
// character is supervised; span kinds say WHAT skill it exercises, so training can weight
// the copy spans and evaluation can report teacher-forced accuracy per skill:
//   thought — the free text after "Thought:"      query — the search query value
//   expr    — the calculator expression value     answer — the final answer value
//   format  — everything else the model emits (labels, call JSON syntax, <|end|>)
// `copy` marks what must be copied from the question or an observation: the entity and
// attribute in "I need the ... of ...", the expression in "Now I compute ...", the query,
// the calculator expression and the answer.
import { segment } from './lossMask';
import { END, TOOL_CALL } from './wire';

export type SpanKind = 'thought' | 'query' | 'expr' | 'answer' | 'format';
export const SPAN_KINDS: readonly SpanKind[] = ['thought', 'query', 'expr', 'answer', 'format'];

export interface Span {
  start: number;
  end: number;
  kind: SpanKind;
  copy: boolean;
}

const NEED_RE = /I need the (.+?) of (.+?)\. /;
const COMPUTE_RE = /Now I compute (.+?) with the calculator/;
/** A compare's verdict ("-9 is below zero, so B is larger.", a recipe's teacher): the number read, the sign word it decides, the name copied from the question. */
const VERDICT_RE = /(-?[0-9][0-9.]*) is (below|above) zero, so (.+?) is larger\./;
/** A restated fact ("The {attr} of {ent} is {value}.", a recipe's teacher writes it after a search): the value is read from the observation. */
const NOTE_RE = /The (.+?) of (.+?) is ([^.,;]+)\./g;

/**
 * Character ranges of a thought's text that are copied: the attribute and entity of "I need
 * the ... of ...", the value of each restated fact, else the expression of "Now I compute".
 */
function copyRangesOfThought(thought: string): [number, number][] {
  const ranges: [number, number][] = [];
  NOTE_RE.lastIndex = 0;
  for (let m = NOTE_RE.exec(thought); m; m = NOTE_RE.exec(thought)) {
    const valueEnd = m.index + m[0].length - 1;
    ranges.push([valueEnd - m[3]!.length, valueEnd]);
  }
  const need = NEED_RE.exec(thought);
  if (need) {
    const attrStart = need.index + 'I need the '.length;
    const attrEnd = attrStart + need[1]!.length;
    const entStart = attrEnd + ' of '.length;
    ranges.push([attrStart, attrEnd], [entStart, entStart + need[2]!.length]);
  } else {
    const c = COMPUTE_RE.exec(thought);
    const v = c ? null : VERDICT_RE.exec(thought);
    if (c) {
      const eStart = c.index + 'Now I compute '.length;
      ranges.push([eStart, eStart + c[1]!.length]);
    } else if (v) {
      const signStart = v.index + v[1]!.length + ' is '.length;
      const nameStart = signStart + v[2]!.length + ' zero, so '.length;
      ranges.push([v.index, v.index + v[1]!.length], [signStart, signStart + v[2]!.length], [nameStart, nameStart + v[3]!.length]);
    }
  }
  return ranges.sort((x, y) => x[0] - y[0]).filter((r, k, all) => k === 0 || r[0] >= all[k - 1]![1]);
}

/** Supervised spans of a transcript (character offsets), in order, non-overlapping. */
export function annotateSpans(transcript: string): Span[] {
  const spans: Span[] = [];
  let offset = 0;
  for (const [text, supervised] of segment(transcript)) {
    const start = offset;
    offset += text.length;
    if (!supervised) continue;
    if (text === END) {
      spans.push({ start, end: start + text.length, kind: 'format', copy: false });
      continue;
    }
    annotateAssistantTurn(text, start, spans);
  }
  return spans;
}

function push(spans: Span[], start: number, end: number, kind: SpanKind, copy: boolean): void {
  if (end > start) spans.push({ start, end, kind, copy });
}

function annotateAssistantTurn(text: string, base: number, spans: Span[]): void {
  let i = 0;
  const callAt = text.indexOf(TOOL_CALL);
  const body = callAt >= 0 ? text.slice(0, callAt) : text;
  const thoughtAt = body.indexOf('Thought:');
  if (thoughtAt >= 0) {
    push(spans, base, base + thoughtAt + 'Thought:'.length, 'format', false);
    const tStart = thoughtAt + 'Thought:'.length;
    const nl = body.indexOf('\n', tStart);
    const tEnd = nl >= 0 ? nl : body.length;
    const thought = body.slice(tStart, tEnd);
    let at = tStart;
    for (const [start, end] of copyRangesOfThought(thought)) {
      push(spans, base + at, base + tStart + start, 'thought', false);
      push(spans, base + tStart + start, base + tStart + end, 'thought', true);
      at = tStart + end;
    }
    push(spans, base + at, base + tEnd, 'thought', false);
    i = tEnd;
  }
  if (callAt >= 0) {
    push(spans, base + i, base + callAt + TOOL_CALL.length, 'format', false);
    annotateCall(text.slice(callAt + TOOL_CALL.length), base + callAt + TOOL_CALL.length, spans);
    return;
  }
  const answerAt = text.indexOf('Answer:', i);
  if (answerAt >= 0) {
    let aStart = answerAt + 'Answer:'.length;
    while (aStart < text.length && text[aStart] === ' ') aStart++;
    push(spans, base + i, base + aStart, 'format', false);
    push(spans, base + aStart, base + text.length, 'answer', true);
    return;
  }
  push(spans, base + i, base + text.length, 'format', false);
}

const VALUE_RE = /"(query|expr)": "((?:[^"\\]|\\.)*)"/g;

function annotateCall(json: string, base: number, spans: Span[]): void {
  let i = 0;
  VALUE_RE.lastIndex = 0;
  for (let m = VALUE_RE.exec(json); m; m = VALUE_RE.exec(json)) {
    const vStart = m.index + m[1]!.length + 5; // `"query": "` = name + 2 quotes + ': "'
    const vEnd = vStart + m[2]!.length;
    push(spans, base + i, base + vStart, 'format', false);
    push(spans, base + vStart, base + vEnd, m[1] === 'query' ? 'query' : 'expr', true);
    i = vEnd;
  }
  push(spans, base + i, base + json.length, 'format', false);
}
