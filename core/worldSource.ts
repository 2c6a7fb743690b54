// A user's own world, from one of the two documented file formats (docs/worlds.md):
// a fact table (CSV `entity,attribute,value` or JSONL of the same keys) rendered through
// the seed's templates and task shapes, or a folder of documents chunked with the seed's
// chunk_words plus a tasks file. Parsing checks every row and names the file, the line and
// the field of the first problem; building is pure (the CLI writes the files), so a bad
// input writes nothing. Pure TypeScript: no Node, no vscode.
import { Template, checkCall } from './grammar';
import { findOverlaps, overlapKey } from './overlap';
import { renderCallBody } from './wire';
import { PyRandom } from './pyrandom';
import { isObj } from './protocol/isObj';
import { TASK_SHAPES, type Passage, type Task, type TaskHints, type TaskKind, type TaskOp } from './types';
import { CANONICAL_CLAUSE, Fact, PLAIN_TEMPLATES, buildCorpus, buildOwnCorpus, chunkWords, doubleTask, isNum, lookupTask, makeTasks } from './world';

/** One problem in a world file: where (file, 1-based line, field) and what. */
export class WorldFileError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly field: string | null,
    readonly problem: string,
  ) {
    super(`${file}:${line}: ${field !== null ? `field "${field}": ` : ''}${problem}`);
  }
}

/** Settings a fact table may carry (a JSONL `{"settings": {...}}` first row) or the CLI may give. */
export interface FactSettings {
  distractors?: number;
  shapes?: TaskKind[];
  /** The user's own surface forms (docs/worlds.md, "Your own sentences"); unset, PLAIN_TEMPLATES. */
  templates?: string[];
}

export interface FactTable {
  facts: Fact[];
  /** The 1-based line each fact came from (for later messages). */
  lines: number[];
  settings: FactSettings;
}

/**
 * A value may not hold '.', ',' or ';': the corpus's canonical clause "the {attr} of
 * {entity} is {value}" ends at the first of them, so the teacher could not read it back
 * (core/stubTeacher.ts extractFact). Newlines would break the wire format's lines.
 */
const VALUE_FORBIDDEN = /[.,;\n\r]/;
const NAME_FORBIDDEN = /[\n\r]/;

/** A wire-format special (`<|end|>`, or any `<|name|>`): in a world's text it would forge turns of a transcript. */
const SPECIAL_LIKE = /<\|[a-z_]+\|>/;

/** The first special-token-like text in `text`, or null. */
export function specialTokenIn(text: string): string | null {
  return SPECIAL_LIKE.exec(text)?.[0] ?? null;
}

/**
 * A document's text is refused when it holds a wire-format special (it would end the tool
 * result it is shown in and forge supervised turns) or a NUL byte (a binary file, not notes).
 */
export function checkDocumentText(file: string, text: string): void {
  const nul = text.indexOf('\u0000');
  if (nul >= 0) throw new WorldFileError(file, lineAt(text, nul), null, 'holds a NUL byte: a binary file, not a document (only text files become passages)');
  const m = SPECIAL_LIKE.exec(text);
  if (m) throw new WorldFileError(file, lineAt(text, m.index), null, `holds ${m[0]}, a special token of the wire format: a passage holding it would forge turns of the transcripts it is shown in (write it otherwise, e.g. without the bars)`);
}

const lineAt = (text: string, offset: number): number => {
  let line = 1;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) line++;
  return line;
};

function checkFact(file: string, line: number, entity: string, attribute: string, value: string): void {
  const fields: [string, string][] = [
    ['entity', entity],
    ['attribute', attribute],
    ['value', value],
  ];
  for (const [name, v] of fields) {
    if (v.trim() === '') throw new WorldFileError(file, line, name, 'is empty');
    if (v !== v.trim()) throw new WorldFileError(file, line, name, `has leading or trailing spaces (${JSON.stringify(v)})`);
    if (NAME_FORBIDDEN.test(v)) throw new WorldFileError(file, line, name, 'holds a line break');
    const special = specialTokenIn(v);
    if (special !== null) throw new WorldFileError(file, line, name, `holds ${special}, a special token of the wire format (it would forge turns of the transcripts)`);
  }
  // Python's int("007") is 7 but the calculator's 2*007 is a SyntaxError (as in Python): such a
  // value would be numeric for the world and unreadable for every tool that computes with it.
  if (/^-*0[0-9]/.test(value)) {
    throw new WorldFileError(file, line, 'value', `${JSON.stringify(value)} has a leading zero: the calculator reads numbers as Python does, where it is not a number; write ${JSON.stringify(value.replace(/^(-*)0+(?=[0-9])/, '$1'))}, or a text value (e.g. ${JSON.stringify(`No. ${value}`)})`);
  }
  if (VALUE_FORBIDDEN.test(value)) {
    throw new WorldFileError(
      file,
      line,
      'value',
      `${JSON.stringify(value)} holds '.', ',' or ';', where the corpus sentence "the ${attribute} of ${entity} is ..." would end ` +
        `(${scaledHint(attribute, value)}; see docs/worlds.md)`,
    );
  }
  if (/^-*[0-9]+$/.test(value) && /^--/.test(value)) throw new WorldFileError(file, line, 'value', `${JSON.stringify(value)} is not a number (write -5, not --5)`);
}

