// One transcript in the wire format, analysed: its special tokens, turns, steps, tool
// calls (with the grammar's verdict), the final answer, `_segment`'s loss-mask spans, and
// the diagnostics that need no tokenizer. Offsets are UTF-16 offsets into the transcript
// ("logical" offsets); a document maps them to its own positions (a `.transcript` is the
// identity, a dataset row maps through its JSON string's escapes).
import { findNodeAtLocation, findNodeAtOffset, getNodePath, Node as JsonNode, parseTree } from 'jsonc-parser';
import { segment } from '../../core/lossMask';
import { JsonObject, isJsonObject, pyJsonLoads } from '../../core/pyjson';
import { pyStrip } from '../../core/pystr';
import { calc } from '../../core/tools/calc';
import { normalize } from '../../core/distill';
import { ASST, END, SYS, TOOL_CALL, TOOL_RESULT, USER, parseAssistantStep, renderCallBody } from '../../core/wire';
import { CallVerdict, incompleteMessage, rejectionMessage, runGrammar } from '../../core/transcript/grammarText';
import { TEMPLATES, type Template } from '../../core/grammar';
import { describeNearMiss, scanSpecialsSteps, SpecialHit, suggestSpecial } from './specials';
import type { SpanRole } from '../../core/protocol/lsp';

export type Role = 'system' | 'user' | 'assistant' | 'tool_result';
export type Severity = 'error' | 'warning' | 'information' | 'hint';

/** Every diagnostic code the server reports (stable: clients and tests match on them). */
export type DiagnosticCode =
  | 'grammar-rejected'
  | 'call-incomplete'
  | 'call-noncanonical'
  | 'calc-error'
  | 'unknown-special-token'
  | 'turn-unterminated'
  | 'role-order'
  | 'result-without-call'
  | 'stray-end'
  | 'text-outside-turn'
  | 'whitespace-between-turns'
  | 'tool-call-outside-assistant'
  | 'second-tool-call'
  | 'step-without-action'
  | 'no-final-answer'
  | 'over-length'
  | 'mask-supervises-nothing'
  | 'mask-supervises-everything'
  | 'row-not-json'
  | 'row-no-text'
  | 'large-document';

/** A text edit in logical offsets; `newText` is transcript text (a dataset escapes it). */
export interface LogicalEdit {
  start: number;
  end: number;
  newText: string;
}
export interface Fix {
  title: string;
  edits: LogicalEdit[];
}

export interface TDiagnostic {
  start: number;
  end: number;
  severity: Severity;
  code: DiagnosticCode;
  message: string;
  fix?: Fix;
}

export interface Turn {
  role: Role;
  /** Offset of the role marker. */
  start: number;
  contentStart: number;
  /** Where the content stops: at its `<|end|>`, or at the next marker / the end when unterminated. */
  contentEnd: number;
  /** After the closing `<|end|>`, or `contentEnd` when unterminated. */
  end: number;
  terminated: boolean;
  call: CallInfo | null;
}

export interface CallInfo {
  /** Offset of `<|tool_call|>`. */
  start: number;
  bodyStart: number;
  bodyEnd: number;
  body: string;
  /** Offset of the `<|end|>` that closes the call, or null. */
  endMarker: number | null;
  verdict: CallVerdict;
  /** The parsed call, when the body is JSON with a string `tool` and an object `args`. */
  parsed: { tool: string; args: JsonObject } | null;
  /** `renderCallBody` of the parsed call. */
  canonical: string | null;
  /** For calc calls: what the calculator returns. */
  calcResult: string | null;
}

export interface Step {
  /** 1-based. */
  index: number;
  assistant: Turn;
  result: Turn | null;
  start: number;
  end: number;
}

export interface FinalAnswer {
  start: number;
  end: number;
  answer: string;
  normalized: string;
}

export interface Span {
  start: number;
  end: number;
  supervised: boolean;
}

export interface TranscriptAnalysis {
  text: string;
  specials: SpecialHit[];
  turns: Turn[];
  steps: Step[];
  spans: Span[];
  finalAnswer: FinalAnswer | null;
  diagnostics: TDiagnostic[];
}

