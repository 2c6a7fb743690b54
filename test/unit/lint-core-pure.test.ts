// core/ is pure (docs/architecture.md): the lint rule scripts/eslint/corePure.mjs
// ("agent-lab/core-pure") refuses Node modules and Node's globals there, and nowhere else.
import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ESLint, Rule, RuleTester } from 'eslint';
import { md5Hex } from '../../core/md5';

const root = path.resolve(__dirname, '..', '..');
const at = (file: string): string => path.join(root, file);

describe('lint: core/ is pure', () => {
  let rule: Rule.RuleModule;
  before(async () => {
    const plugin = (await import(pathToFileURL(at('scripts/eslint/corePure.mjs')).href)) as { default: { rules: { 'core-pure': Rule.RuleModule } } };
    rule = plugin.default.rules['core-pure'];
  });

  it('refuses node:*, fs, path, crypto, Buffer and process.env in core/; accepts web globals there and Node elsewhere', () => {
    const tester = new RuleTester({ languageOptions: { ecmaVersion: 2022, sourceType: 'module' } });
    const bad = (file: string, code: string, message: RegExp, count = 1): RuleTester.InvalidTestCase => ({
      filename: at(file),
      code,
      errors: Array.from({ length: count }, () => ({ message })),
    });
    tester.run('agent-lab/core-pure', rule, {
      valid: [
        { filename: at('core/tools/retrieval.ts'), code: "import { md5Hex } from '../md5'; const b = new TextEncoder().encode('x'); setTimeout(() => fetch('u'), 1);" },
        // A name of the file's own is no Node global.
        { filename: at('core/world.ts'), code: 'const process = (x) => x; process(1); function f(Buffer) { return Buffer; }' },
        { filename: at('store/files.ts'), code: "import * as fs from 'node:fs'; const k = process.env.X; Buffer.from('x');" },
        { filename: at('cli/distill.ts'), code: "import * as path from 'path'; const key = process.env['AGENT_LAB_TEACHER_API_KEY'];" },
      ],
      invalid: [
        bad('core/tools/retrieval.ts', "import { createHash } from 'node:crypto';", /core\/ is pure: it imports no Node module \(found 'node:crypto'\)/),
        bad('core/world.ts', "import * as fs from 'fs';", /found 'fs'/),
        bad('core/protocol/folders.ts', "import { join } from 'path';", /found 'path'/),
        bad('core/export.ts', "import { randomUUID } from 'crypto';", /found 'crypto'/),
        bad('core/export.ts', "import { readFile } from 'fs/promises'; export { x } from 'node:os';", /imports no Node module/, 2),
        bad('core/worlds.ts', "const fs = require('node:fs'); void import('child_process');", /imports no Node module/, 2),
        bad('core/teachers/http.ts', 'const text = new TextDecoder().decode(Buffer.concat(chunks));', /core\/ is pure: it uses no Node global \(found Buffer\)/),
        bad('core/teachers/redact.ts', "const key = process.env['AGENT_LAB_TEACHER_API_KEY'];", /found process/),
        bad('core/teachers/redact.ts', "const key = typeof process !== 'undefined' ? process.env.K : undefined;", /found process/, 2),
        bad('core/exportScripts.ts', 'const here = __dirname + global.x;', /uses no Node global/, 2),
      ],
    });
  });

  it('eslint.config.mjs turns the rule on (as an error)', async () => {
    const eslint = new ESLint({ cwd: root });
    for (const file of ['core/world.ts', 'core/teachers/http.ts', 'core/protocol/worker.ts']) {
      const config = (await eslint.calculateConfigForFile(at(file))) as { rules: Record<string, unknown> };
      const setting = config.rules['agent-lab/core-pure'];
      assert.ok(Array.isArray(setting) ? setting[0] === 2 : setting === 2 || setting === 'error', `${file}: ${JSON.stringify(setting)}`);
    }
  });

  it("core/md5.ts (the hashing retriever's MD5 without node:crypto) equals node:crypto's", () => {
    const samples = ['', 'a', 'abc', 'message digest', 'x'.repeat(55), 'x'.repeat(56), 'x'.repeat(64), 'y'.repeat(1000), 'héllo wörld ☃ 𝄞', '\ud800'];
    let seed = 7;
    for (let i = 0; i < 300; i++) {
      let s = '';
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      for (let j = seed % 150; j > 0; j--) s += String.fromCharCode((seed = (seed * 1103515245 + 12345) % 2 ** 31) % 0x3000);
      samples.push(s);
    }
    for (const s of samples) assert.equal(md5Hex(s), createHash('md5').update(s, 'utf8').digest('hex'), JSON.stringify(s.slice(0, 20)));
  });
});
