// Extension ↔ webview messages of the panels (Trajectory Inspector, Loss Mask, Training
// Curves, Grammar Debugger, Compare Runs), typed once: one discriminated union per direction, on `type`,
// each type prefixed by its panel (`inspector/…`, `lossMask/…`, `curves/…`, `grammar/…`),
// plus `ready`, which every webview sends when its script has loaded (the extension posts
// nothing before it). Each side validates what it receives: a webview is untrusted input
// (`parseFromWebview`), and the webviews check what the extension sends (`parseToWebview`).
// The webview state kept by VS Code across reloads (the serializer's `state`) is validated
// too (`parsePanelState`). Types, validators and pure helpers only: no Node or DOM imports.
import { LossMaskResult, isLossMaskResult } from './lsp';
import { MetricRecord, isMetricRecord } from './metrics';
import { isObj } from './isObj';
import { GRPO_OPTION_TABLE, RL_POOLS, type RlPool } from './grpoOptions';

export const PANEL_VIEW_TYPES = {
  inspector: 'agentLab.inspector',
  lossMask: 'agentLab.lossMask',
  curves: 'agentLab.curves',
  grammar: 'agentLab.grammar',
  compare: 'agentLab.compare',
} as const;
export type PanelKind = keyof typeof PANEL_VIEW_TYPES;
export const PANEL_KINDS: readonly PanelKind[] = ['inspector', 'lossMask', 'curves', 'grammar', 'compare'];

/** Caps on what a webview may send (it is untrusted): strings, indices, PNG data URLs. */
export const LIMITS = {
  text: 10_000,
  query: 500,
  index: 10_000_000,
  pngDataUrl: 32 * 1024 * 1024,
  runs: 32,
} as const;

// =============================================================================================
// Trajectory Inspector
// =============================================================================================

/** transcript: one `.transcript`; dataset: distilled rows ({task, text, kind}); eval: eval rows. */
export type SourceKind = 'transcript' | 'dataset' | 'eval';
export interface TrajectorySource {
  uri: string;
  /** What the panel's title and header show (a workspace-relative path). */
  label: string;
  kind: SourceKind;
}

/** What fired in a step: a guard of the agent loop, a tool's error, or the harness's forcing. */
export type GuardName = 'RepeatedCall' | 'FormatError' | 'ToolError' | 'CalcError' | 'NoResults' | 'ForcedAnswer';
export const GUARD_NAMES: readonly GuardName[] = ['RepeatedCall', 'FormatError', 'ToolError', 'CalcError', 'NoResults', 'ForcedAnswer'];

/** One row of the list: small, so that 10,000 of them travel and filter fast. */
export interface TrajectorySummary {
  /** Position in the source's rows (0-based). */
  index: number;
  /** Zero-based line of the row in its file (0 for a `.transcript`). */
  line: number;
  question: string;
  /** Task shape (`lookup`, `double`, `sum`, `compare`), '' when the row does not say. */
  kind: string;
  /** null when the row does not say (distilled rows carry no verdict). */
  solved: boolean | null;
  failure: string | null;
  steps: number;
  reward: number | null;
  answer: string | null;
  gold: string | null;
  guards: GuardName[];
  /** The tool calls, compactly (`search("STaR publication year", 2)`, `calc(2022-2048)`). */
  calls: string[];
}

/** One assistant step as a card. Offsets are UTF-16 offsets into the trajectory's text. */
export interface StepCard {
  /** 1-based. */
  n: number;
  thought: string;
  call: { tool: string; args: string } | null;
  /** The payload of a call that did not parse (the harness answered FormatError). */
  malformed: string | null;
  observation: string | null;
  guard: GuardName | null;
  answer: string | null;
  /** The harness wrote (part of) this turn: the forced answer when out of steps. */
  harness: boolean;
  /** From the step's `<|assistant|>` to the end of its tool result (or its `<|end|>`). */
  start: number;
  end: number;
}

export interface TrajectoryDetail {
  index: number;
  line: number;
  question: string;
  kind: string;
  solved: boolean | null;
  failure: string | null;
  reward: number | null;
  answer: string | null;
  gold: string | null;
  steps: StepCard[];
  /** Text after the last step that is not part of any turn (rare; shown when present). */
  problems: string[];
}

