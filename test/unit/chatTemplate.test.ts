// The loss mask of Hugging Face chat templates (core/chatTemplate, issue 30): five families'
// templates as published (test/fixtures/chat-templates/<family>/SOURCE.md) render their
// published examples byte for byte; the generation-block mask, the prefix-difference mask and
// the findings on conversations with tool calls. The tokenizers are generated stand-ins
// (make-tokenizers.ts): ids differ from the real models', character spans do not.
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  ChatModel,
  ChatTemplateError,
  RowError,
  compileChatTemplate,
  computeRowMask,
  loadChatModel,
  parseConversationRow,
  pickTemplate,
  type RowMask,
} from '../../core/chatTemplate';
import { CHAT_TEMPLATE, renderMessages, transcriptToMessages } from '../../core/export';
import { segment } from '../../core/lossMask';
import { SPECIAL_TOKENS } from '../../core/wire';
import { canonicalTokenizerJson, trainDefaultTokenizer } from '../../core/tokenizer';
import { renderJinja } from '../support/miniJinja';
import { repoRoot } from '../support/reference';
import { standInTokenizerJson } from '../fixtures/chat-templates/make-tokenizers';

const FIXTURES = path.join(repoRoot, 'test/fixtures/chat-templates');
const FAMILIES = ['llama3.1', 'qwen2.5', 'qwen3', 'smollm3', 'gemma3', 'mistral'] as const;

function folder(name: string): ChatModel {
  const dir = path.join(FIXTURES, name);
  const read = (f: string): string | undefined => (existsSync(path.join(dir, f)) ? readFileSync(path.join(dir, f), 'utf8') : undefined);
  const cfg = read('tokenizer_config.json');
  const jinja = read('chat_template.jinja');
  return loadChatModel({ tokenizerJson: read('tokenizer.json')!, ...(cfg !== undefined ? { tokenizerConfigJson: cfg } : {}), ...(jinja !== undefined ? { chatTemplateJinja: jinja } : {}) });
}

/** SmolLM3's template prints today's date (strftime_now): pin it to the published example's day. */
function withDate<T>(iso: string, f: () => T): T {
  const RealDate = Date;
  globalThis.Date = class extends RealDate {
    constructor(...a: unknown[]) {
      super(...((a.length ? a : [iso]) as [string]));
    }
  } as DateConstructor;
  try {
    return f();
  } finally {
    globalThis.Date = RealDate;
  }
}

const supervised = (r: RowMask, rule: 'generation' | 'prefix'): string =>
  r.tokens
    .filter((t) => t[rule])
    .map((t) => t.text)
    .join('');
const codes = (r: RowMask): string[] => r.findings.map((f) => f.code);

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_current_temperature',
      description: 'Get the current temperature at a location.',
      parameters: { type: 'object', properties: { location: { type: 'string', description: 'The location.' } }, required: ['location'] },
    },
  },
];
/** A multi-turn tool-calling conversation in TRL's format (https://huggingface.co/docs/trl/dataset_formats#tool-calling). */
const TOOL_ROW = {
  messages: [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'What is the temperature in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call00001', type: 'function', function: { name: 'get_current_temperature', arguments: { location: 'Paris, France' } } }] },
    { role: 'tool', name: 'get_current_temperature', tool_call_id: 'call00001', content: '22.0' },
    { role: 'assistant', content: 'It is 22 degrees celsius.' },
    { role: 'user', content: 'And in Santiago?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'call00002', type: 'function', function: { name: 'get_current_temperature', arguments: { location: 'Santiago, Chile' } } }] },
    { role: 'tool', name: 'get_current_temperature', tool_call_id: 'call00002', content: '18.5' },
    { role: 'assistant', content: 'It is 18.5 degrees celsius in Santiago.' },
  ],
  tools: TOOLS,
};

/** The example dialogue of https://ai.google.dev/gemma/docs/core/prompt-structure. */
const KNOCK = {
  messages: [
    { role: 'user', content: 'knock knock' },
    { role: 'assistant', content: 'who is there' },
    { role: 'user', content: 'Gemma' },
    { role: 'assistant', content: 'Gemma who?' },
  ],
};

