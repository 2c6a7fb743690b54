// The world files a user writes (docs/worlds.md): fact tables (facts.csv, *.facts.csv,
// *.facts.jsonl, or any CSV starting "entity,attribute,value" / JSONL of those keys) and
// tasks files (tasks.jsonl, *.tasks.jsonl). Diagnostics come from core/worldSource.ts's own
// checks (every bad row, not only the first: checkFactTable / checkTasksFile), placed on the
// exact range of the field they name; on top, a non-numeric value of an attribute whose
// other values are numbers, and a hinted task whose fact the docs/ folder beside the tasks
// file does not state (or states with another value). Hovers: a fact's canonical clause and
// the tasks it takes part in; a task's facts as the corpus states them. The checks run on
// pieces of the file with pauses between them, and at most maxDiagnostics are made.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Node as JsonNode, findNodeAtLocation, parseTree } from 'jsonc-parser';
import { Diagnostic, DiagnosticSeverity, Hover, MarkupKind, Position, Range } from 'vscode-languageserver';
import { Fact, isNum } from '../core/world';
import { TASK_SHAPES, type Passage, type Task } from '../core/types';
import {
  FactSettings,
  FactTable,
  SourceTask,
  buildFactWorld,
  checkFactTable,
  checkTasksFile,
  chunkDocuments,
  corpusProblem,
  statedFact,
} from '../core/worldSource';
import { FACTS_CSV_SOURCE_FILE, FACTS_SOURCE_FILE, TASKS_SOURCE_FILE } from '../core/protocol/folders';

export type WorldFileKind = 'facts' | 'tasks';

/** Diagnostic codes of world files (stable: clients and tests match on them). */
export type WorldDiagnosticCode = 'fact-row' | 'duplicate-fact' | 'non-numeric-value' | 'task-row' | 'fact-not-in-corpus' | 'gold-differs';
/** The note that ends a capped list (the code the server's other notes of left-out problems use). */
export const LEFT_OUT_CODE = 'large-document';

const FACT_HEADER = 'entity,attribute,value';
const FACT_COLUMNS = ['entity', 'attribute', 'value'];
/** A docs/ folder bigger than this is not read for the corpus checks (they are skipped, and said). */
const DOCS_LIMIT_BYTES = 20 * 1024 * 1024;

/** Whether a file is a world file, by name first, then by its first row. */
export function worldFileKind(filePath: string, firstLine: string): WorldFileKind | null {
  const base = path.basename(filePath).toLowerCase();
  if (base === FACTS_CSV_SOURCE_FILE || base.endsWith('.facts.csv') || base === FACTS_SOURCE_FILE || base.endsWith('.facts.jsonl')) return 'facts';
  if (base === TASKS_SOURCE_FILE || base.endsWith('.tasks.jsonl')) return 'tasks';
  if (base.endsWith('.csv')) return firstLine.trim().toLowerCase() === FACT_HEADER ? 'facts' : null;
  if (base.endsWith('.jsonl')) {
    try {
      const row = JSON.parse(firstLine) as unknown;
      if (typeof row === 'object' && row !== null && !Array.isArray(row) && ('entity' in row || 'settings' in row) && !('text' in row)) return 'facts';
    } catch {
      return null;
    }
  }
  return null;
}

/** The first line that is not blank and (for a CSV) not a `#` comment. */
export function firstWorldLine(text: string, csv: boolean): string {
  for (const l of text.slice(0, 1 << 16).split('\n')) {
    const line = l.replace(/\r$/, '');
    if (line.trim() !== '' && !(csv && line.startsWith('#'))) return line;
  }
  return '';
}

const wholeLine = (line0: number, lineText: string): Range => ({ start: { line: line0, character: 0 }, end: { line: line0, character: lineText.length } });

/** Column spans of a CSV line's fields (quotes included), as core/worldSource.ts splits them. */
function csvSpans(line: string): { start: number; end: number }[] {
  const spans: { start: number; end: number }[] = [];
  let i = 0;
  for (;;) {
    const start = i;
    if (line[i] === '"') {
      i++;
      while (i < line.length && !(line[i] === '"' && line[i + 1] !== '"')) i += line[i] === '"' ? 2 : 1;
      i++;
    }
    while (i < line.length && line[i] !== ',') i++;
    spans.push({ start, end: Math.min(i, line.length) });
    if (i >= line.length) return spans;
    i++;
  }
}