const ROLE_OF: Record<string, Role> = { [SYS]: 'system', [USER]: 'user', [ASST]: 'assistant', [TOOL_RESULT]: 'tool_result' };
const MARKER_OF: Record<Role, string> = { system: SYS, user: USER, assistant: ASST, tool_result: TOOL_RESULT };
const ROLE_WORDS: Record<Role, string> = {
  system: 'the system turn',
  user: 'the user turn',
  assistant: 'an assistant turn',
  tool_result: 'a tool result',
};

const WS = /^[\s]*$/;

/** One transcript analysed in one go (small documents, dataset rows, tests). */
/** `grammar`: the call grammar of the transcript's world (a run's world/tools.json narrows it; default the textbook's). */
export function analyseTranscript(text: string, grammar: readonly Template[] = TEMPLATES): TranscriptAnalysis {
  return runSteps(analyseTranscriptSteps(text, grammar));
}

/** Runs a step generator to its end. */
export function runSteps<T>(steps: Generator<void, T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Work units between the points where the analysis may pause (a yield every so many loop turns). */
const STEP_EVERY = 256;

/**
 * The analysis as a generator that yields every few hundred loop turns, so a caller can
 * work in time slices and give the message loop a turn between them (a 20 MB transcript
 * takes seconds; the server must stay responsive and drop the work when a newer version
 * arrives). Same result as analyseTranscript.
 */
export function* analyseTranscriptSteps(text: string, grammar: readonly Template[] = TEMPLATES): Generator<void, TranscriptAnalysis> {
  const diagnostics: TDiagnostic[] = [];
  const specials = yield* scanSpecialsSteps(text);
  let work = 0;
  const turns: Turn[] = [];
  let open: Turn | null = null;
  let openCallHit: SpecialHit | null = null;
  let lastEnd = 0;

  const gap = (from: number, to: number): void => {
    if (to <= from) return;
    const s = text.slice(from, to);
    if (WS.test(s)) {
      diagnostics.push({
        start: from,
        end: to,
        severity: 'information',
        code: 'whitespace-between-turns',
        message: 'whitespace between turns is not in the wire format; it is kept as masked text',
        fix: { title: 'Remove the whitespace between turns', edits: [{ start: from, end: to, newText: '' }] },
      });
    } else {
      const lead = s.length - s.trimStart().length;
      const trail = s.length - s.trimEnd().length;
      diagnostics.push({
        start: from + lead,
        end: to - trail,
        severity: 'error',
        code: 'text-outside-turn',
        message: `text outside any turn: expected a role marker (${SYS}, ${USER}, ${ASST} or ${TOOL_RESULT}) before it`,
      });
    }
  };

  const closeCall = (turn: Turn, endMarker: number | null): void => {
    if (openCallHit === null) return;
    turn.call = analyseCall(text, openCallHit.start, openCallHit.end, turn.contentEnd, endMarker, diagnostics, grammar);
    openCallHit = null;
  };

  const unterminated = (turn: Turn, at: number, next: SpecialHit | null): void => {
    turn.contentEnd = at;
    turn.end = at;
    closeCall(turn, null);
    const what = turn.role === 'assistant' ? 'the assistant turn' : ROLE_WORDS[turn.role];
    let start = at;
    let end = at;
    if (next) end = next.end;
    else if (at > turn.contentStart) start = at - 1;
    else {
      start = turn.start;
      end = turn.contentStart;
    }
    diagnostics.push({
      start: next ? next.start : start,
      end,
      severity: 'error',
      code: 'turn-unterminated',
      message: next
        ? `${what} never ends: expected ${END} before ${next.raw}`
        : `${what} never ends: expected ${END} at the end of the transcript`,
      fix: { title: `Add the missing ${END}`, edits: [{ start: at, end: at, newText: END }] },
    });
  };

  for (const hit of specials) {
    if (++work % STEP_EVERY === 0) yield;
    if (hit.token === null) {
      const suggestion = suggestSpecial(hit.raw);
      diagnostics.push({
        start: hit.start,
        end: hit.end,
        severity: 'error',
        code: 'unknown-special-token',
        message: describeNearMiss(hit.raw),
        ...(suggestion ? { fix: { title: `Replace with ${suggestion}`, edits: [{ start: hit.start, end: hit.end, newText: suggestion }] } } : {}),
      });
      continue;
    }
    const role = ROLE_OF[hit.token];
    if (role !== undefined) {
      if (open) unterminated(open, hit.start, hit);
      else gap(lastEnd, hit.start);
      open = { role, start: hit.start, contentStart: hit.end, contentEnd: hit.end, end: hit.end, terminated: false, call: null };
      turns.push(open);
      lastEnd = hit.end;
      continue;
    }
    if (hit.token === END) {
      if (open) {
        open.contentEnd = hit.start;
        open.end = hit.end;
        open.terminated = true;
        closeCall(open, hit.start);
        open = null;
      } else {
        gap(lastEnd, hit.start);
        diagnostics.push({
          start: hit.start,
          end: hit.end,
          severity: 'error',
          code: 'stray-end',
          message: `${END} outside any turn: nothing is open to close (expected a role marker first)`,
        });
      }
      lastEnd = hit.end;
      continue;
    }
    if (hit.token === TOOL_CALL) {
      if (open && open.role === 'assistant') {
        if (openCallHit === null && open.call === null) openCallHit = hit;
        else {
          diagnostics.push({
            start: hit.start,
            end: hit.end,
            severity: 'error',
            code: 'second-tool-call',
            message: `a second ${TOOL_CALL} in one step: the agent reads only the first call (expected ${END} before another call)`,
          });
        }
      } else {
        diagnostics.push({
          start: hit.start,
          end: hit.end,
          severity: 'error',
          code: 'tool-call-outside-assistant',
          message: open
            ? `${TOOL_CALL} inside ${ROLE_WORDS[open.role]}: only an assistant turn may call a tool`
            : `${TOOL_CALL} outside any turn: expected it inside an assistant turn`,
        });
      }
      continue;
    }
    // <|bos|>, <|eos|>, <|pad|>: content as far as _segment is concerned.
  }
  if (open) unterminated(open, text.length, null);
  else gap(lastEnd, text.length);

  const steps = buildSteps(turns);
  yield;
  const finalAnswer = yield* checkOrder(text, turns, diagnostics);
  checkCallArguments(turns, diagnostics);
  yield;

  const spans: Span[] = [];
  let at = 0;
  for (const [piece, supervised] of yield* segmentSteps(text, specials)) {
    spans.push({ start: at, end: at + piece.length, supervised });
    at += piece.length;
  }
  yield;
  checkMaskCoverage(text, spans, turns, diagnostics);
  const sorted = yield* sortSteps(diagnostics, (a, b) => a.start - b.start || a.end - b.end);
  return { text, specials, turns, steps, spans, finalAnswer, diagnostics: sorted };
}

/**
 * A stable merge sort that yields between runs (a 20 MB transcript has ~100,000
 * diagnostics: one sort call would be a 100 ms pause). Same order as Array.prototype.sort.
 */
export function* sortSteps<T>(xs: T[], cmp: (a: T, b: T) => number): Generator<void, T[]> {
  if (xs.length <= 4096) return xs.sort(cmp);
  const RUN = 2048;
  let a = xs.slice();
  for (let i = 0; i < a.length; i += RUN) {
    const run = a.slice(i, i + RUN).sort(cmp);
    for (let k = 0; k < run.length; k++) a[i + k] = run[k]!;
    yield;
  }
  let b = new Array<T>(a.length);
  for (let width = RUN; width < a.length; width *= 2) {
    let work = 0;
    for (let lo = 0; lo < a.length; lo += 2 * width) {
      const mid = Math.min(lo + width, a.length);
      const hi = Math.min(lo + 2 * width, a.length);
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) {
        b[k++] = cmp(a[j]!, a[i]!) < 0 ? a[j++]! : a[i++]!;
        if ((++work & 8191) === 0) yield;
      }
      while (i < mid) b[k++] = a[i++]!;
      while (j < hi) b[k++] = a[j++]!;
    }
    [a, b] = [b, a];
    yield;
  }
  return a;
}

