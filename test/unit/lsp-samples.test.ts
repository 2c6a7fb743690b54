// The fixture transcripts that show each diagnostic (samples/diagnostics): each
// shows the diagnostics its name promises, and nothing unexpected.
import * as assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { analyseTranscript } from '../../language-server/analysis/transcript';
import { analyseRow, transcriptText, transcriptUnit, unitDiagnostics } from '../../language-server/documents';
import { TokenizerStore } from '../../language-server/tokenizers';
import { repoRoot } from '../support/reference';

const dir = path.join(repoRoot, 'samples', 'diagnostics');
const tok = new TokenizerStore().resolve(null, null);

const EXPECTED: Record<string, string[]> = {
  'incomplete-call.transcript': ['call-incomplete'],
  // The misspelt marker leaves the step without a call, so its observation has none either.
  'misspelled-token.transcript': ['result-without-call', 'step-without-action', 'unknown-special-token'],
  'result-without-call.transcript': ['result-without-call'],
  'unterminated-turn.transcript': ['turn-unterminated'],
  'no-final-answer.transcript': ['no-final-answer'],
  'noncanonical-call.transcript': ['call-noncanonical'],
  'calc-error.transcript': ['calc-error'],
  'whitespace-between-turns.transcript': ['whitespace-between-turns', 'whitespace-between-turns'],
  'over-length.transcript': ['over-length'],
};

describe('language server: the sample transcripts of each diagnostic', () => {
  it('covers every fixture file', () => {
    const files = readdirSync(dir).filter((f) => f.endsWith('.transcript'));
    assert.deepEqual(files.sort(), Object.keys(EXPECTED).sort());
  });
  for (const [file, codes] of Object.entries(EXPECTED)) {
    it(`${file}: ${[...new Set(codes)].join(', ')}`, () => {
      const text = readFileSync(path.join(dir, file), 'utf8');
      const unit = transcriptUnit(TextDocument.create(`file:///${file}`, 'agent-transcript', 1, text), analyseTranscript(transcriptText(text)), tok);
      assert.deepEqual(unitDiagnostics(unit).map((d) => d.code).sort(), [...codes].sort());
    });
  }
  it('broken.traces.jsonl: a rejection on an escape, a row without text, a row that is not JSON', () => {
    const lines = readFileSync(path.join(dir, 'broken.traces.jsonl'), 'utf8').trimEnd().split('\n');
    const codes = lines.map((l) => analyseRow(l, tok).diagnostics.map((d) => d.d.code));
    assert.deepEqual(codes[0], []);
    assert.deepEqual(codes[1], ['grammar-rejected']);
    const g = analyseRow(lines[1]!, tok).diagnostics[0]!;
    assert.equal(lines[1]!.slice(g.startCol, g.endCol), '\\u0030');
    assert.deepEqual(codes[3], ['row-no-text']);
    assert.equal(codes[4]![0], 'row-not-json');
  });
});
