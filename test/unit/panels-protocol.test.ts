// core/protocol/panels.ts: what a webview may send is validated before use (a webview is
// untrusted input), what the extension sends is checked by the webviews, and the state VS
// Code hands back to a serializer is validated too.
import * as assert from 'node:assert/strict';
import {
  EMPTY_FILTER,
  LIMITS,
  panelOf,
  parseFromWebview,
  parseFromWebviewFor,
  parsePanelState,
  parseToWebview,
} from '../../core/protocol/panels';
import { grammarTrace } from '../../core/transcript/grammarTrace';
import { detailOf, parseSource } from '../../core/transcript/trajectories';
import { readFileSync } from 'node:fs';

const PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

describe('panels protocol: webview → extension (untrusted)', () => {
  it('accepts every well-formed message', () => {
    const good: unknown[] = [
      { type: 'ready' },
      { type: 'inspector/select', index: 3 },
      { type: 'inspector/reveal', index: 0, step: 2 },
      { type: 'lossMask/reveal', start: 4, end: 9 },
      { type: 'curves/addRun' },
      { type: 'curves/removeRun', id: '/tmp/run' },
      { type: 'curves/savePng', chart: 'sft-loss', dataUrl: PNG },
      { type: 'grammar/check', text: '{"tool": "calc"' },
      { type: 'grammar/fromEditor' },
      { type: 'grammar/reveal', index: 7 },
    ];
    for (const m of good) {
      const p = parseFromWebview(m);
      assert.ok(p.ok, `${JSON.stringify(m)}: ${p.ok ? '' : p.error}`);
      assert.deepEqual(p.message, m);
    }
  });

  it('refuses unknown types, wrong field types, extra fields and oversized input', () => {
    const bad: unknown[] = [
      null,
      'ready',
      [],
      { type: 'nope' },
      { type: 'ready', extra: 1 },
      { type: 'inspector/select', index: -1 },
      { type: 'inspector/select', index: 1.5 },
      { type: 'inspector/select', index: '3' },
      { type: 'inspector/select' },
      { type: 'inspector/reveal', index: 0, step: 1e9 },
      { type: 'lossMask/reveal', start: 9, end: 4 },
      { type: 'lossMask/reveal', start: 0, end: Infinity },
      { type: 'curves/removeRun', id: 5 },
      { type: 'curves/savePng', chart: '../../etc/passwd', dataUrl: PNG },
      { type: 'curves/savePng', chart: 'sft-loss', dataUrl: 'data:text/html;base64,PHNjcmlwdD4=' },
      { type: 'curves/savePng', chart: 'sft-loss', dataUrl: 'data:image/png;base64,<script>' },
      { type: 'grammar/check', text: 'x'.repeat(LIMITS.text + 1) },
      { type: 'grammar/check', text: 42 },
      { type: 'grammar/reveal', index: -2 },
    ];
    for (const m of bad) assert.equal(parseFromWebview(m).ok, false, JSON.stringify(m)?.slice(0, 120));
  });

  it('refuses a message of another panel', () => {
    assert.equal(parseFromWebviewFor('inspector', { type: 'grammar/check', text: '' }).ok, false);
    assert.equal(parseFromWebviewFor('grammar', { type: 'grammar/check', text: '' }).ok, true);
    assert.equal(parseFromWebviewFor('curves', { type: 'ready' }).ok, true);
    assert.equal(panelOf('lossMask/reveal'), 'lossMask');
    assert.equal(panelOf('ready'), 'any');
    assert.equal(panelOf('other/x'), null);
  });
});

describe('panels protocol: extension → webview', () => {
  it('accepts what the extension builds from the samples', () => {
    const src = parseSource(readFileSync('samples/train.traces.jsonl', 'utf8'), false);
    const load = { type: 'inspector/load', source: { uri: 'file:///x', label: 'x', kind: src.kind }, rows: src.rows.map((r) => r.summary), problems: [] };
    assert.ok(parseToWebview(load).ok);
    // "Inspect Evaluation" opens the failures: the outcome it asks for, and nothing else.
    assert.ok(parseToWebview({ ...load, outcome: 'failed' }).ok);
    assert.equal(parseToWebview({ ...load, outcome: 'wrong' }).ok, false);
    assert.ok(parseToWebview({ type: 'inspector/detail', detail: detailOf(src.rows[0]!) }).ok);
    const trace = grammarTrace('{"tool": "search", "args": {"query": "q", "k": 0}}');
    assert.ok(parseToWebview({ type: 'grammar/trace', source: { kind: 'typed' }, trace, cursor: null }).ok);
    assert.ok(parseToWebview({ type: 'curves/run', run: { id: 'a', label: 'a', dir: '/a' }, records: [{ phase: 'sft', step: 1, time: 0.5, loss: 2 }], reset: true, live: false, problems: [] }).ok);
  });

  it('refuses inconsistent payloads (a trace whose steps do not match its characters, a bad record)', () => {
    const trace = grammarTrace('{"tool"');
    assert.equal(parseToWebview({ type: 'grammar/trace', source: { kind: 'typed' }, trace: { ...trace, steps: trace.steps.slice(1) }, cursor: null }).ok, false);
    assert.equal(parseToWebview({ type: 'curves/run', run: { id: 'a', label: 'a', dir: '/a' }, records: [{ phase: 'rl', step: 1, time: 0 }], reset: true, live: false, problems: [] }).ok, false);
    assert.equal(parseToWebview({ type: 'lossMask/show', view: { label: 'x', mask: { uri: 'u' }, harness: null } }).ok, false);
  });
});

describe('panels protocol: serializer state', () => {
  it('restores valid state and refuses anything else', () => {
    const inspector = { panel: 'inspector', source: { uri: 'file:///a.jsonl', label: 'a.jsonl', kind: 'eval' }, filter: EMPTY_FILTER, selected: 3, scrollTop: 120 };
    assert.deepEqual(parsePanelState('inspector', inspector), inspector);
    assert.equal(parsePanelState('inspector', { ...inspector, selected: -1 }), null);
    assert.equal(parsePanelState('inspector', { ...inspector, filter: { ...EMPTY_FILTER, outcome: 'maybe' } }), null);
    assert.equal(parsePanelState('grammar', inspector), null, 'another panel’s state');
    assert.ok(parsePanelState('curves', { panel: 'curves', runs: ['/r'], hidden: [] }));
    assert.equal(parsePanelState('curves', { panel: 'curves', runs: Array(100).fill('/r'), hidden: [] }), null);
    assert.ok(parsePanelState('grammar', { panel: 'grammar', text: '{', cursor: 1, source: 'typed' }));
    assert.ok(parsePanelState('lossMask', { panel: 'lossMask', uri: null, row: null }));
    assert.equal(parsePanelState('lossMask', undefined), null);
  });
});
