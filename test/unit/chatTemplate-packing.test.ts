// The packing finding of the chat-template loss mask (issue 30, "masks that packing would
// merge"; core/chatTemplate/mask.ts checkPackingBoundary): packed rows are concatenated, so a
// row's first token is labelled from the end of the row before it. When that token is
// supervised, the two rows' supervised runs merge across the boundary (or, with TRL's
// padding-free collator, its label is dropped): `packing-merge`. A row whose rendering starts
// with text the template writes before the supervised part (a bos, a system or user turn) has
// no such boundary; every published family's example rows are such rows.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { FINDING_CODES, compileChatTemplate, computeRowMask, parseConversationRow, type RowMask } from '../../core/chatTemplate';
import { readTemplateFolder } from '../../language-server/chatTemplateFolder';
import { repoRoot } from '../support/reference';

const FIXTURES = path.join(repoRoot, 'test/fixtures/chat-templates');
const mask = (family: string, row: unknown): RowMask => computeRowMask(readTemplateFolder(path.join(FIXTURES, family)), parseConversationRow(row));
const packing = (r: RowMask) => r.findings.filter((f) => f.code === 'packing-merge');

describe('chat-template findings: masks that packing would merge (packing-merge)', () => {
  it('is a warning with a code of its own', () => {
    assert.equal(FINDING_CODES['packing-merge'], 'warning');
  });

  it('a prompt-completion row with an empty prompt: completion_only_loss supervises the first token (the bos), by the prefix rule', () => {
    const r = mask('llama3.1', { prompt: [], completion: [{ role: 'assistant', content: 'Rome.' }] });
    assert.equal(r.tokens[0]!.text, '<|begin_of_text|>');
    assert.equal(r.tokens[0]!.prefix, true);
    const f = packing(r);
    assert.equal(f.length, 1);
    assert.equal(f[0]!.severity, 'warning');
    assert.match(
      f[0]!.message,
      /^the row's first token "<\|begin_of_text\|>" is supervised by the prefix mask: packed with other rows \(TRL packing=True\) it is predicted from the end of the row before it/,
    );
    // The same answer after a user turn: the first token is the prompt's, masked.
    assert.deepEqual(
      packing(mask('llama3.1', { prompt: [{ role: 'user', content: 'Capital of Italy?' }], completion: [{ role: 'assistant', content: 'Rome.' }] })),
      [],
    );
  });

  it('a generation block that opens the rendering: the generation rule names it', () => {
    const dir = path.join(FIXTURES, 'qwen2.5');
    // A template that writes an assistant turn's block first, with nothing (no bos, no header) before it.
    const model = readTemplateFolder(dir);
    const template =
      "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endif %}{% endfor %}";
    const compiled = compileChatTemplate(template);
    const custom = { ...model, template: () => compiled };
    const first = computeRowMask(
      custom,
      parseConversationRow({
        messages: [
          { role: 'assistant', content: 'Hello.' },
          { role: 'user', content: 'Hi' },
        ],
      }),
    );
    assert.equal(first.tokens[0]!.generation, true);
    assert.match(packing(first)[0]!.message, /is supervised by the generation(?: and prefix)? mask/);
    const later = computeRowMask(
      custom,
      parseConversationRow({
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello.' },
        ],
      }),
    );
    assert.deepEqual(packing(later), []);
  });

  it('never on the published example rows of the six families (each starts with text the template writes before the supervised part)', () => {
    const checked: string[] = [];
    const failed: string[] = [];
    for (const family of ['llama3.1', 'qwen2.5', 'qwen3', 'smollm3', 'gemma3', 'mistral']) {
      const example = JSON.parse(readFileSync(path.join(FIXTURES, family, 'example.json'), 'utf8')) as { data: { messages: unknown[] } };
      const row = { messages: example.data.messages };
      let r: RowMask;
      try {
        r = mask(family, row);
      } catch (err) {
        // Every example renders today; a failure is reported below with its cause.
        failed.push(`${family}: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      checked.push(family);
      assert.equal(r.tokens[0]!.generation || r.tokens[0]!.prefix, false, `${family}: first token ${JSON.stringify(r.tokens[0]!.text)}`);
      assert.deepEqual(packing(r), [], family);
    }
    assert.deepEqual(failed, []);
    assert.equal(checked.length, 6);
  });
});