/**
 * The failure kinds of an eval row (`failure`, docs/architecture.md "Eval rows"): the first
 * real mistake of a failed trajectory (trainer/agent/eval.ts classifyFailure). One list for the
 * eval summary, the CLI and the inspector.
 */
export const FAILURE_KINDS = ['search', 'calc', 'final', 'early_answer', 'extra_call', 'not_in_question', 'memorised', 'format', 'out_of_steps'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** What each failure kind means, in a user's words (the inspector's filter and badges, the eval summary). */
export const FAILURE_MEANINGS: Record<FailureKind, string> = {
  search: 'a search that did not return a fact the question needs',
  calc: 'a calculation whose result is not the one the question needs',
  final: 'a wrong answer after the right steps',
  early_answer: 'answered before making a call the question needs',
  extra_call: 'called a tool where it should have answered',
  not_in_question: 'answered with an entity the question does not name',
  memorised: "answered with the parent world's value where this world's differs: remembered instead of read",
  format: 'a step the harness could not parse, or cut at its token limit',
  out_of_steps: 'ran out of steps',
};

/** The meaning of a failure label, or '' for one this version does not know (an older or newer file). */
export function failureMeaning(kind: string | null): string {
  return kind !== null && Object.prototype.hasOwnProperty.call(FAILURE_MEANINGS, kind) ? FAILURE_MEANINGS[kind as FailureKind] : '';
}

export interface InspectorFilter {
  outcome: 'all' | 'solved' | 'failed';
  /** '' = every shape. */
  kind: string;
  /** '' = any, 'none' = rows without a failure. */
  failure: string;
  /** '' = any guard. */
  guard: string;
  text: string;
}
export const EMPTY_FILTER: InspectorFilter = { outcome: 'all', kind: '', failure: '', guard: '', text: '' };

export interface InspectorState {
  panel: 'inspector';
  source: TrajectorySource;
  filter: InspectorFilter;
  selected: number | null;
  scrollTop: number;
}

// =============================================================================================
// Loss Mask
// =============================================================================================

export interface MaskView {
  /** What the header says: file (and row). */
  label: string;
  /** The language server's answer (agentLab/lossMask). */
  mask: LossMaskResult;
  /**
   * Per token: text the harness wrote inside a supervised span (eval and RL rows carry
   * generated flags; docs/architecture.md "What supervised means"), or null when the row carries none.
   */
  harness: boolean[] | null;
}

export interface LossMaskState {
  panel: 'lossMask';
  uri: string | null;
  row: number | null;
}

// =============================================================================================
// Training Curves
// =============================================================================================

export interface RunRef {
  /** Stable within a panel: the run folder's path. */
  id: string;
  label: string;
  dir: string;
}

export interface CurvesState {
  panel: 'curves';
  runs: string[];
  hidden: string[];
}

/** One phase of an SFT recipe's curriculum (trainer/sft/recipes.ts): its share of the budget, the examples, the batch. */
export interface CurriculumPhaseView {
  fraction: number;
  turns: string;
  batch: number;
}

/** The pre-screen's prediction for one task shape (or all): the share of groups with a spread and its 90% interval. */
export interface PrescreenFigureView {
  /** A task shape, or 'all'. */
  kind: string;
  tasks: number;
  passRate: number;
  share: number;
  low: number;
  high: number;
}

/**
 * A GRPO run's checks before step 1, from its config.json (trainer/grpo/grpo.ts writes them
 * there): the pre-flight checks, the pass-rate pre-screen (per shape) and its verdict.
 */
export interface PreflightView {
  checks: { name: string; ok: boolean; detail: string }[];
  prescreen: {
    samples: number;
    group: number;
    wholePool: boolean;
    /** 'all' first, then one per shape. */
    figures: PrescreenFigureView[];
  } | null;
  verdict: {
    ok: boolean;
    bound: number;
    threshold: number;
    cause: string | null;
    detail: string | null;
    next: string | null;
    /** `next` as buttons (trainer/grpo/prescreen.ts VerdictAction); null when the run folder predates them (the panel reads the pool from `next`). */
    actions: PreflightAction[] | null;
    forced: boolean;
    refused: boolean;
  } | null;
}

/** A next step a refused verdict names: GRPO again from the same SFT run with these flags, or more SFT from that run first. */
export type PreflightAction = { kind: 'grpo'; flags: RetryFlags } | { kind: 'sft-more' };