/** `hints.facts[0]` → ['hints', 'facts', 0]. */
function jsonPath(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of field.split('.')) {
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) return [field];
    if (m[1]) out.push(m[1]);
    for (const idx of m[2]!.matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}

/** The range of a field in one line of a world file: a CSV column, a JSON value (or key), else the line. */
export function fieldRange(lineText: string, line0: number, field: string | null, csv: boolean, unknownKey = false): Range {
  const at = (start: number, end: number): Range => ({ start: { line: line0, character: start }, end: { line: line0, character: end } });
  if (field === null || field === 'header') return wholeLine(line0, lineText);
  if (csv) {
    const col = FACT_COLUMNS.indexOf(field);
    const spans = csvSpans(lineText);
    const span = col >= 0 ? spans[col] : undefined;
    // A missing column: the end of the line, where it should be.
    if (!span) return col >= 0 && spans.length <= col ? at(lineText.length, lineText.length) : wholeLine(line0, lineText);
    return at(span.start, span.end);
  }
  const root = parseTree(lineText);
  if (!root) return wholeLine(line0, lineText);
  let node: JsonNode | undefined = findNodeAtLocation(root, jsonPath(field));
  // An unknown key: its name; a value: the value.
  if (node && unknownKey && node.parent?.type === 'property') node = node.parent.children?.[0];
  if (!node) {
    // A missing key: the row's closing brace.
    return root.type === 'object' ? at(root.offset + root.length - 1, root.offset + root.length) : wholeLine(line0, lineText);
  }
  return at(node.offset, node.offset + node.length);
}

/**
 * The world formats' guide the messages cite: docs/worlds.md beside dist/ (the .vsix ships it) or
 * beside language-server/ (a checkout). Its file URI becomes the diagnostic code's link.
 */
const WORLD_GUIDE = path.resolve(__dirname, '..', 'docs', 'worlds.md');
let worldGuideHref: string | null | undefined;
function worldGuideLink(): string | undefined {
  if (worldGuideHref === undefined) worldGuideHref = fs.existsSync(WORLD_GUIDE) ? pathToFileURL(WORLD_GUIDE).href : null;
  return worldGuideHref ?? undefined;
}

function diagnostic(range: Range, severity: DiagnosticSeverity, code: WorldDiagnosticCode, message: string): Diagnostic {
  const href = message.includes('docs/worlds.md') ? worldGuideLink() : undefined;
  return { range, severity, code, source: 'agent-lab', message, ...(href ? { codeDescription: { href } } : {}) };
}

/**
 * Where each line of a text starts, the lines cut as core/worldSource.ts cuts them (at
 * '\n', a '\r' before it dropped): a problem's line is found without splitting the whole
 * file again (once per bad row, that was quadratic: minutes on a 30 MB table).
 */
class LineIndex {
  /** Typed, not number[]: a million growing slots in the JS heap meant GC pauses of tens of ms. */
  private starts = new Uint32Array(1024);
  private n = 1;
  constructor(readonly text: string) {}

  /** Finds the line starts, pausing every 16,384 lines. */
  *build(): Generator<void> {
    const text = this.text;
    for (let at = text.indexOf('\n'); at >= 0; at = text.indexOf('\n', at + 1)) {
      if (this.n === this.starts.length) {
        const grown = new Uint32Array(this.n * 2);
        grown.set(this.starts);
        this.starts = grown;
      }
      this.starts[this.n++] = at + 1;
      if ((this.n & 0x3fff) === 0) yield;
    }
  }

  get count(): number {
    return this.n;
  }

  start(i: number): number {
    return this.starts[i]!;
  }

  /** Where line i ends, before its line break (and a '\r' that ends the file). */
  end(i: number): number {
    const e = i + 1 < this.n ? this.starts[i + 1]! - 1 : this.text.length;
    return e > this.starts[i]! && this.text.charCodeAt(e - 1) === 13 ? e - 1 : e;
  }