/** The most words a template may have: a rendered fact stays one passage (chunk_words cuts at 80). */
export const MAX_TEMPLATE_WORDS = 50;

/**
 * Checks one surface form a user wrote: only the placeholders {n} {entity} {attribute}
 * {value}, and the canonical clause "the {attribute} of {entity} is {value}" ended by '.',
 * ',' or ';' (the teacher and the world's checks read the value back from it).
 */
export function checkTemplate(file: string, line: number, field: string, text: string): void {
  if (text.trim() === '') throw new WorldFileError(file, line, field, 'is empty');
  if (/[\n\r]/.test(text)) throw new WorldFileError(file, line, field, 'holds a line break');
  const special = specialTokenIn(text);
  if (special !== null) throw new WorldFileError(file, line, field, `holds ${special}, a special token of the wire format (it would forge turns of the transcripts)`);
  const brace = /\{[^{}]*\}|[{}]/g;
  for (let m = brace.exec(text); m; m = brace.exec(text)) {
    if (!/^\{(n|entity|attribute|value)\}$/.test(m[0])) {
      throw new WorldFileError(file, line, field, `${JSON.stringify(m[0])} is not a placeholder (a template has {entity}, {attribute}, {value} and, if you like, {n}, the fact's number)`);
    }
  }
  const at = text.indexOf(CANONICAL_CLAUSE);
  if (at < 0 || !/^[.,;]/.test(text.slice(at + CANONICAL_CLAUSE.length))) {
    throw new WorldFileError(
      file,
      line,
      field,
      `${JSON.stringify(text)} does not hold the canonical clause "${CANONICAL_CLAUSE}" followed by '.', ',' or ';' ` +
        '(lower-case "the", the placeholders as written): the teacher reads each value back from that clause (docs/worlds.md)',
    );
  }
  const words = text.trim().split(/\s+/).length;
  if (words > MAX_TEMPLATE_WORDS) throw new WorldFileError(file, line, field, `has ${words} words; a template has at most ${MAX_TEMPLATE_WORDS} (a fact's sentence must stay one passage)`);
}

/** A CSV's template line: "# template: ..." (any other line starting with # is a comment). */
const CSV_TEMPLATE = /^#\s*template\s*:\s*(.*)$/i;

/** How to write a decimal as an integer, in the row's own terms ("3.5" of "length in km": 35, "length in km in tenths"). */
function scaledHint(attribute: string, value: string): string {
  const m = /^(-?)([0-9]+)\.([0-9]+)$/.exec(value);
  if (!m) return "write it without '.', ',' and ';'";
  const places = m[3]!.length;
  const unit = ['tenths', 'hundredths', 'thousandths'][places - 1] ?? `units of 10^-${places}`;
  const scaled = `${m[1]}${(m[2]! + m[3]!).replace(/^0+(?=[0-9])/, '')}`;
  return `write an integer and say the scale in the attribute: ${JSON.stringify(scaled)} as the ${attribute} in ${unit}, or round it`;
}

/** RFC 4180 fields of one CSV line (quotes with "" inside; no line breaks inside a field). */
function csvFields(text: string, file: string, line: number): string[] {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    let field = '';
    if (text[i] === '"') {
      i++;
      for (;;) {
        if (i >= text.length) throw new WorldFileError(file, line, null, 'a quoted field is not closed (a field may not span lines)');
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            field += '"';
            i += 2;
            continue;
          }
          i++;
          break;
        }
        field += text[i++];
      }
      if (i < text.length && text[i] !== ',') throw new WorldFileError(file, line, null, `text after a closing quote at column ${i + 1}`);
    } else {
      while (i < text.length && text[i] !== ',') field += text[i++];
    }
    out.push(field);
    if (i >= text.length) return out;
    i++; // the comma
  }
}

const FACT_COLUMNS = ['entity', 'attribute', 'value'] as const;

function splitLines(text: string): string[] {
  return text.replace(/^\uFEFF/, '').split(/\r?\n/);
}

/**
 * Runs one row's checks. Without `problems` a problem is thrown (the CLI stops at the first);
 * with it the problem is recorded and the row skipped, so an editor can show every bad row
 * from the same checks (language-server/worldFiles.ts).
 */
function checkedRow(problems: WorldFileError[] | undefined, check: () => void): void {
  if (!problems) return check();
  try {
    check();
  } catch (err) {
    if (!(err instanceof WorldFileError)) throw err;
    problems.push(err);
  }
}