function buildSteps(turns: readonly Turn[]): Step[] {
  const steps: Step[] = [];
  for (let i = 0; i < turns.length; i++) {
    const t = turns[i]!;
    if (t.role !== 'assistant') continue;
    const next = turns[i + 1];
    const result = next && next.role === 'tool_result' ? next : null;
    steps.push({ index: steps.length + 1, assistant: t, result, start: t.start, end: (result ?? t).end });
  }
  return steps;
}

/** The first `Answer:` whose remainder is not blank, as the seed's ANSWER_RE finds it. */
export function findAnswer(text: string, from: number, to: number): FinalAnswer | null {
  const content = text.slice(from, to);
  if (content.includes(TOOL_CALL)) return null;
  for (let i = content.indexOf('Answer:'); i !== -1; i = content.indexOf('Answer:', i + 1)) {
    const rest = content.slice(i + 7);
    const stripped = pyStrip(rest);
    if (stripped.length === 0) continue;
    const lead = rest.indexOf(stripped);
    const start = from + i + 7 + lead;
    const action = parseAssistantStep(content);
    const answer = action.kind === 'final' ? action.answer : stripped;
    return { start, end: start + stripped.length, answer, normalized: normalize(answer) };
  }
  return null;
}

/**
 * `segment` (the seed's _segment) in pieces: the text is cut just before marker
 * occurrences (a marker sets the whole state, so segmenting the pieces one by one gives
 * exactly segment(text)), with a pause between pieces.
 */