  /** Line i (0-based) without its line break; '' past the end. */
  line(i: number): string {
    return i >= 0 && i < this.n ? this.text.slice(this.starts[i]!, this.end(i)) : '';
  }
}

/** One bad row: core's WorldFileError without the Error (its stack trace is dear on 100,000 rows). */
interface Problem {
  line: number;
  field: string | null;
  problem: string;
}

const problemCode = (e: Problem, kind: WorldFileKind): WorldDiagnosticCode =>
  e.problem.startsWith('duplicate fact') ? 'duplicate-fact' : kind === 'facts' ? 'fact-row' : 'task-row';

function problemDiagnostic(lines: LineIndex, e: Problem, csv: boolean, kind: WorldFileKind): Diagnostic {
  const lineText = lines.line(e.line - 1);
  const range = fieldRange(lineText, e.line - 1, e.field, csv, e.problem.startsWith('unknown key') || e.problem.startsWith('unknown setting'));
  return diagnostic(range, DiagnosticSeverity.Error, problemCode(e, kind), e.field !== null ? `field "${e.field}": ${e.problem}` : e.problem);
}

// ---- documents beside a tasks file -------------------------------------------------------------

/** The last corpus read per docs/ folder, with the files' sizes and times it was read from (edits to the tasks file reuse it). */
const corpusCache = new Map<string, { signature: string; corpus: Passage[] }>();

/** The docs/ folder beside a tasks file, chunked as `agent-lab world --docs` chunks it; null when there is none (or it is too big). */
export function corpusBeside(tasksFile: string): { corpus: Passage[]; dir: string } | { skipped: string } | null {
  const dir = path.join(path.dirname(tasksFile), 'docs');
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) return null;
  const files: string[] = [];
  const stamps: string[] = [];
  let bytes = 0;
  const walk = (d: string) => {
    for (const ent of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (ent.name.startsWith('.')) continue;
      const full = path.join(d, ent.name);
      if (ent.isDirectory()) walk(full);
      else if (ent.isFile() && /\.(txt|md)$/i.test(ent.name)) {
        const st = fs.statSync(full);
        files.push(full);
        stamps.push(`${full}\u0000${st.size}\u0000${st.mtimeMs}`);
        bytes += st.size;
      }
    }
  };
  walk(dir);
  if (bytes > DOCS_LIMIT_BYTES) return { skipped: `${dir} holds over ${DOCS_LIMIT_BYTES >> 20} MB of documents: the corpus checks are skipped` };
  const signature = stamps.join('\u0001');
  const hit = corpusCache.get(dir);
  if (hit && hit.signature === signature) return { corpus: hit.corpus, dir };
  const docs = files.map((f) => ({ relPath: path.relative(dir, f).split(path.sep).join('/'), text: fs.readFileSync(f, 'utf8') }));
  const corpus = chunkDocuments(docs);
  corpusCache.set(dir, { signature, corpus });
  return { corpus, dir };
}

// ---- the analysis ------------------------------------------------------------------------
//
// core's checks run on pieces of the file (about 16 K characters each) with a pause after
// each, so a 30 MB table never holds the server for more than a slice; what crosses a
// piece's edge (a CSV's header, a duplicate of an earlier piece's fact or question, a
// settings row after facts) is carried here, so every diagnostic is the whole file's.

export interface WorldAnalysis {
  kind: WorldFileKind;
  /** At most `maxDiagnostics`; when rows were left out, the last one says how many. */
  diagnostics: Diagnostic[];
  /** Fact tables: the fact on a 0-based line. */
  factAt: (line: number) => { clause: string; numeric: boolean } | null;
  /**
   * The tasks a fact line takes part in, as `agent-lab world --facts` would make them
   * (seed 0); built on the first hover, not on every edit (thousands of facts take a
   * while); null for a table over `maxFactsForTasks` facts.
   */
  tasksOfLine: (line: number) => { split: string; task: Task }[] | null;
  /** Tasks files: the task on a 0-based line. */
  taskAt: (line: number) => SourceTask | null;
  /** Tasks files: the corpus that was checked (null: no docs/ beside). */
  corpus: Passage[] | null;
}