function parseCsvTable(text: string, file: string, problems?: WorldFileError[]): FactTable {
  const facts: Fact[] = [];
  const lines: number[] = [];
  const templates: string[] = [];
  let header = false;
  splitLines(text).forEach((raw, i) => checkedRow(problems, () => {
    const line = i + 1;
    const template = CSV_TEMPLATE.exec(raw.replace(/^\uFEFF/, ''));
    if (template) {
      const t = template[1]!.trim();
      checkTemplate(file, line, 'template', t);
      templates.push(t);
      return;
    }
    if (raw.trim() === '' || raw.startsWith('#')) return;
    if (!header) {
      // The first data line is the header, right or wrong (a wrong one is reported once).
      header = true;
      const got = csvFields(raw, file, line).map((f) => f.trim().toLowerCase());
      if (got.length !== 3 || got.some((g, j) => g !== FACT_COLUMNS[j])) {
        throw new WorldFileError(file, line, 'header', `expected the header "entity,attribute,value", got ${JSON.stringify(raw)}`);
      }
      return;
    }
    const fields = csvFields(raw, file, line);
    if (fields.length !== 3) {
      const field = fields.length < 3 ? FACT_COLUMNS[fields.length]! : 'value';
      throw new WorldFileError(file, line, field, `expected 3 columns (entity,attribute,value), got ${fields.length}`);
    }
    const [entity, attribute, value] = fields as [string, string, string];
    checkFact(file, line, entity, attribute, value);
    facts.push([entity, attribute, value]);
    lines.push(line);
  }));
  if (!header) checkedRow(problems, () => {
    throw new WorldFileError(file, 1, 'header', 'the file is empty: expected the header "entity,attribute,value"');
  });
  return { facts, lines, settings: templates.length > 0 ? { templates } : {} };
}


export function parseSettings(v: unknown, file: string, line: number, field = 'settings'): FactSettings {
  if (!isObj(v)) throw new WorldFileError(file, line, field, 'must be an object {"distractors": N, "shapes": [...], "templates": [...]}');
  const out: FactSettings = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === 'distractors') {
      if (!Number.isSafeInteger(x) || (x as number) < 0 || (x as number) > 100000) throw new WorldFileError(file, line, `${field}.distractors`, 'must be an integer from 0 to 100000');
      out.distractors = x as number;
    } else if (k === 'shapes') {
      if (!Array.isArray(x) || x.length === 0 || !x.every((s) => TASK_SHAPES.includes(s as TaskKind))) {
        throw new WorldFileError(file, line, `${field}.shapes`, `must be a non-empty list of ${TASK_SHAPES.join(', ')}`);
      }
      out.shapes = [...new Set(x as TaskKind[])];
    } else if (k === 'templates') {
      if (!Array.isArray(x) || x.length === 0) throw new WorldFileError(file, line, `${field}.templates`, `must be a non-empty list of sentences, each holding "${CANONICAL_CLAUSE}"`);
      x.forEach((t, i) => {
        if (typeof t !== 'string') throw new WorldFileError(file, line, `${field}.templates[${i}]`, 'must be a string');
        checkTemplate(file, line, `${field}.templates[${i}]`, t);
      });
      out.templates = [...(x as string[])];
    } else throw new WorldFileError(file, line, `${field}.${k}`, 'unknown setting (known: distractors, shapes, templates)');
  }
  return out;
}

function parseJsonlTable(text: string, file: string, problems?: WorldFileError[]): FactTable {
  const facts: Fact[] = [];
  const lines: number[] = [];
  let settings: FactSettings = {};
  splitLines(text).forEach((raw, i) => checkedRow(problems, () => {
    const line = i + 1;
    if (raw.trim() === '') return;
    let row: unknown;
    try {
      row = JSON.parse(raw);
    } catch (err) {
      throw new WorldFileError(file, line, null, `not JSON (${(err as Error).message.split('\n')[0]})`);
    }
    if (!isObj(row)) throw new WorldFileError(file, line, null, 'expected an object {"entity", "attribute", "value"}');
    if ('settings' in row) {
      if (facts.length > 0) throw new WorldFileError(file, line, 'settings', 'a settings row must come before the facts');
      if (Object.keys(row).length !== 1) throw new WorldFileError(file, line, 'settings', 'a settings row holds only "settings"');
      settings = parseSettings(row['settings'], file, line);
      return;
    }
    for (const k of Object.keys(row)) if (!(FACT_COLUMNS as readonly string[]).includes(k)) throw new WorldFileError(file, line, k, 'unknown key (a fact row has entity, attribute, value)');
    const strings: string[] = [];
    for (const k of FACT_COLUMNS) {
      const v = row[k];
      if (v === undefined) throw new WorldFileError(file, line, k, 'is missing');
      if (k === 'value' && typeof v === 'number') {
        if (!Number.isSafeInteger(v)) throw new WorldFileError(file, line, k, `${v} is not an integer (write decimals scaled; see docs/worlds.md)`);
        strings.push(String(v));
      } else if (typeof v === 'string') strings.push(v);
      else throw new WorldFileError(file, line, k, `must be a string${k === 'value' ? ' or an integer' : ''}`);
    }
    const [entity, attribute, value] = strings as [string, string, string];
    checkFact(file, line, entity, attribute, value);
    facts.push([entity, attribute, value]);
    lines.push(line);
  }));
  return { facts, lines, settings };
}