/** A button's words for an action: "Train with --pool fresh-values", "Train with --temperature 1.2", "Train with --guide on", "Train SFT More…". */
export function preflightActionLabel(a: PreflightAction): string {
  if (a.kind === 'sft-more') return 'Train SFT More…';
  const f = a.flags;
  const flags = [f.pool !== undefined ? `--pool ${f.pool}` : '', f.temperature !== undefined ? `--temperature ${f.temperature}` : '', f.guide !== undefined ? `--guide ${f.guide}` : ''];
  return `Train with ${flags.filter((x) => x !== '').join(' ')}`;
}

/** The flags a retry of a refused GRPO run may change (at least one). */
export interface RetryFlags {
  pool?: RlPool;
  temperature?: number;
  guide?: 'on';
}

/** What a run's config.json says that the curves need: its kind, recipe and curriculum, and a GRPO run's pre-flight. */
export interface RunMeta {
  kind: string;
  recipe: string | null;
  curriculum: CurriculumPhaseView[];
  preflight: PreflightView | null;
}

// =============================================================================================
// Grammar Debugger
// =============================================================================================

/** The acceptor before one character (or after the last one). */
export interface GrammarStep {
  /** `describeStates` of the live state set. */
  states: string[];
  /** Every single character that keeps a state alive, sorted by code point, joined. */
  allowed: string;
  /** The same characters as a reader scans them: ranges (`a-z`, `1-9`), `space`, the rest one by one. */
  allowedGroups: string[];
  /** A `<|end|>` would be legal here (the acceptor accepts). */
  accepts: boolean;
}

export interface GrammarTrace {
  /** The call body (between `<|tool_call|>` and `<|end|>`). */
  text: string;
  /** Its code points. */
  chars: string[];
  /** steps[i] = before chars[i]; one more than the characters consumed (to the rejection or the end). */
  steps: GrammarStep[];
  accepted: boolean;
  complete: boolean;
  rejectedAt: number | null;
  expected: string[];
  /** Why, in words (rejection or incompleteness), or null when complete. */
  reason: string | null;
}

export type GrammarSource =
  | { kind: 'editor'; uri: string; label: string; line: number }
  | { kind: 'typed' }
  | { kind: 'none'; message: string };

export interface GrammarState {
  panel: 'grammar';
  text: string;
  cursor: number;
  source: 'editor' | 'typed';
}

// =============================================================================================
// Compare Runs
// =============================================================================================

/** One split's figure of a run in the comparison: from an evaluation (eval/SPLIT.json) or the training's final point. */
export interface CompareFigure {
  split: string;
  accuracy: number;
  n: number | null;
  /** Tasks the split holds, when recorded. */
  of: number | null;
  step: number | null;
  source: 'evaluate' | 'training';
  /** Solved of evaluated per task shape. */
  byKind: Record<string, { n: number; accuracy: number }>;
  /** A GRPO run: its SFT start's figure on this split (the Runs view's comparison), when both were measured. */
  start?: number;
}

/** One run's row: what it is, how long it trained, and its figure per split. */
export interface CompareRow {
  dir: string;
  name: string;
  kind: string;
  recipe: string | null;
  status: string;
  steps: number | null;
  minutes: number | null;
  /** A GRPO run's SFT start (its folder's name). */
  from: string | null;
  figures: CompareFigure[];
  /** Splits with per-task rows (eval/SPLIT.jsonl) to compare task by task. */
  rowSplits: string[];
}

export interface CompareTable {
  rows: CompareRow[];
  /** Every split some run has a figure on, held-out first. */
  splits: string[];
  /** Every task shape some held-out figure has. */
  shapes: string[];
}

/** One task of a split as two runs answered it. */
export interface TaskSide {
  answer: string | null;
  solved: boolean | null;
  failure: string | null;
}
export interface TaskDiffRow {
  question: string;
  gold: string | null;
  kind: string;
  a: TaskSide;
  b: TaskSide;
}
/** Two runs' evaluations of one split side by side: the tasks one solves and the other does not. */
export interface TaskDiff {
  split: string;
  a: string;
  b: string;
  onlyA: TaskDiffRow[];
  onlyB: TaskDiffRow[];
  both: number;
  neither: number;
  /** Tasks only one run evaluated (a limited evaluation). */
  unmatched: number;
}

export interface CompareState {
  panel: 'compare';
}

