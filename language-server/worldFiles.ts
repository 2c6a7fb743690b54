// The world files a user writes (docs/worlds.md): fact tables (facts.csv, *.facts.csv,
// *.facts.jsonl, or any CSV starting "entity,attribute,value" / JSONL of those keys) and
// tasks files (tasks.jsonl, *.tasks.jsonl). Diagnostics come from core/worldSource.ts's own
// checks (every bad row, not only the first: checkFactTable / checkTasksFile), placed on the
// exact range of the field they name; on top, a non-numeric value of an attribute whose
// other values are numbers, and a hinted task whose fact the docs/ folder beside the tasks
// file does not state (or states with another value). Hovers: a fact's canonical clause and
// the tasks it takes part in; a task's facts as the corpus states them.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Node as JsonNode, findNodeAtLocation, parseTree } from 'jsonc-parser';
import { Diagnostic, DiagnosticSeverity, Hover, MarkupKind, Position, Range } from 'vscode-languageserver';
import { isNum } from '../core/world';
import type { Passage, Task } from '../core/types';
import {
  FactTable,
  SourceTask,
  TASK_SHAPES,
  WorldFileError,
  buildFactWorld,
  checkFactTable,
  checkTasksFile,
  chunkDocuments,
  corpusProblem,
  statedFact,
} from '../core/worldSource';

export type WorldFileKind = 'facts' | 'tasks';

/** Diagnostic codes of world files (stable: clients and tests match on them). */
export type WorldDiagnosticCode = 'fact-row' | 'duplicate-fact' | 'non-numeric-value' | 'task-row' | 'fact-not-in-corpus' | 'gold-differs';

const FACT_HEADER = 'entity,attribute,value';
const FACT_COLUMNS = ['entity', 'attribute', 'value'];
/** A docs/ folder bigger than this is not read for the corpus checks (they are skipped, and said). */
const DOCS_LIMIT_BYTES = 20 * 1024 * 1024;