/** A fact table: CSV when the file name ends in .csv, else JSONL. Duplicates and an empty table are errors. */
/** The most facts one world is built from. */
export const MAX_FACTS = 100_000;

export function parseFactTable(text: string, file: string): FactTable {
  return readFactTable(text, file);
}

/**
 * Every problem of a fact table, by the same checks as parseFactTable: the good rows (a
 * duplicate's first occurrence kept) and one WorldFileError per bad row, in line order.
 */
export function checkFactTable(text: string, file: string): { table: FactTable; problems: WorldFileError[] } {
  const problems: WorldFileError[] = [];
  const table = readFactTable(text, file, problems);
  problems.sort((a, b) => a.line - b.line);
  return { table, problems };
}

function readFactTable(text: string, file: string, problems?: WorldFileError[]): FactTable {
  const table = /\.csv$/i.test(file) ? parseCsvTable(text, file, problems) : parseJsonlTable(text, file, problems);
  const seen = new Map<string, number>();
  const keep: boolean[] = table.facts.map(() => true);
  table.facts.forEach(([e, a], i) => checkedRow(problems, () => {
    const key = `${e}\u0000${a}`;
    const first = seen.get(key);
    if (first !== undefined) {
      keep[i] = false;
      throw new WorldFileError(file, table.lines[i]!, 'attribute', `duplicate fact: the ${a} of ${e} is already given on line ${first}`);
    }
    seen.set(key, table.lines[i]!);
  }));
  // A world holds ~5 KB of tasks and passages per fact while it is built: past this, memory, not
  // the file cap, is the limit (and no 2-core student trains on such a world).
  if (table.facts.length > MAX_FACTS) checkedRow(problems, () => {
    throw new WorldFileError(file, table.lines[MAX_FACTS]!, null, `the table has ${table.facts.length} facts; a world takes at most ${MAX_FACTS} (split it into several worlds)`);
  });
  if (table.facts.length === 0 && !problems?.length) checkedRow(problems, () => {
    throw new WorldFileError(file, 1, null, 'no facts: the table needs at least one row');
  });
  return { facts: table.facts.filter((_, i) => keep[i]), lines: table.lines.filter((_, i) => keep[i]), settings: table.settings };
}

// ---- documents and questions ---------------------------------------------------------

/** A document as read: its path relative to the docs folder ('/'-separated) and its text. */
export interface DocFile {
  relPath: string;
  text: string;
}

/** The seed's chunk_words (80 words, overlap 16) per file; doc ids "PATH#J". Empty files give nothing. */
export function chunkDocuments(docs: readonly DocFile[]): Passage[] {
  const sorted = [...docs].sort((a, b) => (a.relPath < b.relPath ? -1 : a.relPath > b.relPath ? 1 : 0));
  const out: Passage[] = [];
  for (const d of sorted) {
    if (d.text.trim() === '') continue;
    chunkWords(d.text, 80, 16).forEach((piece, j) => out.push({ docId: `${d.relPath}#${j}`, text: piece }));
  }
  return out;
}

/** A task of a tasks file; `hinted` = it carries an answer key the stub teacher can follow. */
export interface SourceTask {
  task: Task;
  hinted: boolean;
  line: number;
}

const TASK_KEYS = ['question', 'gold', 'kind', 'hints'];
// A tasks file's kinds are the four SFT shapes (TASK_SHAPES); difference is listed for the record's sake.
const OP_OF: Record<TaskKind, TaskOp> = { lookup: null, double: 'double', sum: 'sum', compare: 'compare', difference: 'difference' };
const FACTS_OF: Record<TaskKind, number> = { lookup: 1, double: 1, sum: 2, compare: 2, difference: 2 };

/** Hints with no answer key: the stub teacher cannot follow them; an HTTP teacher or a student can. */
export const NO_HINTS: TaskHints = { queries: [], facts: [], op: null };

export function isHinted(task: Task): boolean {
  return task.hints.queries.length > 0;
}