export type PanelState = InspectorState | LossMaskState | CurvesState | GrammarState | CompareState;

// =============================================================================================
// Messages
// =============================================================================================

/** extension → webview */
export type ToWebview =
  /** `outcome`: the filter to open with ("Inspect Evaluation" opens the failures); absent: the webview's own. */
  | { type: 'inspector/load'; source: TrajectorySource; rows: TrajectorySummary[]; problems: string[]; outcome?: InspectorFilter['outcome'] }
  | { type: 'inspector/detail'; detail: TrajectoryDetail }
  | { type: 'inspector/error'; message: string }
  | { type: 'lossMask/show'; view: MaskView }
  | { type: 'lossMask/status'; level: 'info' | 'waiting' | 'error'; message: string }
  | { type: 'curves/run'; run: RunRef; records: MetricRecord[]; reset: boolean; live: boolean; problems: string[]; meta?: RunMeta | null }
  | { type: 'curves/removed'; id: string }
  | { type: 'curves/status'; message: string }
  | { type: 'grammar/trace'; source: GrammarSource; trace: GrammarTrace; cursor: number | null }
  | { type: 'compare/table'; table: CompareTable }
  | { type: 'compare/diff'; diff: TaskDiff }
  | { type: 'compare/status'; message: string };

/** webview → extension */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'inspector/select'; index: number }
  | { type: 'inspector/reveal'; index: number; step: number }
  | { type: 'lossMask/reveal'; start: number; end: number }
  | { type: 'curves/addRun' }
  | { type: 'curves/removeRun'; id: string }
  | { type: 'curves/savePng'; chart: string; dataUrl: string }
  /**
   * A refused GRPO run's card: train again from its SFT run with the suggested pool,
   * temperature or guide (the refused run's own pool otherwise), or anyway (--force).
   */
  | { type: 'curves/retryGrpo'; id: string; pool: string | null; force: boolean; temperature?: number; guide?: 'on' }
  /** A refused GRPO run's card: more SFT from its SFT run first (Train (SFT)'s budget question, then `--from`). */
  | { type: 'curves/sftMore'; id: string }
  | { type: 'grammar/check'; text: string }
  | { type: 'grammar/fromEditor' }
  | { type: 'grammar/reveal'; index: number }
  | { type: 'compare/refresh' }
  | { type: 'compare/askDiff'; a: string; b: string; split: string }
  | { type: 'compare/inspect'; run: string; split: string };

/** The panel a message type belongs to (`ready` belongs to every panel). */
export function panelOf(type: string): PanelKind | 'any' | null {
  if (type === 'ready') return 'any';
  const prefix = type.slice(0, type.indexOf('/'));
  return (PANEL_KINDS as readonly string[]).includes(prefix) ? (prefix as PanelKind) : null;
}

export type Parsed<T> = { ok: true; message: T } | { ok: false; error: string };
const ok = <T>(message: T): Parsed<T> => ({ ok: true, message });
const bad = <T>(error: string): Parsed<T> => ({ ok: false, error });

// ---- small checks ----------------------------------------------------------------------------

const isNat = (v: unknown, max: number = LIMITS.index): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max;
const isStr = (v: unknown, max = Infinity): v is string => typeof v === 'string' && v.length <= max;
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
const orNull = <T>(f: (v: unknown) => v is T) => (v: unknown): v is T | null => v === null || f(v);
const strOrNull = orNull((v): v is string => isStr(v));
const numOrNull = orNull(isNum);
const boolOrNull = orNull(isBool);
const strArray = (v: unknown, max = Infinity): v is string[] => Array.isArray(v) && v.length <= max && v.every((x) => typeof x === 'string');
/** `--temperature`'s bounds (the CLI's, ./grpoOptions.ts). */
const TEMPERATURE = GRPO_OPTION_TABLE.temperature;
const isTemperature = (v: unknown): v is number => isNum(v) && v >= TEMPERATURE.min && v <= TEMPERATURE.max;
/** Exactly these keys (a webview message carries nothing else). */
const onlyKeys = (v: Record<string, unknown>, keys: readonly string[]): boolean => Object.keys(v).every((k) => keys.includes(k));

// ---- webview → extension (untrusted) ---------------------------------------------------------

