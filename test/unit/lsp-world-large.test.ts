// The language server on a large bad world file (issue 36, finding 10), in process: a hover
// on a small facts.csv got no answer for minutes after a 30 MB facts.csv with 10% decimal
// values was opened, because each bad row's diagnostic split the whole file again to find
// its line (work = bad rows x file size), in one synchronous block. Here: the analysis
// pauses after every piece of the file, the work per bad row does not grow with the file,
// the diagnostics stop at maxDiagnostics with a summary of the rows left out, the pieces
// give exactly the whole file's checks (core/worldSource.ts), and a table too large to build
// its world in the editor says so in its hovers. The stdio tier (test/lsp/worldFiles.test.ts)
// hovers a small document while a large one is checked; bench/lspWorld.ts measures 30 MB.
import * as assert from 'node:assert/strict';
import type { Diagnostic, Hover } from 'vscode-languageserver';
import { mulberry32 } from '../../core/mulberry32';
import { checkFactTable, checkTasksFile } from '../../core/worldSource';
import { WorldAnalysis, WorldAnalysisOptions, WorldFileKind, analyseWorldFile, analyseWorldFileSteps, worldHover } from '../../language-server/worldFiles';
import { badFacts, badTasks } from '../../bench/lspWorld';

/** Runs the steps, counting the pauses. */
function stepped(text: string, file: string, kind: WorldFileKind, opts: WorldAnalysisOptions = {}): { a: WorldAnalysis; pauses: number } {
  const steps = analyseWorldFileSteps(text, file, kind, opts);
  for (let pauses = 0; ; pauses++) {
    const r = steps.next();
    if (r.done) return { a: r.value, pauses };
  }
}

/** Characters handed to String.prototype.split while `fn` runs (the old analysis split the whole file once per bad row). */
function charactersSplit(fn: () => void): number {
  const split = String.prototype.split;
  let chars = 0;
  // Counted and put back at once.
  String.prototype.split = function (this: string, ...args: unknown[]) {
    chars += this.length;
    return (split as (...a: unknown[]) => string[]).apply(this, args);
  } as typeof split;
  try {
    fn();
  } finally {
    String.prototype.split = split;
  }
  return chars;
}

// Paths with no docs/ folder beside them (the repository's own docs/ is not a corpus).
const FACTS = '/no-such-world/facts.csv';
const FACTS_JSONL = '/no-such-world/facts.jsonl';
const TASKS = '/no-such-world/tasks.jsonl';
const hoverText = (h: Hover | null): string => (h ? (h.contents as { value: string }).value : '');
const messageOf = (d: Diagnostic): string => (typeof d.message === 'string' ? d.message : d.message.value);