function parseHints(v: unknown, kind: TaskKind | undefined, file: string, line: number): { hints: TaskHints; kind: TaskKind } {
  const bad = (field: string, what: string) => new WorldFileError(file, line, field, what);
  if (!isObj(v)) throw bad('hints', 'must be an object {"queries", "facts", "op"[, "names"]}');
  for (const k of Object.keys(v)) if (!['queries', 'facts', 'op', 'names'].includes(k)) throw bad(`hints.${k}`, 'unknown key (hints have queries, facts, op, names)');
  const { queries, facts, op, names } = v;
  if (!Array.isArray(queries) || queries.length === 0) throw bad('hints.queries', 'must be a non-empty list of search queries');
  queries.forEach((q, i) => {
    if (typeof q !== 'string' || q.trim() === '') throw bad(`hints.queries[${i}]`, 'must be a non-empty string');
  });
  if (!Array.isArray(facts)) throw bad('hints.facts', 'must be a list of [entity, attribute] pairs');
  facts.forEach((f, i) => {
    if (!Array.isArray(f) || f.length !== 2 || !f.every((x) => typeof x === 'string' && x.trim() !== '')) throw bad(`hints.facts[${i}]`, 'must be an [entity, attribute] pair of strings');
  });
  if (facts.length !== queries.length) throw bad('hints.facts', `needs one fact per query (${queries.length} queries, ${facts.length} facts)`);
  if (op !== undefined && op !== null && op !== 'double' && op !== 'sum' && op !== 'compare') throw bad('hints.op', 'must be null, "double", "sum" or "compare"');
  const opValue: TaskOp = (op ?? null) as TaskOp;
  const derived: TaskKind = opValue === null ? 'lookup' : opValue;
  const k = kind ?? derived;
  if (OP_OF[k] !== opValue) throw bad('hints.op', `a ${k} task has op ${JSON.stringify(OP_OF[k])}, got ${JSON.stringify(opValue)}`);
  if (facts.length !== FACTS_OF[k]) throw bad('hints.facts', `a ${k} task needs ${FACTS_OF[k]} fact(s), got ${facts.length}`);
  let namePair: [string, string] | undefined;
  if (k === 'compare') {
    if (!Array.isArray(names) || names.length !== 2 || !names.every((x) => typeof x === 'string')) throw bad('hints.names', 'a compare task needs names: [entity1, entity2]');
    namePair = [names[0] as string, names[1] as string];
  } else if (names !== undefined) throw bad('hints.names', `only compare tasks have names (this is ${k})`);
  const hints: TaskHints = {
    queries: [...(queries as string[])],
    facts: (facts as [string, string][]).map(([e, a]): [string, string] => [e, a]),
    op: opValue,
    ...(namePair ? { names: namePair } : {}),
  };
  return { hints, kind: k };
}

/** A tasks file (JSONL: question, gold, optional kind, optional hints in the seed's shape). */
export function parseTasksFile(text: string, file: string): SourceTask[] {
  return readTasksFile(text, file);
}

/** Every problem of a tasks file, by the same checks as parseTasksFile: the good tasks and one WorldFileError per bad row. */
export function checkTasksFile(text: string, file: string): { tasks: SourceTask[]; problems: WorldFileError[] } {
  const problems: WorldFileError[] = [];
  const tasks = readTasksFile(text, file, problems);
  return { tasks, problems };
}

function readTasksFile(text: string, file: string, problems?: WorldFileError[]): SourceTask[] {
  const out: SourceTask[] = [];
  const seen = new Map<string, number>();
  splitLines(text).forEach((raw, i) => checkedRow(problems, () => {
    const line = i + 1;
    if (raw.trim() === '') return;
    let row: unknown;
    try {
      row = JSON.parse(raw);
    } catch (err) {
      throw new WorldFileError(file, line, null, `not JSON (${(err as Error).message.split('\n')[0]})`);
    }
    if (!isObj(row)) throw new WorldFileError(file, line, null, 'expected an object {"question", "gold"[, "kind", "hints"]}');
    for (const k of Object.keys(row)) if (!TASK_KEYS.includes(k)) throw new WorldFileError(file, line, k, `unknown key (a task has ${TASK_KEYS.join(', ')})`);
    for (const k of ['question', 'gold']) {
      const v = row[k];
      if (v === undefined) throw new WorldFileError(file, line, k, 'is missing');
      if (typeof v !== 'string') throw new WorldFileError(file, line, k, 'must be a string');
      if (v.trim() === '') throw new WorldFileError(file, line, k, 'is empty');
      if (/[\n\r]/.test(v)) throw new WorldFileError(file, line, k, 'holds a line break');
    }
    const question = row['question'] as string;
    const gold = row['gold'] as string;
    if (/<\|[a-z_]+\|>/.test(question)) throw new WorldFileError(file, line, 'question', 'holds a special token such as <|end|>');
    if (specialTokenIn(gold) !== null) throw new WorldFileError(file, line, 'gold', `holds ${specialTokenIn(gold)}, a special token of the wire format`);
    const first = seen.get(question);
    if (first !== undefined) throw new WorldFileError(file, line, 'question', `the same question is on line ${first}`);
    seen.set(question, line);
    let kind: TaskKind | undefined;
    if (row['kind'] !== undefined) {
      if (!TASK_SHAPES.includes(row['kind'] as TaskKind)) throw new WorldFileError(file, line, 'kind', `must be one of ${TASK_SHAPES.join(', ')}`);
      kind = row['kind'] as TaskKind;
    }
    if (row['hints'] === undefined) {
      out.push({ task: { question, gold, kind: kind ?? 'lookup', hints: NO_HINTS }, hinted: false, line });
      return;
    }
    const parsed = parseHints(row['hints'], kind, file, line);
    out.push({ task: { question, gold, kind: parsed.kind, hints: parsed.hints }, hinted: true, line });
  }));
  if (out.length === 0 && !problems?.length) checkedRow(problems, () => {
    throw new WorldFileError(file, 1, null, 'no tasks: the file needs at least one row');
  });
  return out;
}

// ---- splits ----------------------------------------------------------------------------

export interface SplitSizes {
  train: number;
  heldout: number;
  dev: number;
}