export function parseFromWebview(v: unknown): Parsed<FromWebview> {
  if (!isObj(v) || typeof v['type'] !== 'string') return bad('message must be an object with a string type');
  const t = v['type'];
  const keys = (...k: string[]) => onlyKeys(v, ['type', ...k]);
  switch (t) {
    case 'ready':
    case 'curves/addRun':
    case 'grammar/fromEditor':
    case 'compare/refresh':
      return keys() ? ok({ type: t }) : bad(`${t}: unexpected fields`);
    case 'inspector/select':
      return keys('index') && isNat(v['index']) ? ok({ type: t, index: v['index'] }) : bad(`${t}: index must be a natural number`);
    case 'inspector/reveal':
      return keys('index', 'step') && isNat(v['index']) && isNat(v['step'], 10_000)
        ? ok({ type: t, index: v['index'], step: v['step'] })
        : bad(`${t}: index and step must be natural numbers`);
    case 'lossMask/reveal': {
      const { start, end } = v;
      return keys('start', 'end') && isNat(start) && isNat(end) && end >= start
        ? ok({ type: t, start, end })
        : bad(`${t}: start and end must be natural numbers, start <= end`);
    }
    case 'curves/removeRun':
      return keys('id') && isStr(v['id'], 4096) ? ok({ type: t, id: v['id'] }) : bad(`${t}: id must be a string`);
    case 'curves/retryGrpo': {
      const { id, pool, force, temperature, guide } = v;
      if (!(keys('id', 'pool', 'force', 'temperature', 'guide') && isStr(id, 4096) && (pool === null || isSplitName(pool)) && isBool(force))) {
        return bad(`${t}: id must be a run folder, pool a pool name or null, force a boolean`);
      }
      if (temperature !== undefined && !isTemperature(temperature)) return bad(`${t}: temperature must be a number from ${TEMPERATURE.min} to ${TEMPERATURE.max}`);
      if (guide !== undefined && guide !== 'on') return bad(`${t}: guide must be 'on' when given`);
      return ok({ type: t, id, pool, force, ...(temperature !== undefined ? { temperature } : {}), ...(guide !== undefined ? { guide } : {}) });
    }
    case 'curves/sftMore':
      return keys('id') && isStr(v['id'], 4096) ? ok({ type: t, id: v['id'] }) : bad(`${t}: id must be a run folder`);
    case 'curves/savePng': {
      const { chart, dataUrl } = v;
      if (!keys('chart', 'dataUrl') || !isStr(chart, 64) || !/^[a-z0-9-]+$/.test(chart)) return bad(`${t}: chart must be a short id`);
      if (!isStr(dataUrl, LIMITS.pngDataUrl) || !/^data:image\/png;base64,[A-Za-z0-9+/]+={0,2}$/.test(dataUrl)) {
        return bad(`${t}: dataUrl must be a base64 PNG data URL under ${LIMITS.pngDataUrl} characters`);
      }
      return ok({ type: t, chart, dataUrl });
    }
    case 'grammar/check':
      return keys('text') && isStr(v['text'], LIMITS.text) ? ok({ type: t, text: v['text'] }) : bad(`${t}: text must be a string of at most ${LIMITS.text} characters`);
    case 'grammar/reveal':
      return keys('index') && isNat(v['index'], LIMITS.text) ? ok({ type: t, index: v['index'] }) : bad(`${t}: index must be a natural number`);
    case 'compare/askDiff': {
      const { a, b, split } = v;
      return keys('a', 'b', 'split') && isStr(a, 4096) && isStr(b, 4096) && isSplitName(split)
        ? ok({ type: t, a, b, split })
        : bad(`${t}: a and b must be run folders and split a split name`);
    }
    case 'compare/inspect': {
      const { run, split } = v;
      return keys('run', 'split') && isStr(run, 4096) && isSplitName(split) ? ok({ type: t, run, split }) : bad(`${t}: run must be a run folder and split a split name`);
    }
    default:
      return bad(`unknown message type ${JSON.stringify(t).slice(0, 80)}`);
  }
}

/** A validated message for `panel`, or why not (a message of another panel is refused too). */
export function parseFromWebviewFor(panel: PanelKind, v: unknown): Parsed<FromWebview> {
  const parsed = parseFromWebview(v);
  if (!parsed.ok) return parsed;
  const owner = panelOf(parsed.message.type);
  return owner === 'any' || owner === panel ? parsed : bad(`${parsed.message.type} is not a message of the ${panel} panel`);
}