describe('language server: a large bad world file (issue 36)', function () {
  this.timeout(120_000);

  it('a 30 MB facts.csv with 10% decimal values does not stop hovers on other documents (1 MB here): the analysis pauses every piece and publishes at most maxDiagnostics, the last a summary of the rest', () => {
    const { text, bad } = badFacts(1024 * 1024, 0.1);
    const { a, pauses } = stepped(text, FACTS, 'facts');
    // About 16 K characters between pauses: the server answers other documents in between.
    assert.ok(pauses >= Math.floor(text.length / (16 * 1024)), `${pauses} pauses for ${text.length} characters`);
    assert.equal(a.diagnostics.length, 2000);
    const rows = a.diagnostics.slice(0, 1999);
    assert.ok(rows.every((d) => d.code === 'fact-row' && /^field "value": "\d+\.5" holds '\.'/.test(messageOf(d))));
    assert.ok(rows.every((d, i) => i === 0 || d.range.start.line > rows[i - 1]!.range.start.line), 'in line order');
    const last = a.diagnostics[1999]!;
    assert.equal(last.code, 'large-document');
    assert.equal(last.severity, 3);
    const left = (bad - 1999).toLocaleString('en-US');
    assert.equal(
      messageOf(last),
      `… and ${left} more rows like these, from line ${(last.range.start.line + 1).toLocaleString('en-US')} on (${left} fact-row): at most 2,000 diagnostics are shown per document`,
    );
    assert.ok(last.range.start.line > rows[1998]!.range.start.line);
  });

  it('a 30 MB tasks.jsonl with 10% broken lines does not stop hovers on other documents (1 MB here): pauses, capped, summarised', () => {
    const { text, bad } = badTasks(1024 * 1024, 0.1);
    const { a, pauses } = stepped(text, TASKS, 'tasks', { maxDiagnostics: 300 });
    assert.ok(pauses >= Math.floor(text.length / (16 * 1024)), `${pauses} pauses`);
    assert.equal(a.diagnostics.length, 300);
    assert.ok(a.diagnostics.slice(0, 299).every((d) => d.code === 'task-row' && /^not JSON/.test(messageOf(d))));
    assert.match(messageOf(a.diagnostics[299]!), new RegExp(`^… and ${(bad - 299).toLocaleString('en-US')} more rows like these, from line [\\d,]+ on \\(${(bad - 299).toLocaleString('en-US')} task-row\\)`));
  });

  it('the work per bad row does not grow with the file: the characters split stay within a few times the file (before: bad rows x file size)', () => {
    for (const [make, file, kind] of [
      [badFacts, FACTS, 'facts'],
      [badTasks, TASKS, 'tasks'],
    ] as const) {
      for (const size of [100 * 1024, 400 * 1024]) {
        const { text, bad } = make(size, 0.1);
        assert.ok(bad > 50);
        const chars = charactersSplit(() => analyseWorldFile(text, file, kind));
        assert.ok(chars <= 4 * text.length, `${kind}, ${text.length} characters, ${bad} bad rows: ${chars} characters split`);
      }
    }
  });

  it('at most maxDiagnostics: under it every problem and no note; over it the note counts the rest by code from the first row left out', () => {
    const text = ['entity,attribute,value', 'A,n,1', 'B,n,2', 'C,n,x', 'D,n,1.5', 'A,n,3', 'E,n', 'F,n,4', 'B,n,9', 'G,n,2.5', ''].join('\n');
    const all = analyseWorldFile(text, FACTS, 'facts', { maxDiagnostics: 6 });
    assert.deepEqual(
      all.diagnostics.map((d) => [d.range.start.line, d.code]),
      [
        [3, 'non-numeric-value'],
        [4, 'fact-row'],
        [5, 'duplicate-fact'],
        [6, 'fact-row'],
        [8, 'duplicate-fact'],
        [9, 'fact-row'],
      ],
    );
    const capped = analyseWorldFile(text, FACTS, 'facts', { maxDiagnostics: 4 });
    assert.deepEqual(
      capped.diagnostics.map((d) => d.code),
      ['non-numeric-value', 'fact-row', 'duplicate-fact', 'large-document'],
    );
    const note = capped.diagnostics[3]!;
    assert.deepEqual(note.range, { start: { line: 6, character: 0 }, end: { line: 6, character: 0 } });
    assert.equal(messageOf(note), '… and 3 more rows like these, from line 7 on (2 fact-row, 1 duplicate-fact): at most 4 diagnostics are shown per document');
  });

  it('the pieces give exactly the whole file\'s checks: random fact tables (CSV, JSONL) and tasks files, pieces of 1 to 400 characters', () => {
    const r = mulberry32(36);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
    const names = ['Iron', 'Gold', 'Tin', 'Zinc', 'Lead'];
    const attrs = ['mass', 'number'];
    const csvRow = (): string =>
      pick([
        () => `${pick(names)},${pick(attrs)},${Math.floor(r() * 50)}`,
        () => `${pick(names)},${pick(attrs)},${Math.floor(r() * 50)}.5`,
        () => `${pick(names)},${pick(attrs)},many`,
        () => `${pick(names)},${pick(attrs)}`,
        () => `"${pick(names)}, Jr",${pick(attrs)},7`,
        () => `"${pick(names)},${pick(attrs)},7`,
        () => '',
        () => '# a comment',
        () => 'entity,attribute,value',
        () => `\uFEFF${pick(names)},x,1`,
        () => ` ${pick(names)},${pick(attrs)},3`,
      ])();
    const jsonFact = (): string =>
      pick([
        () => JSON.stringify({ entity: pick(names), attribute: pick(attrs), value: Math.floor(r() * 50) }),
        () => JSON.stringify({ entity: pick(names), attribute: pick(attrs), value: `${Math.floor(r() * 50)}` }),
        () => JSON.stringify({ entity: pick(names), attribute: pick(attrs), value: 2.5 }),
        () => JSON.stringify({ entity: pick(names), attribute: pick(attrs), value: 'x' }),
        () => JSON.stringify({ entity: pick(names), value: '1' }),
        () => JSON.stringify({ settings: { shapes: ['lookup', 'double'] } }),
        () => JSON.stringify({ settings: { distractors: 3 } }),
        () => JSON.stringify({ settings: { bogus: 1 } }),
        () => '{"entity": "Iron", ',
        () => '',
        () => `\uFEFF${JSON.stringify({ entity: 'Tin', attribute: 'mass', value: 1 })}`,
      ])();
    const question = (): string => `What is the ${pick(attrs)} of ${pick(names)}?`;
    const hints = (): unknown => ({ queries: [`${pick(names)} mass`], facts: [[pick(names), 'mass']], op: null });
    const taskRow = (): string =>
      pick([
        () => JSON.stringify({ question: question(), gold: '1' }),
        () => JSON.stringify({ question: question(), gold: '1', hints: hints() }),
        () => JSON.stringify({ question: question(), gold: '1', kind: 'lookup', hints: hints() }),
        () => JSON.stringify({ question: question(), gold: '1', kind: 'bogus' }),
        () => JSON.stringify({ question: question(), gold: '1', hints: { queries: [] } }),
        () => JSON.stringify({ question: question(), gold: 2 }),
        () => JSON.stringify({ question: question(), gold: '1', extra: true }),
        () => JSON.stringify({ question: question(), gold: '1', 'hints.x': true }),
        () => JSON.stringify({ gold: '1' }),
        () => '{"question": ',
        () => '',
        () => `\uFEFF${JSON.stringify({ question: question(), gold: '3' })}`,
      ])();
    const eols = ['\n', '\n', '\r\n'];
    const fileOf = (row: () => string, head: string[]): string => {
      const rows = [...head];
      for (let i = Math.floor(r() * 40); i > 0; i--) rows.push(row());
      let text = '';
      for (const l of rows) text += l + pick(eols);
      return pick([text, text.trimEnd(), `${text}\r`, `\uFEFF${text}`]);
    };
    const summary = (a: WorldAnalysis, text: string) => {
      const lines = text.split('\n').length;
      return {
        diagnostics: a.diagnostics,
        facts: Array.from({ length: lines }, (_, l) => a.factAt(l)),
        tasks: Array.from({ length: lines }, (_, l) => a.taskAt(l)),
        hovers: Array.from({ length: lines }, (_, l) => hoverText(worldHover(a, { line: l, character: 0 }))),
      };
    };
    let compared = 0;
    for (let trial = 0; trial < 300; trial++) {
      const kind = pick(['csv', 'jsonl', 'tasks'] as const);
      const text =
        kind === 'csv'
          ? fileOf(csvRow, pick([['entity,attribute,value'], ['# world', '', 'entity,attribute,value'], ['name,size'], []]))
          : kind === 'jsonl'
            ? fileOf(jsonFact, [])
            : fileOf(taskRow, []);
      const file = kind === 'csv' ? FACTS : kind === 'jsonl' ? FACTS_JSONL : TASKS;
      const wk: WorldFileKind = kind === 'tasks' ? 'tasks' : 'facts';
      // No cap; the hovers' task lists (the world built from the table, settings included) in one trial of five.
      const opts = { maxDiagnostics: Infinity, maxFactsForTasks: trial % 5 === 0 ? Infinity : 0 };
      const whole = analyseWorldFile(text, file, wk, { ...opts, pieceChars: Infinity });
      // The whole file in one piece is core's own result, field by field.
      const core = wk === 'facts' ? checkFactTable(text, file).problems : checkTasksFile(text, file).problems;
      assert.deepEqual(
        whole.diagnostics.filter((d) => d.code !== 'non-numeric-value' && d.severity === 1).map((d) => [d.range.start.line, messageOf(d)]),
        core.map((e) => [e.line - 1, e.field !== null ? `field "${e.field}": ${e.problem}` : e.problem]).sort((x, y) => (x[0] as number) - (y[0] as number)),
        text,
      );
      const expected = summary(whole, text);
      for (const pieceChars of [1, 7, 40, 400]) {
        assert.deepEqual(summary(analyseWorldFile(text, file, wk, { ...opts, pieceChars }), text), expected, `${file}, pieces of ${pieceChars}: ${JSON.stringify(text)}`);
        compared++;
      }
    }
    assert.equal(compared, 1200);
  });

  it('a fact table over maxFactsForTasks gives the clause and says its tasks are not listed (building its world would hold up the server)', () => {
    const rows = ['entity,attribute,value'];
    for (let i = 0; i < 40; i++) rows.push(`E${i},size,${i + 1}`, `E${i},weight,${i * 3 + 2}`);
    const text = rows.join('\n') + '\n';
    const small = analyseWorldFile(text, FACTS, 'facts');
    assert.match(hoverText(worldHover(small, { line: 1, character: 0 })), /In \d+ task\(s\) of the world \(seed 0\)/);
    const big = analyseWorldFile(text, FACTS, 'facts', { maxFactsForTasks: 79 });
    const v = hoverText(worldHover(big, { line: 1, character: 0 }));
    assert.match(v, /^\*\*Fact\*\* · "the size of E0 is 1" \(numeric\)/);
    assert.match(v, /Its tasks are not listed: the table is too large to build its world in the editor/);
  });
});