describe('chat templates: rendering', () => {
  for (const fam of FAMILIES) {
    it(`${fam}: the published template renders its published example byte for byte`, () => {
      const ex = JSON.parse(readFileSync(path.join(FIXTURES, fam, 'example.json'), 'utf8')) as { data: Record<string, unknown>; target: string; published?: string };
      // Gemma's page shows the text without the <bos> and the final separator newline (example.json's note).
      if (ex.published !== undefined) assert.equal(`<bos>${ex.published}\n`, ex.target);
      const out = withDate('2025-07-10T12:00:00Z', () => folder(fam).template(ex.data['tools'] !== undefined).render(ex.data));
      assert.equal(out.text, ex.target);
      // Of the five, only SmolLM3 ships {% generation %} blocks (around its whole assistant turn).
      if (fam === 'smollm3') assert.deepEqual(out.generation.map(([a, b]) => out.text.slice(a, b)), [`<|im_start|>assistant\n${(ex.data['messages'] as { content: string }[])[2]!.content}<|im_end|>\n`]);
      else assert.deepEqual(out.generation, []);
    });
  }

  it("generation spans: the lab's own template (core/export.ts) gives the spans renderMessages and the test mini-Jinja give", () => {
    const messages = [
      { role: 'system' as const, content: 'sys' },
      { role: 'user' as const, content: 'q?' },
      { role: 'assistant' as const, content: 'a1' },
      { role: 'tool' as const, content: 'obs' },
      { role: 'assistant' as const, content: 'a2' },
    ];
    const out = compileChatTemplate(CHAT_TEMPLATE).render({ messages, add_generation_prompt: false });
    assert.deepEqual(out, renderMessages(messages));
    assert.deepEqual(out, renderJinja(CHAT_TEMPLATE, { messages: messages as never, add_generation_prompt: false }));
  });

  it('generation tags follow trim_blocks / lstrip_blocks and whitespace control as Jinja2 block tags do', () => {
    const t = compileChatTemplate('{% for m in messages %}{{ m.role }}:\n  {% generation %}\n{{ m.content }}{% endgeneration %}\n|{%- generation -%}  X  {%- endgeneration -%}|{% endfor %}');
    const out = t.render({ messages: [{ role: 'assistant', content: 'hi' }] });
    // trim_blocks eats the newline after each tag; lstrip_blocks the indentation before one at a line start.
    assert.equal(out.text, 'assistant:\nhi|X|');
    assert.deepEqual(out.generation, [
      [11, 13],
      [14, 15],
    ]);
    assert.equal(t.hasGenerationTags, true);
    assert.equal(compileChatTemplate('{{ messages[0].content }}').hasGenerationTags, false);
  });

  it('the patched Qwen2.5 template renders every conversation as the upstream one does', () => {
    const up = folder('qwen2.5');
    const patched = folder('qwen2.5-generation');
    const ex = JSON.parse(readFileSync(path.join(FIXTURES, 'qwen2.5', 'example.json'), 'utf8')) as { data: Record<string, unknown> };
    const cases: Record<string, unknown>[] = [
      ex.data,
      { messages: TOOL_ROW.messages, tools: TOOLS },
      { messages: TOOL_ROW.messages.slice(0, 5) },
      { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'Calling.', tool_calls: TOOL_ROW.messages[2]!.tool_calls }], add_generation_prompt: false },
    ];
    for (const vars of cases) {
      for (const agp of [false, true]) {
        const v = { ...vars, add_generation_prompt: agp };
        assert.equal(patched.template(vars['tools'] !== undefined).render(v).text, up.template(vars['tools'] !== undefined).render(v).text);
      }
    }
  });

  it('pickTemplate: chat_template.jinja wins; a list of named templates gives tool_use for rows with tools', () => {
    const list = [
      { name: 'default', template: 'D' },
      { name: 'tool_use', template: 'T' },
    ];
    assert.equal(pickTemplate('J', list, true), 'J');
    assert.equal(pickTemplate(undefined, list, false), 'D');
    assert.equal(pickTemplate(undefined, list, true), 'T');
    assert.equal(pickTemplate(undefined, [{ name: 'default', template: 'D' }], true), 'D');
    assert.throws(() => pickTemplate(undefined, [{ name: 'rag', template: 'R' }], false), /no template named "default" \(names: rag\)/);
    assert.throws(() => pickTemplate(undefined, undefined, false), /no chat template/);
  });
});

