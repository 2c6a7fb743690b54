// Compare Runs (issue 35): the results table built from run folders by the Runs view's reader
// (extension/runFolders.ts readRun) and extension/compareRuns.ts, the table's text
// (webview-ui/compare/model.ts), two runs' evaluations side by side from eval/SPLIT.jsonl,
// and the panel's messages validated both ways (core/protocol/panels.ts).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { compareTable, readEvalRows, taskDiff } from '../../extension/compareRuns';
import { readRun } from '../../extension/runFolders';
import { commonRowSplits, figureCell, shapeCell, tableText } from '../../webview-ui/compare/model';
import { parseFromWebviewFor, parsePanelState, parseToWebview } from '../../core/protocol/panels';

const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
const evalRow = (question: string, gold: string, answer: string, kind = 'lookup', failure: string | null = null) => ({
  question,
  gold,
  answer,
  solved: answer === gold,
  kind,
  failure: answer === gold ? null : (failure ?? 'final'),
  steps: 2,
  text: `<|user|>${question}<|end|>`,
});

describe('Compare Runs (issue 35)', () => {
  let tmp: string;
  let sft: string;
  let grpo: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-compare-'));
    sft = path.join(tmp, 'runs', 's0');
    grpo = path.join(tmp, 'runs', 'g0');
    fs.mkdirSync(path.join(sft, 'eval'), { recursive: true });
    fs.mkdirSync(path.join(grpo, 'eval'), { recursive: true });
    fs.writeFileSync(path.join(sft, 'config.json'), JSON.stringify({ kind: 'sft', preset: 'tiny', recipe: { name: 'copy', curriculum: [] }, budget: { minutes: 3 } }));
    fs.writeFileSync(
      path.join(sft, 'metrics.jsonl'),
      jsonl([
        { phase: 'sft', step: 1, time: 0.5, loss: 3 },
        { phase: 'sft', step: 400, time: 180, loss: 1 },
        { phase: 'eval', step: 400, time: 180, split: 'heldout', accuracy: 0.5, n: 4, of: 4, final: true, by_kind: { lookup: { n: 2, accuracy: 1 }, sum: { n: 2, accuracy: 0 } } },
      ]) + '{"phase":"sft","st',
    );
    // The SFT run's own evaluation on fresh-values, with per-task rows.
    fs.writeFileSync(path.join(sft, 'eval', 'fresh-values.json'), JSON.stringify({ split: 'fresh-values', accuracy: 0.25, n: 4, of: 500, step: 400, by_kind: { lookup: { n: 4, accuracy: 0.25 } } }));
    fs.writeFileSync(
      path.join(sft, 'eval', 'fresh-values.jsonl'),
      jsonl([evalRow('q1', 'a', 'a'), evalRow('q2', 'b', 'x'), evalRow('q3', 'c', 'x', 'sum', 'memorised'), evalRow('q4', 'd', 'x')]),
    );
    fs.writeFileSync(path.join(grpo, 'config.json'), JSON.stringify({ kind: 'grpo', from: { run: sft, step: 400 }, grpo: { pool: 'fresh-values' }, budget: { steps: 60 } }));
    fs.writeFileSync(path.join(grpo, 'metrics.jsonl'), jsonl([{ phase: 'eval', step: 0, time: 0, split: 'heldout', accuracy: 0.5 }, { phase: 'grpo', step: 60, time: 150, reward_mean: 0.5 }]));
    fs.writeFileSync(path.join(grpo, 'eval', 'heldout.json'), JSON.stringify({ split: 'heldout', accuracy: 0.75, n: 4, of: 4, step: 60, by_kind: { lookup: { n: 2, accuracy: 1 }, sum: { n: 2, accuracy: 0.5 } } }));
    fs.writeFileSync(path.join(grpo, 'eval', 'fresh-values.json'), JSON.stringify({ split: 'fresh-values', accuracy: 0.5, n: 5, of: 500, step: 60 }));
    fs.writeFileSync(
      path.join(grpo, 'eval', 'fresh-values.jsonl'),
      jsonl([evalRow('q1', 'a', 'y'), evalRow('q2', 'b', 'b'), evalRow('q3', 'c', 'c', 'sum'), evalRow('q4', 'd', 'x'), evalRow('q5', 'e', 'e')]),
    );
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('one row per run from its folder: kind, recipe, steps, minutes, the figure per split and held-out per shape', () => {
    const t = compareTable([readRun(sft), readRun(grpo)]);
    assert.deepEqual(t.splits, ['heldout', 'fresh-values'], 'held-out first, then the fresh splits');
    assert.deepEqual(t.shapes, ['lookup', 'sum']);
    const [s, g] = t.rows;
    assert.equal(s!.recipe, 'copy');
    assert.equal(s!.steps, 400);
    assert.equal(s!.minutes, 3, 'the last step record\u2019s time');
    // No eval/heldout.json: held-out comes from the final training point, and says so.
    assert.deepEqual(s!.figures.map((f) => [f.split, f.accuracy, f.source]), [['heldout', 0.5, 'training'], ['fresh-values', 0.25, 'evaluate']]);
    assert.deepEqual(s!.rowSplits, ['fresh-values']);
    assert.equal(g!.kind, 'grpo');
    assert.equal(g!.from, 's0');
    assert.equal(g!.minutes, 2.5);
    assert.equal(g!.figures[0]!.source, 'evaluate');
    const text = tableText(t);
    assert.deepEqual(text.head, ['run', 'kind', 'recipe', 'steps', 'minutes', 'held-out', 'fresh-values', 'held-out lookup', 'held-out sum']);
    assert.deepEqual(text.rows[0]!.cells, ['s0', 'sft', 'copy', '400', '3.0', '50.0% (2/4)', '25.0% (1/4 of 500)', '2/2', '0/2']);
    // Beside its SFT start: held-out from its step-0 point (50%), fresh-values from the start's own Evaluate (25%).
    assert.deepEqual(text.rows[1]!.cells, ['g0', 'grpo', 'from s0', '60', '2.5', '75.0% (3/4) +25.0', '50.0% (3/5 of 500) +25.0', '2/2', '1/2']);
    assert.match(text.rows[1]!.titles[5]!, /its SFT start: 50\.0%/);
    assert.equal(text.rows[0]!.titles[5], 'end of training, step-400');
    assert.deepEqual(commonRowSplits(t, sft, grpo), ['fresh-values']);
    assert.equal(figureCell(undefined), '—');
    assert.equal(shapeCell(undefined, 'sum'), '—');
  });

  it('two runs side by side on a split: the tasks one solves and the other does not', () => {
    const rows = (dir: string) => readEvalRows(path.join(dir, 'eval', 'fresh-values.jsonl'));
    const d = taskDiff('fresh-values', { name: 's0', rows: rows(sft) }, { name: 'g0', rows: rows(grpo) });
    assert.deepEqual(d.onlyA.map((r) => r.question), ['q1']);
    assert.deepEqual(d.onlyB.map((r) => [r.question, r.kind, r.a.answer, r.a.failure, r.b.answer]), [
      ['q2', 'lookup', 'x', 'final', 'b'],
      ['q3', 'sum', 'x', 'memorised', 'c'],
    ]);
    assert.equal(d.onlyA[0]!.b.failure, 'final');
    assert.equal(d.both, 0);
    assert.equal(d.neither, 1);
    assert.equal(d.unmatched, 1, 'q5: evaluated by g0 only');
    assert.deepEqual(readEvalRows(path.join(sft, 'eval', 'nothing.jsonl')), [], 'no rows: none, not a throw');
    assert.deepEqual(readEvalRows(null), []);
  });

  it("the panel's messages are validated both ways", () => {
    const t = compareTable([readRun(sft), readRun(grpo)]);
    assert.ok(parseToWebview({ type: 'compare/table', table: t }).ok);
    assert.ok(!parseToWebview({ type: 'compare/table', table: { ...t, rows: [{ ...t.rows[0], steps: 'x' }] } }).ok);
    const d = taskDiff('x', { name: 'a', rows: [] }, { name: 'b', rows: [] });
    assert.ok(parseToWebview({ type: 'compare/diff', diff: d }).ok);
    assert.ok(parseFromWebviewFor('compare', { type: 'compare/askDiff', a: sft, b: grpo, split: 'fresh-values' }).ok);
    assert.ok(!parseFromWebviewFor('compare', { type: 'compare/askDiff', a: sft, b: grpo, split: '../../etc/passwd' }).ok, 'a split is a name, not a path');
    assert.ok(!parseFromWebviewFor('compare', { type: 'compare/inspect', run: sft, split: 'heldout', extra: 1 }).ok);
    assert.ok(!parseFromWebviewFor('curves', { type: 'compare/refresh' }).ok, "another panel's message");
    assert.ok(parseFromWebviewFor('compare', { type: 'compare/refresh' }).ok);
    assert.deepEqual(parsePanelState('compare', { panel: 'compare' }), { panel: 'compare' });
  });
});