// ---- extension → webview ---------------------------------------------------------------------

const isSource = (v: unknown): v is TrajectorySource =>
  isObj(v) && isStr(v['uri']) && isStr(v['label']) && (v['kind'] === 'transcript' || v['kind'] === 'dataset' || v['kind'] === 'eval');

const isGuard = (v: unknown): v is GuardName => GUARD_NAMES.includes(v as GuardName);

/** The fields a trajectory's summary and its detail share (where it is, what it asked, how it ended). */
function hasTrajectoryHeader(v: unknown): v is Record<string, unknown> {
  return (
    isObj(v) &&
    isNat(v['index']) &&
    isNat(v['line']) &&
    isStr(v['question']) &&
    isStr(v['kind']) &&
    boolOrNull(v['solved']) &&
    strOrNull(v['failure']) &&
    numOrNull(v['reward']) &&
    strOrNull(v['answer']) &&
    strOrNull(v['gold'])
  );
}

export function isTrajectorySummary(v: unknown): v is TrajectorySummary {
  return (
    hasTrajectoryHeader(v) &&
    isNat(v['steps']) &&
    Array.isArray(v['guards']) &&
    v['guards'].every(isGuard) &&
    strArray(v['calls'])
  );
}

function isStepCard(v: unknown): v is StepCard {
  if (!isObj(v)) return false;
  const call = v['call'];
  return (
    isNat(v['n']) &&
    isStr(v['thought']) &&
    (call === null || (isObj(call) && isStr(call['tool']) && isStr(call['args']))) &&
    strOrNull(v['malformed']) &&
    strOrNull(v['observation']) &&
    (v['guard'] === null || isGuard(v['guard'])) &&
    strOrNull(v['answer']) &&
    isBool(v['harness']) &&
    isNat(v['start']) &&
    isNat(v['end']) &&
    (v['end'] as number) >= (v['start'] as number)
  );
}

export function isTrajectoryDetail(v: unknown): v is TrajectoryDetail {
  return (
    hasTrajectoryHeader(v) &&
    Array.isArray(v['steps']) &&
    v['steps'].every(isStepCard) &&
    strArray(v['problems'])
  );
}

function isMaskView(v: unknown): v is MaskView {
  if (!isObj(v) || !isStr(v['label']) || !isLossMaskResult(v['mask'])) return false;
  const h = v['harness'];
  return h === null || (Array.isArray(h) && h.length === v['mask'].ids.length && h.every(isBool));
}

/** A split's name as a file name (eval/SPLIT.jsonl): lower-case words and dashes, nothing that walks a path. */
const isSplitName = (v: unknown): v is string => isStr(v, 64) && /^[a-z0-9][a-z0-9-]*$/.test(v);

const isKindMap = (v: unknown): boolean => isObj(v) && Object.values(v).every((f) => isObj(f) && isNum(f['n']) && isNum(f['accuracy']));

function isCompareFigure(v: unknown): v is CompareFigure {
  return (
    isObj(v) &&
    isStr(v['split']) &&
    isNum(v['accuracy']) &&
    numOrNull(v['n']) &&
    numOrNull(v['of']) &&
    numOrNull(v['step']) &&
    (v['source'] === 'evaluate' || v['source'] === 'training') &&
    isKindMap(v['byKind']) &&
    (v['start'] === undefined || isNum(v['start']))
  );
}

function isCompareRow(v: unknown): v is CompareRow {
  return (
    isObj(v) &&
    isStr(v['dir']) &&
    isStr(v['name']) &&
    isStr(v['kind']) &&
    strOrNull(v['recipe']) &&
    isStr(v['status']) &&
    numOrNull(v['steps']) &&
    numOrNull(v['minutes']) &&
    strOrNull(v['from']) &&
    Array.isArray(v['figures']) &&
    v['figures'].every(isCompareFigure) &&
    strArray(v['rowSplits'])
  );
}

export const isCompareTable = (v: unknown): v is CompareTable =>
  isObj(v) && Array.isArray(v['rows']) && v['rows'].every(isCompareRow) && strArray(v['splits']) && strArray(v['shapes']);