function* segmentSteps(text: string, specials: readonly SpecialHit[]): Generator<void, ReturnType<typeof segment>> {
  const PIECE = 64 * 1024;
  if (text.length <= PIECE) return segment(text);
  const out: ReturnType<typeof segment> = [];
  let from = 0;
  let i = 0;
  while (from < text.length) {
    // The first boundary marker at or after from + PIECE starts the next piece.
    let cut = text.length;
    while (i < specials.length && specials[i]!.start < from + PIECE) i++;
    for (; i < specials.length; i++) {
      const t = specials[i]!.token;
      if (t === SYS || t === USER || t === ASST || t === TOOL_RESULT || t === END) {
        cut = specials[i]!.start;
        break;
      }
    }
    for (const seg of segment(text.slice(from, cut))) out.push(seg);
    from = cut;
    yield;
  }
  return out;
}

function* checkOrder(text: string, turns: readonly Turn[], diagnostics: TDiagnostic[]): Generator<void, FinalAnswer | null> {
  // What may come next: start -> system|user; system -> user; user -> assistant;
  // assistant(call) -> tool_result; tool_result -> assistant; assistant(answer) -> nothing.
  let prev: Turn | null = null;
  let finalSeen: Turn | null = null;
  let finalAnswer: FinalAnswer | null = null;
  const expectedAfter = (p: Turn | null): Role[] => {
    if (p === null) return ['system', 'user'];
    if (p.role === 'system') return ['user'];
    if (p.role === 'user') return ['assistant'];
    if (p.role === 'tool_result') return ['assistant'];
    return p.call ? ['tool_result'] : [];
  };
  let lastAssistant: Turn | null = null;
  for (let i = turns.length - 1; i >= 0; i--) {
    if (turns[i]!.role === 'assistant') {
      lastAssistant = turns[i]!;
      break;
    }
  }
  let work = 0;
  for (const t of turns) {
    if (++work % STEP_EVERY === 0) yield;
    const marker = { start: t.start, end: t.contentStart };
    const expected = expectedAfter(prev);
    if (finalSeen !== null) {
      diagnostics.push({
        ...marker,
        severity: 'error',
        code: 'role-order',
        message: `${MARKER_OF[t.role]} after the final answer: a trajectory ends with the assistant's Answer`,
      });
    } else if (!expected.includes(t.role)) {
      const after = prev === null ? 'at the start of a transcript' : `after ${ROLE_WORDS[prev.role]}`;
      const want = expected.map((r) => MARKER_OF[r]).join(' or ');
      if (t.role === 'tool_result') {
        diagnostics.push({
          ...marker,
          severity: 'error',
          code: 'result-without-call',
          message: `a tool result with no tool call before it: expected ${want} ${after}`,
        });
      } else {
        diagnostics.push({ ...marker, severity: 'error', code: 'role-order', message: `expected ${want} ${after}, got ${MARKER_OF[t.role]}` });
      }
    }
    if (t.role === 'assistant' && t.call === null) {
      const answer = findAnswer(text, t.contentStart, t.contentEnd);
      if (answer) {
        if (finalSeen === null) finalAnswer = answer;
        finalSeen = t;
      } else if (t !== lastAssistant) {
        diagnostics.push({
          ...marker,
          severity: 'warning',
          code: 'step-without-action',
          message: `this step has neither a ${TOOL_CALL} nor an 'Answer:': the agent loop would take the whole text as the final answer`,
        });
      }
    }
    prev = t;
  }
  if (finalAnswer === null) {
    const last = turns[turns.length - 1];
    const where = last ? { start: last.start, end: last.contentStart } : { start: 0, end: Math.min(text.length, 1) };
    const why =
      lastAssistant === null
        ? 'there is no assistant turn'
        : lastAssistant.call
          ? 'the last step is a tool call'
          : "the last assistant turn has no 'Answer:' with text after it";
    diagnostics.push({
      ...where,
      severity: 'error',
      code: 'no-final-answer',
      message: `the trajectory has no final 'Answer:' (${why}); expected a last assistant turn 'Thought: ...\\nAnswer: ...${END}'`,
    });
  }
  return finalAnswer;
}

