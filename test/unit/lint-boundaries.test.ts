// The folder import boundaries (docs/architecture.md, "What each folder may import") are a
// lint rule, scripts/eslint/boundaries.mjs: deliberately bad imports fail it, the imports
// the code makes today pass it, and eslint.config.mjs turns it on for every TypeScript file.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, Rule, RuleTester } from 'eslint';

const root = path.resolve(__dirname, '..', '..');
const at = (file: string): string => path.join(root, file);

describe('lint: the import boundaries', () => {
  let rule: Rule.RuleModule;
  before(async () => {
    const plugin = (await import(pathToFileURL(at('scripts/eslint/boundaries.mjs')).href)) as { default: { rules: { boundaries: Rule.RuleModule } } };
    rule = plugin.default.rules.boundaries;
  });

  it('rejects webview -> trainer, core -> vscode, cli -> test, extension -> trainer beyond its allow-list and the rest; accepts what the code does', () => {
    const tester = new RuleTester({ languageOptions: { ecmaVersion: 2022, sourceType: 'module' } });
    const bad = (file: string, code: string, message: RegExp): RuleTester.InvalidTestCase => ({ filename: at(file), code, errors: [{ message }] });
    tester.run('agent-lab/boundaries', rule, {
      valid: [
        { filename: at('webview-ui/inspector/main.ts'), code: "import { isHostToInspector } from '../../core/protocol/panels';" },
        { filename: at('webview-ui/inspector/main.ts'), code: "import { filterRows } from './filter'; import { Chart } from 'chart.js';" },
        { filename: at('core/world.ts'), code: "import { mulberry32 } from './mulberry32'; import { x } from './protocol/worker';" },
        { filename: at('extension/extension.ts'), code: "import * as vscode from 'vscode'; import { segment } from '../core/lossMask';" },
        { filename: at('trainer/sft/sft.ts'), code: "import * as tf from '@tensorflow/tfjs-core'; import { y } from '../../core/sftFormat'; import { z } from '../model/model';" },
        { filename: at('test/unit/x.test.ts'), code: "import { LspClient } from '../lsp/client'; import { runBench } from '../../bench/main';" },
        { filename: at('bench/lsp.ts'), code: "import { LspClient } from '../test/lsp/client';" },
        // extension/ -> trainer/: only today's imports, each from the file that makes it.
        { filename: at('extension/baseModel.ts'), code: "import { PRESETS } from '../trainer/model/modelConfig';" },
        { filename: at('extension/training.ts'), code: "import { readWorldFolder } from '../store/worldFolder.ts';" },
        { filename: at('extension/training.ts'), code: "import { parseFromWorker } from '../core/protocol/worker';" },
        // store/: the world and run folders on disk, for every Node-side reader and writer.
        { filename: at('language-server/tokenizers.ts'), code: "import { readWorldFolder } from '../store/worldFolder';" },
        { filename: at('cli/world.ts'), code: "import { writeWorldFiles } from '../store/worldFolder';" },
        { filename: at('store/worldFolder.ts'), code: "import { parseJsonl } from '../core/jsonl'; import { exists } from './files';" },
      ],
      invalid: [
        bad('webview-ui/curves/main.ts', "import { Trainer } from '../../trainer/model/optim';", /webview-ui\/ imports only core\/protocol\/ of ours \(found trainer\/model\/optim\)/),
        bad('webview-ui/curves/main.ts', "import { segment } from '../../core/lossMask';", /imports only core\/protocol\//),
        bad('webview-ui/shared/api.ts', "import * as vscode from 'vscode';", /never imports 'vscode'/),
        bad('core/world.ts', "import * as vscode from 'vscode';", /core\/ never imports 'vscode'/),
        bad('core/world.ts', "import * as tf from '@tensorflow/tfjs-core';", /core\/ never imports tfjs/),
        bad('core/world.ts', "import { IGNORE } from '../trainer/model';", /core\/ imports nothing of ours outside core\/ \(found trainer\/\)/),
        bad('core/protocol/worker.ts', "export { x } from '../../extension/panels/host';", /found extension\//),
        bad('trainer/run/worker.ts', "const vscode = require('vscode');", /trainer\/ never imports 'vscode'/),
        bad('store/files.ts', "import * as vscode from 'vscode';", /store\/ never imports 'vscode'/),
        bad('store/worldFolder.ts', "import { prepareWorldRunData } from '../trainer/sft/prepare';", /store\/ may import core\/ of ours, not trainer\//),
        bad('language-server/server.ts', "void import('vscode');", /language-server\/ never imports 'vscode'/),
        bad('cli/main.ts', "import { LspClient } from '../test/lsp/client';", /only test\/ \(and the benchmarks in bench\/\) import test\//),
        bad('extension/extension.ts', "import { fixtures } from '../test/ui/fixtures';", /import test\//),
        bad('cli/main.ts', "const { runLspBench } = await import('../bench/lsp');", /only test\/ and bench\/ import bench\//),
        bad('trainer/sft/sft.ts', "import { startServer } from '../../language-server/lspServer';", /trainer\/ may import core\/, store\/ of ours, not language-server\//),
        bad('language-server/lspServer.ts', "import { Trainer } from '../trainer/optim';", /language-server\/ may import core\/, store\/ of ours, not trainer\//),
        bad('cli/main.ts', "import { activate } from '../extension/extension';", /cli\/ may import core\/, store\/, trainer\/, language-server\/ of ours, not extension\//),
        bad('extension/training.ts', "import { runSft } from '../trainer/sft/sft';", /extension\/ reaches trainer\/ through the job protocol \(core\/protocol\/worker\.ts\), not by importing trainer\/sft\/sft/),
        bad('extension/panels/curves.ts', "import { checkSftConfig } from '../../trainer/run/runGuards';", /not by importing trainer\/run\/runGuards/),
        bad('extension/sftData.ts', "import { runGrpo } from '../trainer/grpo/grpo';", /not by importing trainer\/grpo\/grpo/),
        // The tokenizer and the held-out references of a traces run are the worker's now (trainer/sft/tracesRun.ts).
        bad('extension/training.ts', "import { prepareSftRunData } from '../trainer/sft/tracesRun';", /not by importing trainer\/sft\/tracesRun/),
        bad('extension/baseModel.ts', "const { prepareWorldRunData } = await import('../trainer/sft/prepare');", /not by importing trainer\/sft\/prepare/),
      ],
    });
  });

  it('eslint.config.mjs turns the rule on (as an error) in every folder', async () => {
    const eslint = new ESLint({ cwd: root });
    for (const file of ['core/world.ts', 'webview-ui/curves/main.ts', 'cli/main.ts', 'trainer/model/model.ts', 'language-server/server.ts', 'extension/extension.ts', 'bench/lsp.ts', 'test/unit/cli.test.ts']) {
      const config = (await eslint.calculateConfigForFile(at(file))) as { rules: Record<string, unknown> };
      const setting = config.rules['agent-lab/boundaries'];
      assert.ok(Array.isArray(setting) ? setting[0] === 2 : setting === 2 || setting === 'error', `${file}: ${JSON.stringify(setting)}`);
      const floating = config.rules['@typescript-eslint/no-floating-promises'];
      assert.ok(Array.isArray(floating) ? floating[0] === 2 : floating === 2, `${file}: no-floating-promises ${JSON.stringify(floating)}`);
    }
  });
});
