// The language server on a user's world files (docs/worlds.md, "In the editor"), over real
// stdio: a fact table and a tasks file get core/worldSource.ts's checks as diagnostics on the
// exact range of the bad field (every bad row, not only the first), a non-numeric value of a
// numeric attribute and a hinted task the docs/ folder beside it cannot answer are flagged,
// an edit that fixes a row clears its diagnostic, and hovers show a fact's canonical clause
// with the tasks it takes part in, and a task's facts as the corpus states them. A large bad
// table or tasks file (issue 36) is checked in slices: hovers on other documents are answered
// meanwhile, and its diagnostics stop at maxDiagnostics with a summary of the rest.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { CompletionItem, Diagnostic, Hover, Range } from 'vscode-languageserver-protocol';
import { AGENT_TOOLS } from '../../core/tools/schemas';
import { LspClient, repoRootFrom } from '../../bench/lspClient';
import { badFacts, badTasks } from '../../bench/lspWorld';

const root = repoRootFrom(__dirname);
const uriOf = (p: string): string => pathToFileURL(p).toString();
const hoverValue = (h: Hover | null): string => (h ? (h.contents as { value: string }).value : '');
/** The range of `needle` in line `line` of `text` (the first occurrence at or after `from`). */
function rangeOf(text: string, line: number, needle: string, from = 0): Range {
  const l = text.split('\n')[line]!;
  const at = l.indexOf(needle, from);
  assert.ok(at >= 0, `"${needle}" on line ${line}: ${l}`);
  return { start: { line, character: at }, end: { line, character: at + needle.length } };
}
/** A diagnostic's message as text (the protocol allows markup; the server sends strings). */
const messageOf = (d: Diagnostic): string => (typeof d.message === 'string' ? d.message : d.message.value);
const brief = (ds: Diagnostic[]) => ds.map((d) => ({ code: d.code, range: d.range }));