export interface WorldAnalysisOptions {
  /** At most this many diagnostics; past it, the last one counts the rows left out. */
  maxDiagnostics?: number;
  /** About this many characters go to core's checks between two pauses. */
  pieceChars?: number;
  /** A larger fact table lists no tasks in its hovers: building its world blocks the server (1.8 s at 10,000 facts). */
  maxFactsForTasks?: number;
}

const WORLD_ANALYSIS_DEFAULTS: Required<WorldAnalysisOptions> = { maxDiagnostics: 2000, pieceChars: 16 * 1024, maxFactsForTasks: 5000 };

/** A world file's analysis in steps: it pauses after each piece (lspServer.ts runs it in time slices). */
export function* analyseWorldFileSteps(text: string, file: string, kind: WorldFileKind, options: WorldAnalysisOptions = {}): Generator<void, WorldAnalysis> {
  const opts = { ...WORLD_ANALYSIS_DEFAULTS, ...options };
  const lines = new LineIndex(text);
  yield* lines.build();
  return kind === 'facts' ? yield* analyseFacts(lines, file, opts) : yield* analyseTasks(lines, file, opts);
}

/** The whole analysis at once (tests, the bench). */
export function analyseWorldFile(text: string, file: string, kind: WorldFileKind, options: WorldAnalysisOptions = {}): WorldAnalysis {
  const steps = analyseWorldFileSteps(text, file, kind, options);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** The end (exclusive) of the piece from line `from`: about `chars` characters of whole lines, at least up to `atLeast`. */
function pieceEnd(lines: LineIndex, from: number, chars: number, atLeast: number): number {
  let to = Math.max(from + 1, atLeast);
  while (to < lines.count && lines.start(to) - lines.start(from) < chars) to++;
  return to;
}

/** Lines [from, to) as core reads them (the last piece keeps the file's very end, a lone '\r' included). */
function pieceText(lines: LineIndex, from: number, to: number): string {
  return lines.text.slice(lines.start(from), to < lines.count ? lines.end(to - 1) : lines.text.length);
}

/** Where `line` is in ascending `lines` (-1: not there). */
function indexOf(lines: readonly number[], line: number): number {
  let lo = 0;
  let hi = lines.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const v = lines[mid]!;
    if (v === line) return mid;
    if (v < line) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/**
 * A Map split in 64 by a hash of the key: one Map of a million keys rehashes them all at
 * once as it grows (150 ms in one step, while other documents' requests wait).
 */
class SpreadMap<V> {
  private readonly maps = Array.from({ length: 64 }, () => new Map<string, V>());

  private of(key: string): Map<string, V> {
    let h = 0;
    for (let i = 0; i < key.length; i++) h = (h * 31 + key.charCodeAt(i)) | 0;
    return this.maps[h & 63]!;
  }

  get(key: string): V | undefined {
    return this.of(key).get(key);
  }

  set(key: string, value: V): void {
    this.of(key).set(key, value);
  }
}

/** A diagnostic still to be made (only the shown ones are): its 1-based line and code. */
interface Pending {
  line: number;
  code: WorldDiagnosticCode;
  make: () => Diagnostic;
}

/**
 * The rows' problems and the other findings (both in line order) as diagnostics: at most
 * `maxDiagnostics`, the last then a note at the first row left out, counting the rest by code.
 */
function* finish(lines: LineIndex, problems: readonly Problem[], extras: readonly Pending[], csv: boolean, kind: WorldFileKind, maxDiagnostics: number): Generator<void, Diagnostic[]> {
  const max = Math.max(1, Math.floor(maxDiagnostics));
  const limit = problems.length + extras.length > max ? max - 1 : max;
  const shown: Diagnostic[] = [];
  const left = new Map<string, number>();
  let leftOut = 0;
  let firstLeft = 0;
  for (let i = 0, j = 0, n = 1; i < problems.length || j < extras.length; n++) {
    const extra = j < extras.length && (i >= problems.length || extras[j]!.line <= problems[i]!.line);
    if (shown.length < limit) shown.push(extra ? extras[j]!.make() : problemDiagnostic(lines, problems[i]!, csv, kind));
    else {
      const line = extra ? extras[j]!.line : problems[i]!.line;
      const code = extra ? extras[j]!.code : problemCode(problems[i]!, kind);
      if (leftOut++ === 0) firstLeft = line;
      left.set(code, (left.get(code) ?? 0) + 1);
    }
    if (extra) j++;
    else i++;
    // A JSON row's range is a parse: a pause every 64 made, every 65,536 counted.
    if (n % (shown.length < limit ? 64 : 0x10000) === 0) yield;
  }
  shown.sort((x, y) => x.range.start.line - y.range.start.line || x.range.start.character - y.range.start.character);
  if (leftOut > 0) {
    const n = (x: number): string => x.toLocaleString('en-US');
    shown.push({
      range: { start: { line: firstLeft - 1, character: 0 }, end: { line: firstLeft - 1, character: 0 } },
      severity: DiagnosticSeverity.Information,
      code: LEFT_OUT_CODE,
      source: 'agent-lab',
      message: `… and ${n(leftOut)} more rows like these, from line ${n(firstLeft)} on (${[...left].map(([c, k]) => `${n(k)} ${c}`).join(', ')}): at most ${n(max)} diagnostics are shown per document`,
    });
  }
  return shown;
}

/** A fact row no table holds (NULs for names): put before a JSONL piece once there are facts, so a settings row in it is refused as in the whole file. */
const PLACEHOLDER_FACT = '{"entity": "\\u0000", "attribute": "\\u0000", "value": "0"}';
const factKey = (f: Fact): string => `${f[0]}\u0000${f[1]}`;

/** The fact on one line, read again by core: a fact row reads the same alone as in its file (only a settings row depends on what came before). */
function factOn(lineText: string, csv: boolean, file: string): Fact | null {
  return checkFactTable(csv ? `${FACT_HEADER}\n${lineText}` : lineText, file).table.facts[0] ?? null;
}

/** Per attribute: how many values are integers, and the lines of the others (for the non-numeric check). */
type ValueCounts = Map<string, { numeric: number; others: number[] }>;

function* analyseFacts(lines: LineIndex, file: string, opts: Required<WorldAnalysisOptions>): Generator<void, WorldAnalysis> {
  const csv = /\.csv$/i.test(file);
  // Only the facts' lines are kept (hovers read a row again): a million facts' strings are
  // hundreds of MB. The facts themselves only while few enough to build the world from.
  const factLines: number[] = [];
  let facts: Fact[] | null = [];
  const counts: ValueCounts = new Map();
  let settings: FactSettings = {};
  const problems: Problem[] = [];
  let noFacts: Problem | null = null;
  /** The line of each fact's first occurrence (entity, attribute). */
  const seen = new SpreadMap<number>();
  // A CSV's header (the first line neither blank nor a comment, right or wrong) goes with the first piece.
  let headerAt = 0;
  if (csv) {
    headerAt = -1;
    for (let i = 0; i < lines.count && headerAt < 0; i++) {
      const l = i === 0 ? lines.line(0).replace(/^\uFEFF/, '') : lines.line(i);
      if (l.trim() !== '' && !l.startsWith('#')) headerAt = i;
      if ((i & 0x3fff) === 0x3fff) yield;
    }
  }
  for (let from = 0; from < lines.count; ) {
    const to = pieceEnd(lines, from, opts.pieceChars, from > 0 ? 0 : headerAt < 0 ? lines.count : headerAt + 1);
    // A later piece gets one line before it, so core reads its rows as in the whole file: a
    // CSV header; a JSONL fact once there are facts; else a blank line (core strips a BOM
    // only at the start of the text, so one on the piece's first row must not be there).
    const lead = from === 0 ? null : csv ? FACT_HEADER : factLines.length > 0 ? PLACEHOLDER_FACT : '';
    const body = pieceText(lines, from, to);
    const { table, problems: found } = checkFactTable(lead === null ? body : `${lead}\n${body}`, file);
    const lineOf = (local: number): number => local + from - (lead === null ? 0 : 1);
    if (!csv && lead !== PLACEHOLDER_FACT && Object.keys(table.settings).length > 0) settings = table.settings;
    const here: Problem[] = [];
    for (let i = lead === PLACEHOLDER_FACT ? 1 : 0; i < table.facts.length; i++) {
      const fact = table.facts[i]!;
      const line = lineOf(table.lines[i]!);
      const key = factKey(fact);
      const first = seen.get(key);
      if (first !== undefined) {
        // A fact given in an earlier piece: core's own wording (readFactTable).
        here.push({ line, field: 'attribute', problem: `duplicate fact: the ${fact[1]} of ${fact[0]} is already given on line ${first}` });
        continue;
      }
      seen.set(key, line);
      factLines.push(line);
      if (facts && facts.length < opts.maxFactsForTasks) facts.push(fact);
      else facts = null;
      let c = counts.get(fact[1]);
      if (!c) counts.set(fact[1], (c = { numeric: 0, others: [] }));
      if (isNum(fact[2])) c.numeric++;
      else c.others.push(line);
    }
    let keyAt: Map<number, string> | null = null;
    for (const e of found) {
      if (e.field === null && e.problem.startsWith('no facts:')) {
        noFacts ??= { line: 1, field: null, problem: e.problem };
        continue;
      }
      let problem = e.problem;
      const dup = problem.startsWith('duplicate fact: ') ? / on line (\d+)$/.exec(problem) : null;
      if (dup) {
        // Core numbered the piece's first occurrence; the file's first may be in an earlier piece.
        keyAt ??= new Map(table.lines.map((l, i) => [l, factKey(table.facts[i]!)]));
        const firstLocal = Number(dup[1]);
        problem = `${problem.slice(0, dup.index)} on line ${seen.get(keyAt.get(firstLocal) ?? '') ?? lineOf(firstLocal)}`;
      }
      here.push({ line: lineOf(e.line), field: e.field, problem });
    }
    here.sort((a, b) => a.line - b.line);
    for (const p of here) problems.push(p);
    from = to;
    yield;
  }
  if (factLines.length === 0 && problems.length === 0 && noFacts) problems.push(noFacts);
  const extras = nonNumeric(lines, counts, settings, csv, file);
  const diagnostics = yield* finish(lines, problems, extras, csv, 'facts', opts.maxDiagnostics);
  const table: FactTable | null = facts ? { facts, lines: factLines, settings } : null;
  let membership: Map<number, { split: string; task: Task }[]> | null = null;
  return {
    kind: 'facts',
    diagnostics,
    factAt: (line) => {
      const fact = indexOf(factLines, line + 1) >= 0 ? factOn(lines.line(line), csv, file) : null;
      if (!fact) return null;
      const [entity, attribute, value] = fact;
      return { clause: `the ${attribute} of ${entity} is ${value}`, numeric: isNum(value) };
    },
    tasksOfLine: (line) => (table ? ((membership ??= taskMembership(table)).get(line) ?? []) : null),
    taskAt: () => null,
    corpus: null,
  };
}

/** For each fact's 0-based line, the tasks of the world built from the table that use it. */
function taskMembership(table: FactTable): Map<number, { split: string; task: Task }[]> {
  const out = new Map<number, { split: string; task: Task }[]>();
  if (table.facts.length === 0) return out;
  let built;
  try {
    built = buildFactWorld(table);
  } catch {
    return out; // too few tasks for a world: the hover says only the clause (building the world says why)
  }
  const lineByFact = new Map(table.facts.map(([e, a], i) => [`${e}\u0000${a}`, table.lines[i]! - 1]));
  for (const [split, tasks] of [
    ['train', built.train],
    ['heldout', built.heldout],
    ['dev', built.dev],
  ] as const) {
    for (const task of tasks) {
      for (const [e, a] of task.hints.facts) {
        const line = lineByFact.get(`${e}\u0000${a}`);
        if (line === undefined) continue;
        const list = out.get(line) ?? [];
        list.push({ split, task });
        out.set(line, list);
      }
    }
  }
  return out;
}

/**
 * A value that is not an integer where most values of its attribute are: double, sum and
 * compare draw only numeric facts, so this fact is left out of them (likely a typo: "1,811", "12 K").
 */
function nonNumeric(lines: LineIndex, counts: ValueCounts, settings: FactSettings, csv: boolean, file: string): Pending[] {
  const shapes = settings.shapes ?? TASK_SHAPES;
  if (!shapes.some((s) => s !== 'lookup')) return [];
  let n = 0;
  for (const a of counts.values()) if (a.numeric > a.others.length) n += a.others.length;
  const flagged = new Uint32Array(n);
  n = 0;
  for (const a of counts.values()) if (a.numeric > a.others.length) for (const l of a.others) flagged[n++] = l;
  flagged.sort();
  return Array.from(flagged, (line1): Pending => ({
    line: line1,
    code: 'non-numeric-value',
    make: () => {
      const lineText = lines.line(line1 - 1);
      const [entity, attribute, value] = factOn(lineText, csv, file)!;
      return diagnostic(
        fieldRange(lineText, line1 - 1, 'value', csv),
        DiagnosticSeverity.Warning,
        'non-numeric-value',
        `field "value": ${JSON.stringify(value)} is not an integer, but ${counts.get(attribute)!.numeric} other value(s) of "${attribute}" are: the ${attribute} of ${entity} is left out of the double, sum and compare tasks`,
      );
    },
  }));
}

/** The question of a row core has read that far (null if it cannot be read again). */
function questionOf(lineText: string): string | null {
  try {
    const q = (JSON.parse(lineText.replace(/^\uFEFF/, '')) as { question?: unknown }).question;
    return typeof q === 'string' ? q : null;
  } catch {
    return null;
  }
}

function* analyseTasks(lines: LineIndex, file: string, opts: Required<WorldAnalysisOptions>): Generator<void, WorldAnalysis> {
  /** The tasks' lines only (a hover reads its row again, as facts do). */
  const taskLines: number[] = [];
  const problems: Problem[] = [];
  const extras: Pending[] = [];
  let noTasks: Problem | null = null;
  /** The line of each question's first row (core registers it once the row's question passes its checks). */
  const seen = new SpreadMap<number>();
  const beside = corpusBeside(file);
  const corpus = beside && 'corpus' in beside ? beside.corpus : null;
  if (beside && 'skipped' in beside) {
    const skipped = beside.skipped;
    extras.push({ line: 1, code: 'fact-not-in-corpus', make: () => diagnostic(wholeLine(0, ''), DiagnosticSeverity.Information, 'fact-not-in-corpus', skipped) });
  }
  for (let from = 0; from < lines.count; ) {
    const to = pieceEnd(lines, from, opts.pieceChars, 0);
    // A blank line before a later piece: core strips a BOM only at the start of the text.
    const lead = from === 0 ? null : '';
    const body = pieceText(lines, from, to);
    const { tasks: got, problems: found } = checkTasksFile(lead === null ? body : `${lead}\n${body}`, file);
    const lineOf = (local: number): number => local + from - (lead === null ? 0 : 1);
    const here: SourceTask[] = [];
    // The piece's rows in line order (each is a task or a problem), as core saw them in the whole file.
    for (let i = 0, j = 0; i < got.length || j < found.length; ) {
      if (j >= found.length || (i < got.length && got[i]!.line < found[j]!.line)) {
        const st = got[i++]!;
        const line = lineOf(st.line);
        const first = seen.get(st.task.question);
        if (first !== undefined) {
          // A question asked in an earlier piece: core's own wording (readTasksFile).
          problems.push({ line, field: 'question', problem: `the same question is on line ${first}` });
          continue;
        }
        seen.set(st.task.question, line);
        here.push({ ...st, line });
        continue;
      }
      const e = found[j++]!;
      if (e.field === null && e.problem.startsWith('no tasks:')) {
        noTasks ??= { line: 1, field: null, problem: e.problem };
        continue;
      }
      const line = lineOf(e.line);
      const dup = e.field === 'question' ? /^the same question is on line (\d+)$/.exec(e.problem) : null;
      // A bad kind or hints comes after core's duplicate check: the row's question counts.
      const pastQuestion = (e.field === 'kind' || e.field === 'hints' || (e.field?.startsWith('hints.') ?? false)) && !e.problem.startsWith('unknown key (a task has');
      const q = dup || pastQuestion ? questionOf(lines.line(line - 1)) : null;
      const first = q === null ? undefined : seen.get(q);
      if (dup) problems.push({ line, field: e.field, problem: `the same question is on line ${first ?? lineOf(Number(dup[1]))}` });
      else if (first !== undefined) problems.push({ line, field: 'question', problem: `the same question is on line ${first}` });
      else {
        if (q !== null) seen.set(q, line);
        problems.push({ line, field: e.field, problem: e.problem });
      }
    }
    for (const st of here) {
      taskLines.push(st.line);
      if (!corpus || !st.hinted) continue;
      const problem = corpusProblem(st.task, corpus);
      if (problem) {
        const code: WorldDiagnosticCode = problem.reason === 'fact_not_in_corpus' ? 'fact-not-in-corpus' : 'gold-differs';
        extras.push({
          line: st.line,
          code,
          make: () => diagnostic(fieldRange(lines.line(st.line - 1), st.line - 1, problem.field, false), DiagnosticSeverity.Warning, code, `field "${problem.field}": ${problem.message} (docs/ beside this file)`),
        });
      }
      yield; // a corpus check reads every passage
    }
    from = to;
    yield;
  }
  if (taskLines.length === 0 && problems.length === 0 && noTasks) problems.push(noTasks);
  const diagnostics = yield* finish(lines, problems, extras, false, 'tasks', opts.maxDiagnostics);
  return {
    kind: 'tasks',
    diagnostics,
    factAt: () => null,
    tasksOfLine: () => [],
    taskAt: (line) => {
      // A task row reads the same alone (only a repeated question depends on what came before, and it is no task).
      const st = indexOf(taskLines, line + 1) >= 0 ? checkTasksFile(lines.line(line), file).tasks[0] : undefined;
      return st ? { ...st, line: line + 1 } : null;
    },
    corpus,
  };
}

const SPLIT_NAMES: Record<string, string> = { train: 'train', heldout: 'held-out', dev: 'dev' };

/** The hover of a world file's row. */
export function worldHover(a: WorldAnalysis, pos: Position): Hover | null {
  if (a.kind === 'facts') {
    const fact = a.factAt(pos.line);
    if (!fact) return null;
    const lines = [`**Fact** · "${fact.clause}"${fact.numeric ? ' (numeric)' : ''}`, ''];
    const tasks = a.tasksOfLine(pos.line);
    if (tasks === null) lines.push('Its tasks are not listed: the table is too large to build its world in the editor (`agent-lab world --facts` builds it).');
    else if (tasks.length === 0) lines.push('In no task of the world (seed 0).');
    else {
      const counts = new Map<string, number>();
      for (const t of tasks) counts.set(`${SPLIT_NAMES[t.split]} ${t.task.kind}`, (counts.get(`${SPLIT_NAMES[t.split]} ${t.task.kind}`) ?? 0) + 1);
      lines.push(`In ${tasks.length} task(s) of the world (seed 0): ${[...counts].map(([k, n]) => `${k} ${n}`).join(', ')}`, '');
      for (const t of tasks.slice(0, 4)) lines.push(`- ${SPLIT_NAMES[t.split]} ${t.task.kind}: ${t.task.question} → \`${t.task.gold}\``);
      if (tasks.length > 4) lines.push(`- … and ${tasks.length - 4} more`);
    }
    return { contents: { kind: MarkupKind.Markdown, value: lines.join('\n') } };
  }
  const st = a.taskAt(pos.line);
  if (!st) return null;
  const lines = [`**Task** · ${st.task.kind} · gold \`${st.task.gold}\``, ''];
  if (!st.hinted) lines.push('No hints: the stub teacher cannot solve it (distill with the HTTP teacher or a trained student).');
  for (const f of st.task.hints.facts) {
    const stated = a.corpus ? statedFact(f, a.corpus) : undefined;
    lines.push(
      a.corpus === null
        ? `- the ${f[1]} of ${f[0]} (no docs/ folder beside this file to check it against)`
        : stated
          ? `- "the ${f[1]} of ${f[0]} is ${stated.value}" (${stated.docId})`
          : `- the ${f[1]} of ${f[0]}: **not in the corpus**`,
    );
  }
  return { contents: { kind: MarkupKind.Markdown, value: lines.join('\n') } };
}