function analyseCall(
  text: string,
  markerStart: number,
  bodyStart: number,
  bodyEnd: number,
  endMarker: number | null,
  diagnostics: TDiagnostic[],
  grammar: readonly Template[],
): CallInfo {
  const body = text.slice(bodyStart, bodyEnd);
  const verdict = runGrammar(body, grammar);
  let parsed: CallInfo['parsed'] = null;
  if (verdict.complete) {
    // A complete call is the template exactly: plain ASCII strings, a one-digit k. It is
    // its own canonical form, and JSON.parse reads it as Python's json.loads does.
    const obj = JSON.parse(body) as { tool: string; args: JsonObject };
    const calcResult = obj.tool === 'calc' && typeof obj.args['expr'] === 'string' ? calc(obj.args['expr']) : null;
    return { start: markerStart, bodyStart, bodyEnd, body, endMarker, verdict, parsed: obj, canonical: body, calcResult };
  }
  try {
    const obj = pyJsonLoads(pyStrip(body));
    if (isJsonObject(obj) && typeof obj['tool'] === 'string') {
      const args = Object.prototype.hasOwnProperty.call(obj, 'args') ? obj['args'] : {};
      if (isJsonObject(args)) parsed = { tool: obj['tool'], args };
    }
  } catch {
    parsed = null;
  }
  const canonical = parsed ? renderCallBody(parsed.tool, parsed.args) : null;
  let calcResult: string | null = null;
  if (parsed && parsed.tool === 'calc' && typeof parsed.args['expr'] === 'string') calcResult = calc(parsed.args['expr']);

  const call: CallInfo = { start: markerStart, bodyStart, bodyEnd, body, endMarker, verdict, parsed, canonical, calcResult };

  if (canonical !== null && canonical !== body) {
    // It parses but is not spelled as the model was trained: one warning with the fix;
    // the grammar then judges the canonical spelling, mapped back onto this one.
    const canonicalVerdict = runGrammar(canonical, grammar);
    diagnostics.push({
      start: bodyStart,
      end: bodyEnd,
      severity: 'warning',
      code: 'call-noncanonical',
      message:
        `tool call JSON is not in the canonical form the model was trained on (key order tool, args; separators ', ' and ': '); ` +
        `the constrained decoder would reject this spelling. Expected: ${canonical}`,
      fix: { title: 'Canonicalise the tool call', edits: [{ start: bodyStart, end: bodyEnd, newText: canonical }] },
    });
    if (!canonicalVerdict.accepted && canonicalVerdict.rejectedOffset !== null) {
      const [s, e] = mapIntoSource(canonical, canonicalVerdict.rejectedOffset, body);
      diagnostics.push({
        start: bodyStart + s,
        end: bodyStart + e,
        severity: 'error',
        code: 'grammar-rejected',
        message: `${rejectionMessage(canonicalVerdict)} (in the canonical form)`,
      });
    } else if (canonicalVerdict.accepted && !canonicalVerdict.complete) {
      pushIncomplete(call, canonicalVerdict, diagnostics);
    }
    return call;
  }
  if (!verdict.accepted && verdict.rejectedOffset !== null) {
    const at = bodyStart + verdict.rejectedOffset;
    diagnostics.push({
      start: at,
      end: at + (verdict.got?.length ?? 1),
      severity: 'error',
      code: 'grammar-rejected',
      message: rejectionMessage(verdict),
    });
  } else if (verdict.accepted && !verdict.complete && endMarker !== null) {
    pushIncomplete(call, verdict, diagnostics);
  }
  return call;
}