const isTaskSide = (v: unknown): v is TaskSide => isObj(v) && strOrNull(v['answer']) && boolOrNull(v['solved']) && strOrNull(v['failure']);
const isTaskDiffRow = (v: unknown): v is TaskDiffRow => isObj(v) && isStr(v['question']) && strOrNull(v['gold']) && isStr(v['kind']) && isTaskSide(v['a']) && isTaskSide(v['b']);

export const isTaskDiff = (v: unknown): v is TaskDiff =>
  isObj(v) &&
  isStr(v['split']) &&
  isStr(v['a']) &&
  isStr(v['b']) &&
  Array.isArray(v['onlyA']) &&
  v['onlyA'].every(isTaskDiffRow) &&
  Array.isArray(v['onlyB']) &&
  v['onlyB'].every(isTaskDiffRow) &&
  isNat(v['both']) &&
  isNat(v['neither']) &&
  isNat(v['unmatched']);

const isRunRef = (v: unknown): v is RunRef => isObj(v) && isStr(v['id']) && isStr(v['label']) && isStr(v['dir']);

const isCurriculumPhase = (v: unknown): v is CurriculumPhaseView => isObj(v) && isNum(v['fraction']) && isStr(v['turns']) && isNum(v['batch']);
const isPrescreenFigure = (v: unknown): v is PrescreenFigureView =>
  isObj(v) && isStr(v['kind']) && isNat(v['tasks']) && isNum(v['passRate']) && isNum(v['share']) && isNum(v['low']) && isNum(v['high']);

/** One verdict action: a GRPO retry with at least one known flag in bounds, or more SFT; nothing else. */
export function isPreflightAction(v: unknown): v is PreflightAction {
  if (!isObj(v)) return false;
  if (v['kind'] === 'sft-more') return onlyKeys(v, ['kind']);
  if (v['kind'] !== 'grpo' || !onlyKeys(v, ['kind', 'flags'])) return false;
  const f = v['flags'];
  return (
    isObj(f) &&
    Object.keys(f).length > 0 &&
    onlyKeys(f, ['pool', 'temperature', 'guide']) &&
    (f['pool'] === undefined || (RL_POOLS as readonly unknown[]).includes(f['pool'])) &&
    (f['temperature'] === undefined || isTemperature(f['temperature'])) &&
    (f['guide'] === undefined || f['guide'] === 'on')
  );
}

export function isPreflightView(v: unknown): v is PreflightView {
  if (!isObj(v) || !Array.isArray(v['checks'])) return false;
  if (!v['checks'].every((c) => isObj(c) && isStr(c['name']) && isBool(c['ok']) && isStr(c['detail']))) return false;
  const p = v['prescreen'];
  if (p !== null && !(isObj(p) && isNat(p['samples']) && isNat(p['group']) && isBool(p['wholePool']) && Array.isArray(p['figures']) && p['figures'].every(isPrescreenFigure))) {
    return false;
  }
  const d = v['verdict'];
  return (
    d === null ||
    (isObj(d) &&
      isBool(d['ok']) &&
      isNum(d['bound']) &&
      isNum(d['threshold']) &&
      strOrNull(d['cause']) &&
      strOrNull(d['detail']) &&
      strOrNull(d['next']) &&
      (d['actions'] === null || (Array.isArray(d['actions']) && d['actions'].every(isPreflightAction))) &&
      isBool(d['forced']) &&
      isBool(d['refused']))
  );
}

export function isRunMeta(v: unknown): v is RunMeta {
  return (
    isObj(v) &&
    isStr(v['kind']) &&
    strOrNull(v['recipe']) &&
    Array.isArray(v['curriculum']) &&
    v['curriculum'].every(isCurriculumPhase) &&
    (v['preflight'] === null || isPreflightView(v['preflight']))
  );
}

function isGrammarStep(v: unknown): v is GrammarStep {
  return isObj(v) && strArray(v['states']) && isStr(v['allowed']) && strArray(v['allowedGroups']) && isBool(v['accepts']);
}

export function isGrammarTrace(v: unknown): v is GrammarTrace {
  if (!isObj(v)) return false;
  const { text, chars, steps, rejectedAt } = v;
  if (!isStr(text) || !strArray(chars) || !Array.isArray(steps) || !steps.every(isGrammarStep)) return false;
  if (!isBool(v['accepted']) || !isBool(v['complete']) || !strArray(v['expected']) || !strOrNull(v['reason'])) return false;
  if (rejectedAt !== null && !(isNat(rejectedAt) && rejectedAt < chars.length)) return false;
  const consumed = rejectedAt === null ? chars.length : rejectedAt;
  return steps.length === consumed + 1 && chars.join('') === text;
}