/** "train=N,heldout=N,dev=N" (any of them); throws a plain Error naming the bad part. */
export function parseSplitSpec(spec: string): Partial<SplitSizes> {
  const out: Partial<SplitSizes> = {};
  for (const part of spec.split(',')) {
    const m = /^(train|heldout|dev)=(\d+)$/.exec(part.trim());
    if (!m) throw new Error(`--split: ${JSON.stringify(part)} is not NAME=COUNT with NAME train, heldout or dev`);
    const name = m[1] as keyof SplitSizes;
    if (out[name] !== undefined) throw new Error(`--split: ${name} is given twice (${name}=${out[name]} and ${part.trim()})`);
    // Past 2^53 a count would print as another number than the one given, and no world is that large.
    if (m[2]!.length > 9) throw new Error(`--split: ${part.trim()} is over 999,999,999 tasks`);
    out[name] = Number(m[2]);
  }
  return out;
}

/** Sizes for a pool of `n`: what was asked; unasked held-out 20%, dev 10%, train the rest. */
export function splitSizes(n: number, asked: Partial<SplitSizes> = {}): SplitSizes {
  const heldout = asked.heldout ?? Math.max(1, Math.round(0.2 * n));
  const dev = asked.dev ?? Math.round(0.1 * n);
  const train = asked.train ?? Math.max(0, n - heldout - dev);
  if (train + heldout + dev > n) {
    throw new Error(`the world makes ${n} tasks, fewer than train ${train} + held-out ${heldout} + dev ${dev} = ${train + heldout + dev}: lower the --split counts`);
  }
  if (heldout === 0) throw new Error('the held-out split may not be empty (eval reports on it)');
  return { train, heldout, dev };
}

/** A world built from a source: what `agent-lab world` writes. */
export interface BuiltWorld {
  corpus: Passage[];
  train: Task[];
  heldout: Task[];
  dev: Task[];
  sizes: SplitSizes;
  /** Training tasks left out because they overlap a held-out or dev task (same kind, same facts). */
  overlap: { excluded: number; exact: number; swapped: number };
  /** Per split and shape, the task counts written. */
  counts: Record<'train' | 'heldout' | 'dev', Record<string, number>>;
  /**
   * Tasks the stub teacher cannot solve, by reason (docs worlds): no_hints, fact_not_in_corpus,
   * gold_differs; and `outside_grammar`: the teacher's call is one the tool-call grammar
   * (core/grammar.ts: a query of 1-64 letters, digits, space and ._,()-; an expression of
   * 1-40 digits and +-*\/.() ) does not accept, so a constrained student cannot make it.
   */
  unsolvable: Record<string, number>;
  warnings: string[];
  /** A fact world's surface forms (the user's or PLAIN_TEMPLATES); null for the textbook's forms or a documents world. */
  templates: readonly string[] | null;
}

function countByShape(tasks: readonly Task[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const shape of TASK_SHAPES) {
    const n = tasks.filter((t) => t.kind === shape).length;
    if (n > 0) out[shape] = n;
  }
  return out;
}

/** The first call of a task's answer key that the grammar refuses (its body), or null when all fit. */
function callOutsideGrammar(task: Task, values: ReadonlyMap<string, string> | null, templates?: readonly Template[]): string | null {
  const bodies = task.hints.queries.map((query) => renderCallBody('search', { query, k: 2 }));
  if (values && task.hints.op !== null) {
    const v = task.hints.facts.map(([e, a]) => values.get(`${e}\u0000${a}`) ?? '');
    const expr = task.hints.op === 'double' ? `${v[0]}*2` : task.hints.op === 'sum' ? `${v[0]}+${v[1]}` : `${v[0]}-${v[1]}`;
    bodies.push(renderCallBody('calc', { expr }));
  }
  return bodies.find((b) => !checkCall(b, templates).complete) ?? null;
}

function noteGrammar(tasks: readonly Task[], values: ReadonlyMap<string, string> | null, unsolvable: Record<string, number>, warnings: string[], templates?: readonly Template[]): void {
  let n = 0;
  for (const t of tasks) {
    const bad = callOutsideGrammar(t, values, templates);
    if (bad === null) continue;
    n++;
    if (n <= 3) warnings.push(`the tool-call grammar refuses ${bad} (for ${JSON.stringify(t.question)}): a constrained student cannot make this call (docs/worlds.md)`);
  }
  if (n > 0) unsolvable['outside_grammar'] = n;
}

/**
 * The seed's make_task_pool rule on any pool: shuffle with Random(seed + 2), then train,
 * held-out and dev in that order; training tasks that overlap held-out or dev are left out.
 */
/**
 * A small table can put every task of a shape into held-out or dev, so the student is tested
 * on a shape it is never shown (its training copies are left out as overlapping). For each
 * such shape, the evaluation tasks of its least-evaluated facts move to train, each trading
 * places with a training task that overlaps evaluation anyway (else one of the commonest shape).
 */