describe('chat templates: masks and findings', () => {
  for (const fam of ['llama3.1', 'qwen2.5', 'qwen3', 'gemma3', 'mistral'] as const) {
    it(`${fam}: no generation blocks, so the generation mask is all zero: an error finding`, () => {
      // Gemma 3's template knows no tools (and insists on user/model turns): the knock-knock dialogue.
      const r = computeRowMask(folder(fam), parseConversationRow(fam === 'gemma3' ? KNOCK : TOOL_ROW));
      assert.equal(supervised(r, 'generation'), '');
      const f = r.findings.find((x) => x.code === 'all-zero-generation-mask');
      assert.ok(f, codes(r).join(', '));
      assert.equal(f.severity, 'error');
      assert.match(f.message, /no \{% generation %\} blocks/);
      assert.ok(supervised(r, 'prefix').length > 0, 'the prefix mask still supervises the assistant turns');
    });
  }

  it('smollm3 ships generation blocks: no all-zero finding, but they hold the header the generation prompt supplies (and, without thinking, the empty think block)', () => {
    const m = folder('smollm3');
    const row = parseConversationRow({ messages: TOOL_ROW.messages.slice(0, 2).concat([{ role: 'assistant', content: 'It is 22 degrees.' }]) });
    const r = withDate('2025-07-10T12:00:00Z', () => computeRowMask(m, row));
    assert.deepEqual(codes(r), ['gen-prompt-supervised']);
    assert.match(r.findings[0]!.message, /"<\|im_start\|>assistant\\n" are what the generation prompt already supplies/);
    assert.equal(supervised(r, 'generation'), '<|im_start|>assistant\nIt is 22 degrees.<|im_end|>\n');
    assert.equal(supervised(r, 'prefix'), 'It is 22 degrees.<|im_end|>');
    const off = withDate('2025-07-10T12:00:00Z', () => computeRowMask(m, row, { templateKwargs: { enable_thinking: false } }));
    assert.deepEqual(codes(off).sort(), ['empty-think-supervised', 'gen-prompt-supervised']);
    assert.match(off.findings.find((f) => f.code === 'gen-prompt-supervised')!.message, /"<\|im_start\|>assistant\\n<think>\\n\\n<\/think>\\n"/);
    // Its tool list goes through a Python filter @huggingface/jinja lacks: the error says so.
    assert.throws(
      () => computeRowMask(m, parseConversationRow(TOOL_ROW)),
      (e: unknown) => e instanceof ChatTemplateError && /ObjectValue filter: string.*@huggingface\/jinja lacks this/.test(e.message),
    );
  });

  it('qwen2.5: the prefix mask of a multi-turn tool-calling conversation is exactly the assistant turns and their <|im_end|>', () => {
    const r = computeRowMask(folder('qwen2.5'), parseConversationRow(TOOL_ROW));
    const call = (loc: string): string => `<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": "${loc}"}}\n</tool_call><|im_end|>`;
    assert.equal(supervised(r, 'prefix'), call('Paris, France') + 'It is 22 degrees celsius.<|im_end|>' + call('Santiago, Chile') + 'It is 18.5 degrees celsius in Santiago.<|im_end|>');
    // Every supervised token belongs to an assistant message.
    assert.ok(r.tokens.filter((t) => t.prefix).every((t) => t.role === 'assistant'));
  });

  it("gemma3: Google's published dialogue renders as published; its prefix mask is the model turns and their <end_of_turn>", () => {
    const r = computeRowMask(folder('gemma3'), parseConversationRow(KNOCK));
    // https://ai.google.dev/gemma/docs/core/prompt-structure, with the template's <bos> and the final separator.
    assert.equal(r.text, '<bos><start_of_turn>user\nknock knock<end_of_turn>\n<start_of_turn>model\nwho is there<end_of_turn>\n<start_of_turn>user\nGemma<end_of_turn>\n<start_of_turn>model\nGemma who?<end_of_turn>\n');
    assert.equal(supervised(r, 'prefix'), 'who is there<end_of_turn>Gemma who?<end_of_turn>');
  });

  it('llama3.1: the prefix mask of a multi-turn tool-calling conversation is exactly the assistant turns and their <|eot_id|>', () => {
    const r = computeRowMask(folder('llama3.1'), parseConversationRow(TOOL_ROW));
    const call = (loc: string): string => `{"name": "get_current_temperature", "parameters": {"location": "${loc}"}}<|eot_id|>`;
    assert.equal(supervised(r, 'prefix'), call('Paris, France') + 'It is 22 degrees celsius.<|eot_id|>' + call('Santiago, Chile') + 'It is 18.5 degrees celsius in Santiago.<|eot_id|>');
  });

  it('mistral: tools render before the last user turn, so earlier turns have no stable prefix; the last turn is supervised with its </s>', () => {
    const r = computeRowMask(folder('mistral'), parseConversationRow(TOOL_ROW));
    assert.deepEqual(
      r.findings.filter((f) => f.code === 'prefix-unstable').map((f) => f.message_index),
      [2, 4],
    );
    const call = ' [TOOL_CALLS] [{"name": "get_current_temperature", "arguments": {"location": "Santiago, Chile"}, "id": "call00002"}] </s>';
    assert.equal(supervised(r, 'prefix'), call + ' It is 18.5 degrees celsius in Santiago. </s>');
    // A BPE that folds the space into the first word joins the answer to the text before it.
    const ctx = r.findings.filter((f) => f.code === 'context-tokenization');
    assert.ok(ctx.length > 0);
    assert.match(ctx[0]!.message, /joins it to the text before/);
  });

  it('a patched template with generation blocks: no finding, and the two masks agree token for token', () => {
    const r = computeRowMask(folder('qwen2.5-generation'), parseConversationRow(TOOL_ROW));
    assert.deepEqual(r.findings, []);
    assert.ok(r.tokens.some((t) => t.generation));
    assert.deepEqual(
      r.tokens.map((t) => t.generation),
      r.tokens.map((t) => t.prefix),
    );
    // The lab's own template has generation blocks too: no all-zero finding.
    const labTok = trainDefaultTokenizer();
    const lab = loadChatModel({ tokenizerJson: canonicalTokenizerJson(labTok), tokenizerConfigJson: JSON.stringify({ chat_template: CHAT_TEMPLATE }) });
    const lr = computeRowMask(lab, parseConversationRow({ messages: [{ role: 'user', content: 'What is 2+2?' }, { role: 'assistant', content: 'Answer: 4' }] }));
    assert.ok(!codes(lr).includes('all-zero-generation-mask'), codes(lr).join(', '));
    assert.equal(supervised(lr, 'generation'), 'Answer: 4<|end|>');
  });

  const chatml = (body: string): ChatModel =>
    loadChatModel({
      tokenizerJson: JSON.stringify(standInTokenizerJson(['<|im_start|>', '<|im_end|>', '<think>', '</think>'].map((content, i) => ({ content, special: i < 2 })))),
      chatTemplateJinja: body,
    });
  const CHAT = { messages: [{ role: 'user', content: 'What is the capital of France?' }, { role: 'assistant', content: 'The capital of France is Paris.' }] };

  it('eot-not-supervised: a generation block that stops before <|im_end|>', () => {
    const m = chatml(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
    );
    const r = computeRowMask(m, parseConversationRow(CHAT));
    assert.deepEqual(codes(r), ['eot-not-supervised']);
    assert.match(r.findings[0]!.message, /assistant message 1: its end-of-turn token "<\|im_end\|>" .* never learns to stop/);
    assert.equal(supervised(r, 'prefix'), 'The capital of France is Paris.<|im_end|>');
  });

  it('gen-prompt-supervised and empty-think-supervised: an empty think block the generation prompt supplies, inside the generation block', () => {
    // As Qwen3 with enable_thinking=false: the generation prompt ends with an empty think block.
    const m = chatml(
      "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}{% if m.role == 'assistant' %}{% generation %}{{ '<think>\\n\\n</think>\\n\\n' + m.content + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}{% else %}{{ m.content + '<|im_end|>\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}{% endif %}",
    );
    const r = computeRowMask(m, parseConversationRow(CHAT));
    assert.deepEqual(codes(r).sort(), ['empty-think-supervised', 'gen-prompt-supervised']);
    assert.match(r.findings.find((f) => f.code === 'gen-prompt-supervised')!.message, /"<think>\\n\\n<\/think>\\n\\n" are what the generation prompt already supplies/);
    assert.match(r.findings.find((f) => f.code === 'empty-think-supervised')!.message, /supervised by the generation mask/);
    // The prefix mask leaves the supplied block out.
    assert.equal(supervised(r, 'prefix'), 'The capital of France is Paris.<|im_end|>');
  });

  it('qwen3: the last assistant turn renders an empty think block the prefix mask supervises; earlier turns are prefix-unstable', () => {
    const r = computeRowMask(folder('qwen3'), parseConversationRow({ messages: TOOL_ROW.messages.slice(0, 5), tools: TOOLS }));
    assert.ok(codes(r).includes('empty-think-supervised'));
    assert.ok(codes(r).includes('prefix-unstable'));
    assert.match(r.findings.find((f) => f.code === 'prefix-unstable')!.message, /assistant message 2: .*a later turn changes how it is rendered/);
    assert.equal(supervised(r, 'prefix'), '<think>\n\n</think>\n\nIt is 22 degrees celsius.<|im_end|>');
  });

  it('tool-call-roundtrip: arguments given as a JSON string are serialised again by Qwen2.5 and Llama 3.1', () => {
    const stringArgs = {
      ...TOOL_ROW,
      messages: TOOL_ROW.messages.slice(0, 5).map((m, i) =>
        i === 2 ? { ...m, tool_calls: [{ type: 'function', function: { name: 'get_current_temperature', arguments: '{"location": "Paris, France"}' } }] } : m,
      ),
    };
    for (const fam of ['qwen2.5-generation', 'llama3.1']) {
      const r = computeRowMask(folder(fam), parseConversationRow(stringArgs));
      const f = r.findings.filter((x) => x.code === 'tool-call-roundtrip');
      assert.equal(f.length, 1, `${fam}: ${codes(r).join(', ')}`);
      assert.equal(f[0]!.message_index, 2);
      assert.match(f[0]!.message, /the call get_current_temperature renders with arguments .*serialised again: give them as an object/);
      // Objects round-trip: no finding.
      assert.ok(!codes(computeRowMask(folder(fam), parseConversationRow(TOOL_ROW))).includes('tool-call-roundtrip'));
    }
  });

  it('truncation: supervised tokens beyond max_length are counted; all of them lost is an error', () => {
    const m = folder('qwen2.5-generation');
    const row = parseConversationRow(TOOL_ROW);
    const full = computeRowMask(m, row);
    const firstSup = full.tokens.findIndex((t) => t.generation);
    const some = computeRowMask(m, row, { maxLength: full.tokens.length - 3 });
    const f = some.findings.filter((x) => x.code === 'truncated-supervision');
    assert.equal(f.length, 2, 'both masks lose tokens');
    assert.match(f[0]!.message, /^\d+ of \d+ supervised tokens of the generation mask lie beyond max_length=/);
    const none = computeRowMask(m, row, { maxLength: firstSup });
    assert.ok(none.findings.some((x) => x.code === 'all-supervision-truncated' && x.severity === 'error'));
    assert.deepEqual(computeRowMask(m, row, { maxLength: full.tokens.length }).findings, []);
  });

  it('prompt-completion rows: the prefix mask is completion_only_loss (everything the completion adds)', () => {
    const r = computeRowMask(
      folder('qwen2.5'),
      parseConversationRow({ prompt: [{ role: 'user', content: 'What is the capital of Chile?' }], completion: [{ role: 'assistant', content: 'Santiago.' }] }),
    );
    assert.equal(supervised(r, 'prefix'), 'Santiago.<|im_end|>\n');
    assert.deepEqual(codes(r), ['all-zero-generation-mask']);
    // A warning here: TRL trains prompt-completion rows with completion_only_loss by default.
    assert.equal(r.findings[0]!.severity, 'warning');
    assert.match(r.findings[0]!.message, /with TRL's default completion_only_loss this prompt-completion row is trained on its completion/);
    const g = computeRowMask(
      folder('qwen2.5-generation'),
      parseConversationRow({ prompt: [{ role: 'user', content: 'What is the capital of Chile?' }], completion: [{ role: 'assistant', content: 'Santiago.' }] }),
    );
    assert.equal(supervised(g, 'generation'), 'Santiago.<|im_end|>');
  });

  it('tokens carry their role and text; the texts concatenate to the rendering', () => {
    const r = computeRowMask(folder('qwen2.5'), parseConversationRow(TOOL_ROW));
    assert.equal(r.tokens.map((t) => t.text).join(''), r.text);
    assert.deepEqual([...new Set(r.tokens.map((t) => t.role))].sort(), ['assistant', 'system', 'tool', 'user']);
  });
});

describe("chat templates: the lab's own export", () => {
  it("the exported template's generation mask and prefix mask are the lab's own loss mask (segment) on the golden transcripts", () => {
    const golden = JSON.parse(readFileSync(path.join(repoRoot, 'test/golden/pipeline.json'), 'utf8')) as { traces: Record<string, { text: string }[]> };
    const tok = trainDefaultTokenizer();
    const lab = loadChatModel({ tokenizerJson: canonicalTokenizerJson(tok), tokenizerConfigJson: JSON.stringify({ chat_template: CHAT_TEMPLATE }) });
    const texts = Object.values(golden.traces).flat().slice(0, 25).map((t) => t.text);
    assert.ok(texts.length >= 10);
    for (const text of texts) {
      const r = computeRowMask(lab, parseConversationRow({ messages: transcriptToMessages(text) }));
      assert.equal(r.text, text, 'the template renders the transcript back');
      const want = segment(text)
        .filter(([, sup]) => sup)
        .map(([t]) => t)
        .join('');
      assert.equal(supervised(r, 'generation'), want);
      assert.equal(supervised(r, 'prefix'), want);
      assert.deepEqual(r.findings, []);
    }
  });
});

describe('chat templates: encoding', () => {
  it('the per-piece cache gives the ids whole-text encoding gives, once trusted and on texts it never saw', () => {
    for (const fam of ['qwen2.5', 'llama3.1', 'mistral']) {
      const m = folder(fam);
      const texts = [0, 1, 2, 3, 4, 5].map(
        (i) => computeRowMask(m, parseConversationRow({ messages: [{ role: 'user', content: `Question ${i}: what is the capital of France?` }, { role: 'assistant', content: `Paris ${i}.` }] })).text,
      );
      texts.push('<|im_start|><|im_start|>  spaces  <|im_end|>\n\n<s>[INST]x[/INST]</s>é😀');
      for (const t of texts) assert.deepEqual(m.encode(t), m.tokenizer.encode(t, { add_special_tokens: false }).ids, `${fam}: ${JSON.stringify(t.slice(0, 40))}`);
    }
  });
});

describe('chat templates: token offsets', () => {
  it('characters split across byte-level tokens: every token gets its span, the texts concatenate to the rendering', () => {
    const r = computeRowMask(folder('qwen2.5'), parseConversationRow({ messages: [{ role: 'user', content: 'Ça va? 😀' }, { role: 'assistant', content: 'Très bien, merci 🎉 — et toi?' }] }));
    assert.equal(r.tokens.map((t) => t.text).join(''), r.text);
    assert.ok(!codes(r).includes('offsets-approximate'));
    assert.equal(supervised(r, 'prefix'), 'Très bien, merci 🎉 — et toi?<|im_end|>');
  });

  it('a Metaspace tokenizer (decoding strips the leading space): spans still cover the text; the supervised text is the answer', () => {
    const chars = [...new Set('▁abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ?.,:'.split(''))];
    const tj = {
      version: '1.0',
      added_tokens: ['<s>', '</s>', '[INST]', '[/INST]'].map((content, i) => ({ id: i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
      normalizer: null,
      pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
      post_processor: null,
      decoder: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: Object.fromEntries(chars.map((c, i) => [c, i + 4])), merges: [] },
    };
    const m = loadChatModel({
      tokenizerJson: JSON.stringify(tj),
      chatTemplateJinja: "{{ '<s>' }}{% for m in messages %}{% if m.role == 'user' %}{{ '[INST] ' + m.content + ' [/INST]' }}{% else %}{{ ' ' + m.content + '</s>' }}{% endif %}{% endfor %}",
    });
    const r = computeRowMask(m, parseConversationRow({ messages: [{ role: 'user', content: 'What is it?' }, { role: 'assistant', content: 'It is fine.' }] }));
    assert.equal(r.tokens[r.tokens.length - 1]!.end, r.text.length);
    assert.ok(r.tokens.every((t, i) => i === 0 || t.start === r.tokens[i - 1]!.end), 'spans tile the text');
    assert.ok(!codes(r).includes('offsets-approximate'), codes(r).join(', '));
    assert.equal(supervised(r, 'prefix').trim(), 'It is fine.</s>');
  });
});

describe('chat templates: bad input', () => {
  it('a row that is not a conversation names what is wrong', () => {
    assert.throws(() => parseConversationRow([1]), (e: unknown) => e instanceof RowError && /the row is a list/.test(e.message));
    assert.throws(() => parseConversationRow({ text: 'hi' }), /standard \(text\) row/);
    assert.throws(() => parseConversationRow({ prompt: 'hi', completion: 'there' }), /standard \(text\) prompt-completion row/);
    assert.throws(() => parseConversationRow({ messages: [{ content: 'x' }] }), /messages\[0\] has no "role" string/);
    assert.throws(() => parseConversationRow({ messages: [] }), /"messages" is empty/);
    assert.throws(() => parseConversationRow({ messages: [{ role: 'user', content: 3 }] }), /messages\[0\]\.content is a number/);
    assert.throws(() => parseConversationRow({ foo: 1 }), /no "messages" nor "prompt"\/"completion" in the row \(keys: foo\)/);
  });

  it('a template that fails to parse or raises names the cause', () => {
    assert.throws(() => compileChatTemplate('{% for m in messages %}'), (e: unknown) => e instanceof ChatTemplateError && /does not parse: .*an unclosed block/.test(e.message));
    assert.throws(() => compileChatTemplate('{% if %}'), /does not parse: Unexpected token: CloseStatement/);
    // A literal range that would take the process's memory is refused before rendering.
    assert.throws(() => compileChatTemplate('{% for i in range(10**9) %}x{% endfor %}'), /asks for range\(10\*\*9\.\.\.\): over 1,000,000 items, refused/);
    assert.throws(() => compileChatTemplate('{% for i in range(0, 50000000) %}x{% endfor %}'), /refused/);
    assert.equal(compileChatTemplate('{% for i in range(3) %}{{ i }}{% endfor %}').render({}).text, '012');
    // Llama 3.1's template raises when tools go in a first user message that is not there.
    assert.throws(
      () => computeRowMask(folder('llama3.1'), parseConversationRow({ messages: [{ role: 'system', content: 'You are a bot.' }], tools: TOOLS })),
      (e: unknown) => e instanceof ChatTemplateError && /fails to render: .*no first user message/.test(e.message),
    );
  });

  it('a tokenizer folder that does not parse names the file', () => {
    assert.throws(() => loadChatModel({ tokenizerJson: '{', chatTemplateJinja: 'x' }), /tokenizer\.json is not valid JSON/);
    assert.throws(() => loadChatModel({ tokenizerJson: '{"a": 1}', chatTemplateJinja: 'x' }), /tokenizer\.json has no "model" object/);
    const tj = readFileSync(path.join(FIXTURES, 'qwen2.5', 'tokenizer.json'), 'utf8');
    assert.throws(() => loadChatModel({ tokenizerJson: tj, tokenizerConfigJson: '[1]' }), /tokenizer_config\.json is not a JSON object/);
    assert.throws(() => loadChatModel({ tokenizerJson: tj, tokenizerConfigJson: '{}' }), /no chat template/);
  });

  it("the lab's wire specials are not special in the stand-in tokenizers (the family's are)", () => {
    const m = folder('qwen2.5');
    assert.ok(m.specialTokens.has('<|im_end|>'));
    assert.ok(!m.specialTokens.has('<tool_call>'), "Qwen's <tool_call> is an added token, not a special one");
    for (const s of SPECIAL_TOKENS) assert.ok(!m.specialTokens.has(s));
  });
});