describe('language server: world files (fact tables, tasks files)', function () {
  this.timeout(120_000);
  let client: LspClient;
  let tmp: string;

  before(async function () {
    this.timeout(180_000);
    if (process.env['AGENT_LAB_SKIP_BUILD'] !== '1' && process.env['AGENT_LAB_LSP_FROM_SOURCE'] !== '1') {
      const b = spawnSync(process.execPath, [path.join(root, 'scripts', 'build.mjs')], { cwd: root, encoding: 'utf8' });
      assert.equal(b.status, 0, b.stderr);
    }
    tmp = mkdtempSync(path.join(tmpdir(), 'agent-lab-lsp-world-'));
    cpSync(path.join(root, 'samples', 'worlds'), path.join(tmp, 'worlds'), { recursive: true });
    client = await LspClient.start({ initializationOptions: { diagnosticsDelayMs: 0 } });
  });
  after(async () => {
    if (client) await client.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  describe('a fact table', () => {
    it('the elements sample (a CSV found by its header) is clean; a fact row hovers with its clause and tasks', async () => {
      const file = path.join(tmp, 'worlds', 'elements', 'elements.csv');
      const text = readFileSync(file, 'utf8');
      const p = (await client.open(uriOf(file), text, 'csv'))!;
      assert.deepEqual(p.diagnostics, []);
      const line = text.split('\n').indexOf('Iron,atomic number,26');
      assert.ok(line > 0);
      const v = hoverValue(await client.request<Hover>('textDocument/hover', { textDocument: { uri: uriOf(file) }, position: { line, character: 3 } }));
      assert.match(v, /^\*\*Fact\*\* · "the atomic number of Iron is 26" \(numeric\)/);
      assert.match(v, /In \d+ task\(s\) of the world \(seed 0\): /);
      assert.match(v, /lookup: What is the atomic number of Iron\? Use the corpus\. → `26`/);
      // A comment line is no fact.
      assert.equal(await client.request<Hover | null>('textDocument/hover', { textDocument: { uri: uriOf(file) }, position: { line: 0, character: 3 } }), null);
    });

    it('every bad row gets a diagnostic on its field; fixing one clears it', async () => {
      const file = path.join(tmp, 'broken', 'facts.csv');
      const text = [
        '# a broken table',
        'entity,attribute,value',
        'Iron,atomic number,26',
        'Gold,atomic number,79',
        'Iron,atomic number,27',
        'Copper,atomic number,2 9',
        'Tin,atomic number',
        'Zinc,atomic number,3.0',
        '',
      ].join('\n');
      const p = (await client.open(uriOf(file), text, 'csv'))!;
      assert.deepEqual(brief(p.diagnostics), [
        { code: 'duplicate-fact', range: rangeOf(text, 4, 'atomic number') },
        { code: 'non-numeric-value', range: rangeOf(text, 5, '2 9') },
        { code: 'fact-row', range: { start: { line: 6, character: 17 }, end: { line: 6, character: 17 } } },
        { code: 'fact-row', range: rangeOf(text, 7, '3.0') },
      ]);
      const [dup, nonNumeric, missing, dotted] = p.diagnostics as [Diagnostic, Diagnostic, Diagnostic, Diagnostic];
      assert.equal(dup.message, 'field "attribute": duplicate fact: the atomic number of Iron is already given on line 3');
      assert.equal(dup.severity, 1);
      assert.equal(nonNumeric.severity, 2);
      assert.match(messageOf(nonNumeric), /"2 9" is not an integer, but 2 other value\(s\) of "atomic number" are/);
      assert.equal(missing.message, 'field "value": expected 3 columns (entity,attribute,value), got 2');
      assert.match(messageOf(dotted), /^field "value": "3\.0" holds '\.', ',' or ';'/);
      // Fix the duplicate (Iron → Silver): its diagnostic goes, the others stay.
      const fixed = await client.change(uriOf(file), [{ range: { start: { line: 4, character: 0 }, end: { line: 4, character: 4 } }, text: 'Silver' }]);
      assert.deepEqual(
        fixed!.diagnostics.map((d) => d.code),
        ['non-numeric-value', 'fact-row', 'fact-row'],
      );
    });

    it('a CSV that is not a fact table gets nothing', async () => {
      const file = path.join(tmp, 'other.csv');
      await client.open(uriOf(file), 'name,size\nA,1\nB\n', 'csv', false);
      assert.equal(await client.request<Hover | null>('textDocument/hover', { textDocument: { uri: uriOf(file) }, position: { line: 1, character: 0 } }), null);
      // A fact table would have been diagnosed by now (the hover came after the open).
      assert.equal(client.published.get(uriOf(file)), undefined, 'no diagnostics published');
    });
  });

  describe("a run of a world with its own tool list (the run's world/tools.json)", () => {
    it('checks the calls and offers the completions of the world grammar: calc is refused in a run whose list leaves it out, and accepted elsewhere', async () => {
      const text = readFileSync(path.join(root, 'samples', 'sum.transcript'), 'utf8');
      const run = path.join(tmp, 'run-search-only');
      mkdirSync(path.join(run, 'world'), { recursive: true });
      mkdirSync(path.join(run, 'asked'), { recursive: true });
      writeFileSync(path.join(run, 'config.json'), '{"kind": "sft"}\n');
      writeFileSync(path.join(run, 'world', 'tools.json'), JSON.stringify([AGENT_TOOLS[0]]));
      const inRun = path.join(run, 'asked', 'sum.transcript');
      writeFileSync(inRun, text);
      const outside = path.join(tmp, 'sum.transcript');
      writeFileSync(outside, text);
      assert.deepEqual((await client.open(uriOf(outside), text, 'agent-transcript'))!.diagnostics, [], 'the textbook grammar takes calc');
      const p = (await client.open(uriOf(inRun), text, 'agent-transcript'))!;
      const rejected = p.diagnostics.filter((d) => d.code === 'grammar-rejected');
      const calls = text.split('<|tool_call|>').length - 1;
      const calcCalls = text.split('<|tool_call|>{"tool": "calc"').length - 1;
      assert.ok(calcCalls >= 1 && calls > calcCalls);
      assert.equal(rejected.length, calcCalls, 'each calc call, and no search call');
      const at = text.indexOf('<|tool_call|>{"tool": "calc"') + '<|tool_call|>{"tool": "'.length;
      const line = text.slice(0, at).split('\n').length - 1;
      const col = at - (text.lastIndexOf('\n', at - 1) + 1);
      assert.deepEqual(rejected[0]!.range, { start: { line, character: col }, end: { line, character: col + 1 } });
      assert.equal(messageOf(rejected[0]!), "tool call rejected by the grammar: expected 's', got 'c'");
      // Completion inside an assistant turn offers the world's tools only.
      const asst = text.indexOf('<|assistant|>') + '<|assistant|>'.length;
      const position = { line: text.slice(0, asst).split('\n').length - 1, character: asst - (text.lastIndexOf('\n', asst - 1) + 1) };
      const labels = async (file: string) =>
        ((await client.request<CompletionItem[] | null>('textDocument/completion', { textDocument: { uri: uriOf(file) }, position })) ?? []).map((c) => c.label).filter((l) => l.endsWith(' call'));
      assert.deepEqual(await labels(inRun), ['search call']);
      assert.deepEqual(await labels(outside), ['search call', 'calc call']);
    });
  });

  describe('a tasks file beside a docs/ folder', () => {
    const file = () => path.join(tmp, 'worlds', 'planets-notes', 'tasks.jsonl');

    it('the planets sample is clean; a task hovers with its facts as the corpus states them', async () => {
      const text = readFileSync(file(), 'utf8');
      const p = (await client.open(uriOf(file()), text, 'jsonl'))!;
      assert.deepEqual(p.diagnostics, []);
      const line = text.split('\n').findIndex((l) => l.includes('"What is the orbital period in days of Mars? Use the corpus."'));
      assert.ok(line >= 0);
      const v = hoverValue(await client.request<Hover>('textDocument/hover', { textDocument: { uri: uriOf(file()) }, position: { line, character: 2 } }));
      assert.match(v, /^\*\*Task\*\* · lookup · gold `687`/);
      assert.match(v, /- "the orbital period in days of Mars is 687" \(inner-planets\.md#\d+\)/);
    });

    it('a gold the corpus contradicts, a fact it lacks, and a bad row: each on its field', async () => {
      const lines = readFileSync(file(), 'utf8').trimEnd().split('\n');
      const i = lines.findIndex((l) => l.includes('"What is the orbital period in days of Mars? Use the corpus."'));
      lines[i] = lines[i]!.replace('"gold": "687"', '"gold": "686"');
      lines.push('{"question": "What is the ring count of Mars? Use the corpus.", "gold": "0", "hints": {"queries": ["Mars rings"], "facts": [["Mars", "ring count"]], "op": null}}');
      lines.push('{"question": "Q?", "gold": 5}');
      const text = lines.join('\n') + '\n';
      const p = await client.change(uriOf(file()), [{ text }]);
      const n = lines.length;
      assert.deepEqual(brief(p!.diagnostics), [
        { code: 'gold-differs', range: rangeOf(text, i, '"686"') },
        { code: 'fact-not-in-corpus', range: rangeOf(text, n - 2, '["Mars", "ring count"]') },
        { code: 'task-row', range: rangeOf(text, n - 1, '5') },
      ]);
      assert.match(messageOf(p!.diagnostics[0]!), /^field "gold": "686" but the corpus says "687"/);
      assert.match(messageOf(p!.diagnostics[1]!), /^field "hints\.facts\[0\]": no passage says "the ring count of Mars is \.\.\."/);
      assert.equal(p!.diagnostics[2]!.message, 'field "gold": must be a string');
    });
  });

  describe('a large bad world file (issue 36)', () => {
    for (const kind of ['facts', 'tasks'] as const) {
      const title =
        kind === 'facts'
          ? 'a 30 MB facts.csv with 10% decimal values does not stop hovers on other documents (2 MB here): a small table is hovered before the large one is checked; its diagnostics are capped with a summary'
          : 'a 30 MB tasks.jsonl with 10% broken lines does not stop hovers on other documents (4 MB here): a small table is hovered before the large one is checked; its diagnostics are capped with a summary';
      it(title, async () => {
        const smallText = readFileSync(path.join(tmp, 'worlds', 'elements', 'elements.csv'), 'utf8');
        const small = path.join(tmp, `small-${kind}`, 'facts.csv');
        await client.open(uriOf(small), smallText, 'csv');
        const line = smallText.split('\n').indexOf('Iron,atomic number,26');
        const { text, bad } = kind === 'facts' ? badFacts(2 * 1024 * 1024, 0.1) : badTasks(4 * 1024 * 1024, 0.1);
        const big = path.join(tmp, 'large', kind === 'facts' ? 'facts.csv' : 'tasks.jsonl');
        const checked = client.waitForDiagnostics(uriOf(big), () => true, 110_000);
        await client.open(uriOf(big), text, kind === 'facts' ? 'csv' : 'jsonl', false);
        // Before: the check of the large file was one block (minutes at 30 MB), its diagnostics went out first and the hover waited.
        const h = await client.request<Hover>('textDocument/hover', { textDocument: { uri: uriOf(small) }, position: { line, character: 3 } });
        assert.match(hoverValue(h), /^\*\*Fact\*\* · "the atomic number of Iron is 26"/);
        assert.equal(client.published.get(uriOf(big)), undefined, 'the hover was answered while the large file was being checked');
        const p = await checked;
        assert.equal(p.diagnostics.length, 2000);
        const last = p.diagnostics[1999]!;
        assert.equal(last.code, 'large-document');
        const left = (bad - 1999).toLocaleString('en-US');
        assert.match(messageOf(last), new RegExp(`^… and ${left} more rows like these, from line [\\d,]+ on \\(${left} ${kind === 'facts' ? 'fact' : 'task'}-row\\): at most 2,000 diagnostics are shown per document$`));
        await client.close(uriOf(big));
      });
    }
  });
});
