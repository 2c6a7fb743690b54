// The world and run folders' names live in core/protocol/folders.ts; the lint rule
// scripts/eslint/folders.mjs ("agent-lab/folder-names") refuses them spelled elsewhere: a file
// name as a literal, a folder name in a path join. Tests keep literals (they check the on-disk
// contract), so the rule exempts test/ and the module itself.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, Rule, RuleTester } from 'eslint';
import * as folders from '../../core/protocol/folders';

const root = path.resolve(__dirname, '..', '..');
const at = (file: string): string => path.join(root, file);

interface FoldersPlugin {
  default: { rules: { 'folder-names': Rule.RuleModule } };
  folderConstants: (source?: string) => { name: string; value: string }[];
  exempt: (file: string) => boolean;
}

describe('lint: the folder names have one home', () => {
  let plugin: FoldersPlugin;
  before(async () => {
    plugin = (await import(pathToFileURL(at('scripts/eslint/folders.mjs')).href)) as FoldersPlugin;
  });

  it('refuses a folder file name as a literal and a folder name in a path join; accepts the constants and ordinary words', () => {
    const tester = new RuleTester({ languageOptions: { ecmaVersion: 2022, sourceType: 'module' } });
    const bad = (file: string, code: string, message: RegExp, count = 1): RuleTester.InvalidTestCase => ({
      filename: at(file),
      code,
      errors: Array.from({ length: count }, () => ({ message })),
    });
    tester.run('agent-lab/folder-names', plugin.default.rules['folder-names'], {
      valid: [
        { filename: at('trainer/sft/sft.ts'), code: "import { CONFIG_FILE } from '../../core/protocol/folders'; const f = path.join(runDir, CONFIG_FILE);" },
        // The folder names are ordinary words outside a path join: a job kind, a JSON key, a node type.
        { filename: at('extension/runsView.ts'), code: "const n = { type: 'checkpoints' }; const k = r['world']; if (job === 'eval') go(); load(runDir, 'latest');" },
        { filename: at('extension/runFolders.ts'), code: "const p = path.join(dir, EVAL_DIR, `${split}.jsonl`);" },
        // Names the module does not hold, and names that only contain one.
        { filename: at('cli/export.ts'), code: "const a = 'vocab.json'; const b = 'pytorch_model.bin.index.json'; const c = 'my-config.json.bak';" },
        // The module itself, and tests, spell the names.
        { filename: at('core/protocol/folders.ts'), code: "export const CONFIG_FILE = 'config.json';" },
        { filename: at('test/unit/cli.test.ts'), code: "const f = path.join(run, 'config.json'); fs.existsSync(path.join(run, 'checkpoints', 'latest'));" },
      ],
      invalid: [
        bad('trainer/run/runGuards.ts', "const file = path.join(runDir, 'config.json');", /'config\.json' is a folder file name: use CONFIG_FILE or HF_CONFIG_FILE from core\/protocol\/folders\.ts/),
        bad('language-server/tokenizers.ts', "const TOOLS = 'tools.json';", /'tools\.json' .* use TOOLS_FILE/),
        bad('extension/sftData.ts', "write(path.join(runDir, 'data', 'train.traces.jsonl'));", /'data' is a run folder's folder name: use DATA_DIR|'train\.traces\.jsonl' .* use TRAIN_TRACES_FILE/, 2),
        bad('cli/world.ts', 'writeJsonlAtomic(path.join(out, `corpus.jsonl`), rows);', /'corpus\.jsonl' .* use CORPUS_FILE/),
        bad('trainer/sft/sft.ts', "const copies = ['data/prepared.json'];", /'data\/prepared\.json' .* use PREPARED_FILE/),
        bad('core/export.ts', "const files = { 'tokenizer.json': tok };", /'tokenizer\.json' .* use TOKENIZER_FILE/),
        bad('extension/distillCommands.ts', "vscode.Uri.joinPath(uri, 'checkpoints');", /'checkpoints' is a run folder's folder name: use CHECKPOINTS_DIR/),
        bad('trainer/run/checkpoint.ts', "fs.readFileSync(path.resolve(root, 'latest'));", /'latest' .* use LATEST_POINTER/),
        bad('bench/grpo.ts', "read(path.join(run, 'metrics.jsonl'));", /'metrics\.jsonl' .* use METRICS_FILE/),
        bad('extension/runFolders.ts', "names.filter((n) => n.endsWith('.traces.jsonl'));", /'\.traces\.jsonl' .* use TRACES_SUFFIX/),
        // A Hugging Face folder's names live there too.
        bad('language-server/chatTemplateFolder.ts', "read(dir, 'chat_template.jinja');", /'chat_template\.jinja' .* use CHAT_TEMPLATE_FILE/),
        bad('trainer/hf/hfExport.ts', "const files = { 'generation_config.json': g, 'adapter_config.json': a };", /use GENERATION_CONFIG_FILE|use PEFT_CONFIG_FILE/, 2),
      ],
    });
  });

  it('reads the names from core/protocol/folders.ts, so the rule and the module cannot drift', () => {
    const parsed = plugin.folderConstants();
    const exported = Object.entries(folders).filter(([, v]) => typeof v === 'string') as [string, string][];
    // Every string constant the module exports (but the alias HF_WEIGHTS_FILE = WEIGHTS_FILE) is one the rule knows.
    for (const [name, value] of exported) {
      if (name === 'HF_WEIGHTS_FILE') continue;
      assert.ok(parsed.some((c) => c.name === name && c.value === value), `${name} = '${value}' is not read by the rule`);
    }
    assert.equal(parsed.length, exported.length - 1);
    assert.deepEqual(plugin.folderConstants("export const A_FILE = 'a.json';\nexport const B: string = 'b';\nconst C = 'c.json';\n"), [
      { name: 'A_FILE', value: 'a.json' },
      { name: 'B', value: 'b' },
    ]);
    assert.equal(plugin.exempt(at('core/protocol/folders.ts')), true);
    assert.equal(plugin.exempt(at('test/unit/world.test.ts')), true);
    assert.equal(plugin.exempt(at('trainer/sft/prepare.ts')), false);
  });

  it('eslint.config.mjs turns the rule on (as an error) in every folder that ships and in bench/', async () => {
    const eslint = new ESLint({ cwd: root });
    for (const file of ['core/world.ts', 'webview-ui/curves/main.ts', 'cli/main.ts', 'trainer/model/model.ts', 'language-server/server.ts', 'extension/extension.ts', 'bench/lsp.ts']) {
      const config = (await eslint.calculateConfigForFile(at(file))) as { rules: Record<string, unknown> };
      const setting = config.rules['agent-lab/folder-names'];
      assert.ok(Array.isArray(setting) ? setting[0] === 2 : setting === 2 || setting === 'error', `${file}: ${JSON.stringify(setting)}`);
    }
  });
});
