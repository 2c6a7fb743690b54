// extension/chatTemplateFolders.ts: which folders "Agent Lab: Choose Chat Template…" offers
// (a chat_template.jinja, or a tokenizer_config.json with a chat_template), what its rows say
// (template source, generation blocks, a missing tokenizer.json, the current one), and the
// value written to agentLab.chatTemplate, as the language server resolves it.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { browseProblem, describeTemplateFolder, pickRows, settingFolder, settingValueFor, templateFoldersOf } from '../../extension/chatTemplateFolders';

const fixtures = path.resolve(__dirname, '..', 'fixtures', 'chat-templates');

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).flatMap((e) => (e.isFile() ? [path.join(e.parentPath, e.name)] : []));
}

describe('extension/chatTemplateFolders', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-lab-templates-'));
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const write = (rel: string, text: string): string => {
    const f = path.join(tmp, rel);
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, text);
    return f;
  };

  it('finds the six families of the fixtures, each once, with where its template comes from and whether it has generation blocks', () => {
    const found = templateFoldersOf(filesUnder(fixtures));
    assert.deepEqual(
      found.map((f) => path.basename(f.dir)),
      ['gemma3', 'llama3.1', 'mistral', 'qwen2.5', 'qwen2.5-generation', 'qwen3', 'smollm3'],
    );
    const by = new Map(found.map((f) => [path.basename(f.dir), f]));
    assert.equal(by.get('gemma3')!.source, 'chat_template.jinja', 'the .jinja file wins over the config, as in transformers');
    assert.equal(by.get('llama3.1')!.source, 'tokenizer_config.json');
    // Only the patched Qwen2.5 and SmolLM3 have generation blocks (docs/chat-templates.md).
    assert.deepEqual(
      found.filter((f) => f.hasGenerationTags).map((f) => path.basename(f.dir)),
      ['qwen2.5-generation', 'smollm3'],
    );
    assert.ok(found.every((f) => f.hasTokenizer));
  });

  it('skips folders without a template: a config without chat_template, an empty .jinja, a config that is not JSON', () => {
    write('plain/tokenizer_config.json', JSON.stringify({ eos_token: '</s>' }));
    write('plain/tokenizer.json', '{}');
    write('empty/chat_template.jinja', '  \n');
    write('broken/tokenizer_config.json', '{"chat_template": ');
    write(
      'named/tokenizer_config.json',
      JSON.stringify({
        chat_template: [{ name: 'default', template: '{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}' }],
      }),
    );
    const found = templateFoldersOf(filesUnder(tmp));
    assert.deepEqual(
      found.map((f) => path.basename(f.dir)),
      ['named'],
    );
    assert.equal(found[0]!.hasGenerationTags, true, 'a list of named templates is read too');
    assert.equal(found[0]!.hasTokenizer, false);
    assert.equal(describeTemplateFolder(path.join(tmp, 'nowhere')), undefined);
  });

  it('pick rows: the folder name, its workspace-relative path (current marked), and what assistant_only_loss will do', () => {
    write('models/a/chat_template.jinja', '{{ messages[0].content }}');
    write('models/a/tokenizer.json', '{}');
    write('models/b/chat_template.jinja', '{% generation %}{{ messages[0].content }}{% endgeneration %}');
    const rows = pickRows(templateFoldersOf(filesUnder(tmp)), tmp, path.join(tmp, 'models', 'b'));
    assert.deepEqual(
      rows.map((r) => [r.label, r.description]),
      [
        ['a', 'models/a'],
        ['b', 'models/b · current'],
      ],
    );
    assert.match(rows[0]!.detail, /^chat_template\.jinja · no \{% generation %\} blocks: assistant_only_loss would train nothing$/);
    assert.match(rows[1]!.detail, /generation %\} blocks: assistant_only_loss trains the assistant turns · no tokenizer\.json/);
  });

  it('the setting value: relative to the first workspace folder as the server resolves it, absolute outside it; and back', () => {
    const root = path.join(tmp, 'ws');
    const inside = path.join(root, 'models', 'qwen3');
    assert.equal(settingValueFor(root, inside), 'models/qwen3');
    assert.equal(settingValueFor(root, root), '.');
    const outside = path.join(tmp, 'elsewhere', 'llama');
    assert.equal(settingValueFor(root, outside), outside);
    assert.equal(settingValueFor(undefined, inside), inside);
    assert.equal(settingFolder(root, 'models/qwen3'), inside);
    assert.equal(settingFolder(root, outside), outside);
    assert.equal(settingFolder(root, ' '), undefined);
    assert.equal(settingFolder(root, undefined), undefined);
  });

  it('Browse…: a folder that is not one, has no template, or has no tokenizer.json is refused with the reason', () => {
    assert.match(browseProblem(path.join(tmp, 'missing'))!, /is not a folder/);
    write('x/readme.txt', 'hi');
    assert.match(browseProblem(path.join(tmp, 'x'))!, /holds no chat template: neither chat_template\.jinja nor a chat_template in tokenizer_config\.json/);
    write('y/chat_template.jinja', '{{ 1 }}');
    assert.match(browseProblem(path.join(tmp, 'y'))!, /no tokenizer\.json/);
    assert.equal(browseProblem(path.join(fixtures, 'qwen3')), null);
  });
});