function giveTrainEveryShape(train: Task[], heldout: Task[], dev: Task[]): void {
  for (const kind of TASK_SHAPES) {
    const evalKeys = new Map<string, number>();
    for (const t of [...heldout, ...dev]) evalKeys.set(overlapKey(t), (evalKeys.get(overlapKey(t)) ?? 0) + 1);
    const evaluatedKeys = [...heldout, ...dev].filter((t) => t.kind === kind).map(overlapKey);
    if (evaluatedKeys.length === 0 || train.some((t) => t.kind === kind && !evalKeys.has(overlapKey(t)))) continue;
    const key = [...new Set(evaluatedKeys)].sort((x, y) => evalKeys.get(x)! - evalKeys.get(y)!)[0]!;
    for (const pool of [heldout, dev]) {
      for (let i = 0; i < pool.length; i++) {
        if (overlapKey(pool[i]!) !== key) continue;
        let j = train.findIndex((t) => overlapKey(t) !== key && evalKeys.has(overlapKey(t)));
        if (j < 0) {
          const counts = countByShape(train);
          const giver = Object.entries(counts).filter(([k, n]) => k !== kind && n >= 2).sort((x, y) => y[1] - x[1])[0]?.[0];
          if (giver === undefined) return;
          j = train.map((t) => t.kind).lastIndexOf(giver as TaskKind);
        }
        [pool[i], train[j]] = [train[j]!, pool[i]!];
      }
    }
  }
}

function splitPool(tasks: Task[], seed: number, asked: Partial<SplitSizes>): Omit<BuiltWorld, 'corpus' | 'unsolvable' | 'warnings' | 'templates'> {
  const sizes = splitSizes(tasks.length, asked);
  new PyRandom(seed + 2).shuffle(tasks);
  const trainAll = tasks.slice(0, sizes.train);
  const heldout = tasks.slice(sizes.train, sizes.train + sizes.heldout);
  const dev = tasks.slice(sizes.train + sizes.heldout, sizes.train + sizes.heldout + sizes.dev);
  giveTrainEveryShape(trainAll, heldout, dev);
  const evalKeys = new Set([...heldout, ...dev].map(overlapKey));
  const train = trainAll.filter((t) => !evalKeys.has(overlapKey(t)));
  const o = findOverlaps(trainAll, [...heldout, ...dev]);
  return {
    train,
    heldout,
    dev,
    sizes,
    overlap: { excluded: trainAll.length - train.length, exact: o.exact.length, swapped: o.swapped.length },
    counts: { train: countByShape(train), heldout: countByShape(heldout), dev: countByShape(dev) },
  };
}

export interface FactWorldOptions {
  seed?: number;
  split?: Partial<SplitSizes>;
  /** Overrides the table's own settings. */
  settings?: FactSettings;
  /** The world's call grammar (core/worldTools.ts templatesFor); default the textbook's. */
  templates?: readonly Template[];
  /**
   * The surface forms: 'textbook' renders the seed's three forms and its ablation-run
   * distractors (the textbook's own table; a world built before worlds had forms of their
   * own); a list renders those (over the table's settings.templates); unset, the table's
   * settings.templates, else PLAIN_TEMPLATES.
   */
  forms?: 'textbook' | readonly string[];
}

/**
 * A world from a fact table: its corpus (the user's surface forms or plain ones, with
 * distractors of its own; or the seed's forms and distractors with forms 'textbook'), the
 * seed's make_tasks (lookup for every fact; double, sum and compare over the numeric ones:
 * no same-entity compare, no ties), only the shapes wanted, split by the seed's rule.
 */
export function buildFactWorld(table: FactTable, options: FactWorldOptions = {}): BuiltWorld {
  const seed = options.seed ?? 0;
  const settings: FactSettings = { ...table.settings, ...options.settings };
  const shapes = settings.shapes ?? [...TASK_SHAPES];
  const notAShape = shapes.find((s) => !TASK_SHAPES.includes(s));
  if (notAShape !== undefined) throw new Error(`a world builds only the shapes ${TASK_SHAPES.join(', ')}, not ${notAShape} (a family no teacher demonstrates: an evaluation split and an RL pool)`);
  const { corpus, forms } = factWorldCorpus(table, options);
  const numeric = table.facts.filter((f) => isNum(f[2]));
  const warnings: string[] = [];
  // makeTasks draws pairs of numeric facts; with fewer than two there are no pairs to draw.
  const all = numeric.length >= 2 ? makeTasks(seed, table.facts) : [...table.facts.map(lookupTask), ...numeric.map(doubleTask)];
  const tasks = all.filter((t) => shapes.includes(t.kind));
  for (const s of shapes) {
    if (s !== 'lookup' && !tasks.some((t) => t.kind === s)) {
      warnings.push(`no ${s} tasks: ${s} needs ${s === 'double' ? 'a numeric value' : 'two numeric values (of different entities, unequal, for compare)'}, the table has ${numeric.length} numeric value(s)`);
    }
  }
  if (tasks.length < 2) throw new Error(`the table makes ${tasks.length} task(s): a world needs at least 2 (one to train on, one to hold out)`);
  const unsolvable: Record<string, number> = {};
  const split = splitPool(tasks, seed, options.split ?? {});
  for (const s of shapes) {
    if ((split.counts.heldout[s] ?? 0) + (split.counts.dev[s] ?? 0) > 0 && !split.counts.train[s]) {
      warnings.push(`train has no ${s} task, but held-out or dev has: the student is tested on a shape it is never shown (add facts, or --split with a larger train)`);
    }
  }
  // Counted over the tasks written (after the split and the overlap exclusion).
  noteGrammar([...split.train, ...split.heldout, ...split.dev], new Map(table.facts.map((f) => [`${f[0]}\u0000${f[1]}`, f[2]])), unsolvable, warnings, options.templates);
  return { corpus, ...split, unsolvable, warnings, templates: forms };
}