function isGrammarSource(v: unknown): v is GrammarSource {
  if (!isObj(v)) return false;
  if (v['kind'] === 'typed') return true;
  if (v['kind'] === 'none') return isStr(v['message']);
  return v['kind'] === 'editor' && isStr(v['uri']) && isStr(v['label']) && isNat(v['line']);
}

/** The webviews' check of what the extension posts (a bug shows as an error, not a blank panel). */
export function parseToWebview(v: unknown): Parsed<ToWebview> {
  if (!isObj(v) || typeof v['type'] !== 'string') return bad('message must be an object with a string type');
  const t = v['type'];
  const yes = (cond: boolean): Parsed<ToWebview> => (cond ? ok(v as ToWebview) : bad(`${t}: unexpected shape`));
  switch (t) {
    case 'inspector/load':
      return yes(isSource(v['source']) && Array.isArray(v['rows']) && v['rows'].every(isTrajectorySummary) && strArray(v['problems']) && (v['outcome'] === undefined || v['outcome'] === 'all' || v['outcome'] === 'solved' || v['outcome'] === 'failed'));
    case 'inspector/detail':
      return yes(isTrajectoryDetail(v['detail']));
    case 'inspector/error':
    case 'curves/status':
    case 'compare/status':
      return yes(isStr(v['message']));
    case 'compare/table':
      return yes(isCompareTable(v['table']));
    case 'compare/diff':
      return yes(isTaskDiff(v['diff']));
    case 'lossMask/show':
      return yes(isMaskView(v['view']));
    case 'lossMask/status':
      return yes((v['level'] === 'info' || v['level'] === 'waiting' || v['level'] === 'error') && isStr(v['message']));
    case 'curves/run':
      return yes(
        isRunRef(v['run']) &&
          Array.isArray(v['records']) &&
          v['records'].every(isMetricRecord) &&
          isBool(v['reset']) &&
          isBool(v['live']) &&
          strArray(v['problems']) &&
          (v['meta'] === undefined || v['meta'] === null || isRunMeta(v['meta'])),
      );
    case 'curves/removed':
      return yes(isStr(v['id']));
    case 'grammar/trace':
      return yes(isGrammarSource(v['source']) && isGrammarTrace(v['trace']) && (v['cursor'] === null || isNat(v['cursor'])));
    default:
      return bad(`unknown message type ${JSON.stringify(t).slice(0, 80)}`);
  }
}

// ---- webview state (restored by the serializer after a reload) ---------------------------------

export function isInspectorFilter(v: unknown): v is InspectorFilter {
  return (
    isObj(v) &&
    (v['outcome'] === 'all' || v['outcome'] === 'solved' || v['outcome'] === 'failed') &&
    isStr(v['kind'], 64) &&
    isStr(v['failure'], 64) &&
    isStr(v['guard'], 64) &&
    isStr(v['text'], LIMITS.query)
  );
}

/** The state VS Code hands back to a serializer: validated (it was written by the webview). */
export function parsePanelState(panel: PanelKind, v: unknown): PanelState | null {
  if (!isObj(v) || v['panel'] !== panel) return null;
  switch (panel) {
    case 'inspector':
      return isSource(v['source']) &&
        isInspectorFilter(v['filter']) &&
        (v['selected'] === null || isNat(v['selected'])) &&
        typeof v['scrollTop'] === 'number' &&
        Number.isFinite(v['scrollTop']) &&
        v['scrollTop'] >= 0
        ? (v as unknown as InspectorState)
        : null;
    case 'lossMask':
      return strOrNull(v['uri']) && (v['row'] === null || isNat(v['row'])) ? (v as unknown as LossMaskState) : null;
    case 'curves':
      return strArray(v['runs'], LIMITS.runs) && strArray(v['hidden'], 1000) ? (v as unknown as CurvesState) : null;
    case 'grammar':
      return isStr(v['text'], LIMITS.text) && isNat(v['cursor'], LIMITS.text) && (v['source'] === 'editor' || v['source'] === 'typed')
        ? (v as unknown as GrammarState)
        : null;
    case 'compare':
      return { panel: 'compare' };
  }
}