function pushIncomplete(call: CallInfo, verdict: CallVerdict, diagnostics: TDiagnostic[]): void {
  if (call.endMarker === null) return; // the unterminated turn says it
  diagnostics.push({
    start: call.endMarker,
    end: call.endMarker + END.length,
    severity: 'error',
    code: 'call-incomplete',
    message: incompleteMessage(verdict),
  });
}

/** Maps an offset in the canonical spelling to the same JSON value in the source spelling. */
function mapIntoSource(canonical: string, offset: number, source: string): [number, number] {
  const canonTree = parseTree(canonical);
  const srcTree = parseTree(source);
  if (!canonTree || !srcTree) return [0, source.length];
  const node = findNodeAtOffset(canonTree, offset);
  if (!node) return [0, source.length];
  let path: (string | number)[];
  try {
    path = getNodePath(node);
  } catch {
    return [0, source.length];
  }
  const isKey = node.parent?.type === 'property' && node.parent.children?.[0] === node;
  let target: JsonNode | undefined = findNodeAtLocation(srcTree, path);
  if (isKey) target = target?.parent?.children?.[0];
  if (!target) return [0, source.length];
  const rel = offset - node.offset;
  const canonRaw = canonical.slice(node.offset, node.offset + node.length);
  const srcRaw = source.slice(target.offset, target.offset + target.length);
  if ((target.type === 'string' || target.type === 'number') && canonRaw.slice(0, rel + 1) === srcRaw.slice(0, rel + 1)) {
    return [target.offset + rel, target.offset + rel + 1];
  }
  return [target.offset, target.offset + target.length];
}

/** Warnings on argument values: a calculator expression that returns CalcError. */
function checkCallArguments(turns: readonly Turn[], diagnostics: TDiagnostic[]): void {
  for (const t of turns) {
    const call = t.call;
    if (!call || call.calcResult === null || !call.calcResult.startsWith('CalcError')) continue;
    const tree = parseTree(call.body);
    const node = tree ? findNodeAtLocation(tree, ['args', 'expr']) : undefined;
    const start = node ? call.bodyStart + node.offset : call.bodyStart;
    const end = node ? start + node.length : call.bodyEnd;
    diagnostics.push({
      start,
      end,
      severity: 'warning',
      code: 'calc-error',
      message: `the calculator would return an error for this expression: ${call.calcResult}`,
    });
  }
}

function checkMaskCoverage(text: string, spans: readonly Span[], turns: readonly Turn[], diagnostics: TDiagnostic[]): void {
  if (text.length === 0) return;
  const supervised = spans.some((s) => s.supervised);
  const first = turns[0];
  const where = first ? { start: first.start, end: first.contentStart } : { start: 0, end: Math.min(text.length, 1) };
  if (!supervised) {
    diagnostics.push({
      ...where,
      severity: 'warning',
      code: 'mask-supervises-nothing',
      message: 'the loss mask supervises nothing: no assistant content, so this example teaches the model nothing',
    });
    return;
  }
  // "Everything": every masked span is an <|assistant|> marker (no prompt, no observation).
  const maskedContent = spans.some((s) => !s.supervised && text.slice(s.start, s.end) !== ASST);
  if (!maskedContent) {
    diagnostics.push({
      ...where,
      severity: 'warning',
      code: 'mask-supervises-everything',
      message:
        'the loss mask supervises everything except the <|assistant|> markers: no system, user or tool-result text, so the model learns to produce text with no prompt',
    });
  }
}

/** The role of the turn holding `offset` ("outside" between turns). */
export function roleAt(a: TranscriptAnalysis, offset: number): { role: SpanRole; turn: Turn | null } {
  const turn = turnAt(a, offset);
  return { role: turn ? turn.role : 'outside', turn };
}

export function turnAt(a: TranscriptAnalysis, offset: number): Turn | null {
  let lo = 0;
  let hi = a.turns.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const t = a.turns[mid]!;
    if (offset < t.start) hi = mid - 1;
    else if (offset >= t.end) lo = mid + 1;
    else return t;
  }
  return null;
}

export function spanAt(a: TranscriptAnalysis, offset: number): Span | null {
  let lo = 0;
  let hi = a.spans.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = a.spans[mid]!;
    if (offset < s.start) hi = mid - 1;
    else if (offset >= s.end) lo = mid + 1;
    else return s;
  }
  return null;
}