/** Whether a file is a world file, by name first, then by its first row. */
export function worldFileKind(filePath: string, firstLine: string): WorldFileKind | null {
  const base = path.basename(filePath).toLowerCase();
  if (base === 'facts.csv' || base.endsWith('.facts.csv') || base === 'facts.jsonl' || base.endsWith('.facts.jsonl')) return 'facts';
  if (base === 'tasks.jsonl' || base.endsWith('.tasks.jsonl')) return 'tasks';
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

const lineOf = (text: string, line1: number): string => (text.split('\n')[line1 - 1] ?? '').replace(/\r$/, '');
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

function diagnostic(range: Range, severity: DiagnosticSeverity, code: WorldDiagnosticCode, message: string): Diagnostic {
  return { range, severity, code, source: 'agent-lab', message };
}

function problemDiagnostic(text: string, e: WorldFileError, csv: boolean, kind: WorldFileKind): Diagnostic {
  const lineText = lineOf(text, e.line);
  const range = fieldRange(lineText, e.line - 1, e.field, csv, e.problem.startsWith('unknown key') || e.problem.startsWith('unknown setting'));
  const code: WorldDiagnosticCode = e.problem.startsWith('duplicate fact') ? 'duplicate-fact' : kind === 'facts' ? 'fact-row' : 'task-row';
  return diagnostic(range, DiagnosticSeverity.Error, code, e.field !== null ? `field "${e.field}": ${e.problem}` : e.problem);
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

export interface WorldAnalysis {
  kind: WorldFileKind;
  diagnostics: Diagnostic[];
  /** Fact tables: the facts by 0-based line. */
  facts: Map<number, { clause: string; numeric: boolean }>;
  /**
   * The tasks each fact line takes part in, as `agent-lab world --facts` would make them
   * (seed 0); built on the first hover, not on every edit (thousands of facts take a while).
   */
  tasksOfLine: (line: number) => { split: string; task: Task }[];
  /** Tasks files: the tasks by 0-based line, with the corpus that was checked (null: no docs/ beside). */
  tasks: Map<number, SourceTask>;
  corpus: Passage[] | null;
}

export function analyseWorldFile(text: string, file: string, kind: WorldFileKind): WorldAnalysis {
  const a = kind === 'facts' ? analyseFacts(text, file) : analyseTasks(text, file);
  a.diagnostics.sort((x, y) => x.range.start.line - y.range.start.line || x.range.start.character - y.range.start.character);
  return a;
}

function analyseFacts(text: string, file: string): WorldAnalysis {
  const csv = /\.csv$/i.test(file);
  const { table, problems } = checkFactTable(text, file);
  const diagnostics = problems.map((e) => problemDiagnostic(text, e, csv, 'facts'));
  diagnostics.push(...nonNumericDiagnostics(text, table, csv));
  const facts: WorldAnalysis['facts'] = new Map();
  table.facts.forEach(([entity, attribute, value], i) => facts.set(table.lines[i]! - 1, { clause: `the ${attribute} of ${entity} is ${value}`, numeric: isNum(value) }));
  let membership: Map<number, { split: string; task: Task }[]> | null = null;
  const tasksOfLine = (line: number) => (membership ??= taskMembership(table)).get(line) ?? [];
  return { kind: 'facts', diagnostics, facts, tasksOfLine, tasks: new Map(), corpus: null };
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
function nonNumericDiagnostics(text: string, table: FactTable, csv: boolean): Diagnostic[] {
  const shapes = table.settings.shapes ?? TASK_SHAPES;
  if (!shapes.some((s) => s !== 'lookup')) return [];
  const byAttribute = new Map<string, { numeric: number; others: number[] }>();
  table.facts.forEach(([, attribute, value], i) => {
    const a = byAttribute.get(attribute) ?? { numeric: 0, others: [] };
    if (isNum(value)) a.numeric++;
    else a.others.push(i);
    byAttribute.set(attribute, a);
  });
  const out: Diagnostic[] = [];
  for (const [attribute, a] of byAttribute) {
    if (a.numeric <= a.others.length) continue;
    for (const i of a.others) {
      const line1 = table.lines[i]!;
      const [entity, , value] = table.facts[i]!;
      out.push(
        diagnostic(
          fieldRange(lineOf(text, line1), line1 - 1, 'value', csv),
          DiagnosticSeverity.Warning,
          'non-numeric-value',
          `field "value": ${JSON.stringify(value)} is not an integer, but ${a.numeric} other value(s) of "${attribute}" are: the ${attribute} of ${entity} is left out of the double, sum and compare tasks`,
        ),
      );
    }
  }
  return out;
}

function analyseTasks(text: string, file: string): WorldAnalysis {
  const { tasks, problems } = checkTasksFile(text, file);
  const diagnostics = problems.map((e) => problemDiagnostic(text, e, false, 'tasks'));
  const beside = corpusBeside(file);
  const corpus = beside && 'corpus' in beside ? beside.corpus : null;
  if (beside && 'skipped' in beside) diagnostics.push(diagnostic(wholeLine(0, ''), DiagnosticSeverity.Information, 'fact-not-in-corpus', beside.skipped));
  if (corpus) {
    for (const st of tasks) {
      if (!st.hinted) continue;
      const problem = corpusProblem(st.task, corpus);
      if (!problem) continue;
      const range = fieldRange(lineOf(text, st.line), st.line - 1, problem.field, false);
      diagnostics.push(
        diagnostic(
          range,
          DiagnosticSeverity.Warning,
          problem.reason === 'fact_not_in_corpus' ? 'fact-not-in-corpus' : 'gold-differs',
          `field "${problem.field}": ${problem.message} (docs/ beside this file)`,
        ),
      );
    }
  }
  return { kind: 'tasks', diagnostics, facts: new Map(), tasksOfLine: () => [], tasks: new Map(tasks.map((t) => [t.line - 1, t])), corpus };
}

const SPLIT_NAMES: Record<string, string> = { train: 'train', heldout: 'held-out', dev: 'dev' };

/** The hover of a world file's row. */
export function worldHover(a: WorldAnalysis, pos: Position): Hover | null {
  if (a.kind === 'facts') {
    const fact = a.facts.get(pos.line);
    if (!fact) return null;
    const lines = [`**Fact** · "${fact.clause}"${fact.numeric ? ' (numeric)' : ''}`, ''];
    const tasks = a.tasksOfLine(pos.line);
    if (tasks.length === 0) lines.push('In no task of the world (seed 0).');
    else {
      const counts = new Map<string, number>();
      for (const t of tasks) counts.set(`${SPLIT_NAMES[t.split]} ${t.task.kind}`, (counts.get(`${SPLIT_NAMES[t.split]} ${t.task.kind}`) ?? 0) + 1);
      lines.push(`In ${tasks.length} task(s) of the world (seed 0): ${[...counts].map(([k, n]) => `${k} ${n}`).join(', ')}`, '');
      for (const t of tasks.slice(0, 4)) lines.push(`- ${SPLIT_NAMES[t.split]} ${t.task.kind}: ${t.task.question} → \`${t.task.gold}\``);
      if (tasks.length > 4) lines.push(`- … and ${tasks.length - 4} more`);
    }
    return { contents: { kind: MarkupKind.Markdown, value: lines.join('\n') } };
  }
  const st = a.tasks.get(pos.line);
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