/** A fact world's corpus alone, as buildFactWorld renders it (and the surface forms it used; null: the textbook's). */
export function factWorldCorpus(table: FactTable, options: FactWorldOptions = {}): { corpus: Passage[]; forms: string[] | null } {
  const seed = options.seed ?? 0;
  const settings: FactSettings = { ...table.settings, ...options.settings };
  const distractors = settings.distractors ?? 0;
  const forms = options.forms === 'textbook' ? null : [...(options.forms ?? settings.templates ?? PLAIN_TEMPLATES)];
  return { corpus: forms === null ? buildCorpus(seed, distractors, table.facts) : buildOwnCorpus(seed, distractors, table.facts, forms), forms };
}

export interface DocsWorldOptions {
  seed?: number;
  split?: Partial<SplitSizes>;
  templates?: readonly Template[];
}

const escapeRe = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Why the stub teacher cannot solve a hinted task over this corpus, or null: a fact whose
 * canonical clause "the {attribute} of {entity} is" no passage holds (fact_not_in_corpus),
 * or a lookup whose gold is not the value the corpus states (gold_differs). The field is
 * where the problem is (`hints.facts[i]`, `gold`).
 */
export function corpusProblem(task: Task, corpus: readonly Passage[]): { reason: 'fact_not_in_corpus' | 'gold_differs'; field: string; message: string } | null {
  const missing = task.hints.facts.findIndex(([e, a]) => !corpus.some((p) => p.text.includes(`the ${a} of ${e} is `)));
  if (missing >= 0) {
    const [e, a] = task.hints.facts[missing]!;
    return { reason: 'fact_not_in_corpus', field: `hints.facts[${missing}]`, message: `no passage says "the ${a} of ${e} is ...": the stub teacher cannot read it` };
  }
  if (task.kind === 'lookup') {
    const stated = statedFact(task.hints.facts[0]!, corpus);
    if (stated !== undefined && stated.value !== task.gold) return { reason: 'gold_differs', field: 'gold', message: `${JSON.stringify(task.gold)} but the corpus says ${JSON.stringify(stated.value)}` };
  }
  return null;
}

/** The value the corpus states for a fact (its first canonical clause) and the passage saying it. */
export function statedFact(fact: readonly [string, string], corpus: readonly Passage[]): { value: string; docId: string } | undefined {
  const re = new RegExp(`the ${escapeRe(fact[1])} of ${escapeRe(fact[0])} is ([^.,;]+)[.,;]`);
  for (const p of corpus) {
    const m = re.exec(p.text)?.[1]?.trim();
    if (m !== undefined) return { value: m, docId: p.docId };
  }
  return undefined;
}

/**
 * A world from documents and questions. Where a task carries hints, whether the stub
 * teacher can solve it is checked against the corpus: each fact's canonical clause must be
 * in a passage, and a lookup's gold must be the value it states.
 */
export function buildDocsWorld(corpus: Passage[], tasks: readonly SourceTask[], file: string, options: DocsWorldOptions = {}): BuiltWorld {
  const seed = options.seed ?? 0;
  if (corpus.length === 0) throw new Error('the documents hold no text: nothing to search');
  if (tasks.length < 2) throw new Error(`${file} holds ${tasks.length} task: a world needs at least 2 (one to train on, one to hold out)`);
  const unsolvable: Record<string, number> = {};
  const warnings: string[] = [];
  const note = (reason: string, message: string) => {
    unsolvable[reason] = (unsolvable[reason] ?? 0) + 1;
    if (unsolvable[reason]! <= 3) warnings.push(message);
  };
  for (const st of tasks) {
    if (!st.hinted) {
      // Counted only: a question without hints is a normal row, not a mistake.
      unsolvable['no_hints'] = (unsolvable['no_hints'] ?? 0) + 1;
      continue;
    }
    const problem = corpusProblem(st.task, corpus);
    if (problem) note(problem.reason, `${file}:${st.line}: field "${problem.field}": ${problem.message}`);
  }
  const split = splitPool(tasks.map((t) => t.task), seed, options.split ?? {});
  noteGrammar([...split.train, ...split.heldout, ...split.dev].filter(isHinted), null, unsolvable, warnings, options.templates);
  return { corpus, ...split, unsolvable, warnings, templates: null };
}
