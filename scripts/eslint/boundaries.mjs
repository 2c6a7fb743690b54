// The import boundaries of docs/architecture.md ("The folders and what each may import") as one lint rule ("agent-lab/boundaries").
// Each import (static, dynamic, `export ... from`, `require`) is resolved against the
// importing file, so `../../core/protocol/x` and `../core/protocol/x` are the same folder
// whatever the depth. The folder table lives here, not spread over per-folder configs,
// so the rule and the document can be read side by side.
import * as path from 'node:path';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

/** Which of our folders each shipped folder may import (besides itself): docs/architecture.md's table. */
const MAY_IMPORT = {
  core: [],
  // The world and run folders on disk: read and written by the CLI, the trainer, the extension and the language server.
  store: ['core'],
  trainer: ['core', 'store'],
  'language-server': ['core', 'store'],
  // And trainer/ only by EXTENSION_TRAINER_IMPORTS below: the editor reaches the trainer through
  // the job protocol (core/protocol/worker.ts, a worker process or a CLI run).
  extension: ['core', 'store'],
  'webview-ui': ['core'],
  cli: ['core', 'store', 'trainer', 'language-server'],
};

/**
 * The extension's imports of trainer/, each allowed from the file that makes it and no other:
 * the preset table (the base-model quick pick), plain data. Everything that trains, the
 * tokenizer included, runs behind the job protocol (issue 31).
 */
export const EXTENSION_TRAINER_IMPORTS = {
  'extension/baseModel.ts': ['trainer/model/modelConfig'],
};

/** The top-level folder of a repository path ('' for files at the root). */
function topFolder(absPath) {
  const rel = path.relative(repoRoot, absPath);
  if (rel.startsWith('..')) return undefined;
  return rel.split(path.sep)[0];
}

/** Why `fromFile` may not import `spec`, or undefined when it may. */
export function boundaryViolation(fromFile, spec) {
  const from = topFolder(path.resolve(fromFile));
  if (from === undefined) return undefined;
  if (spec === 'vscode' || spec.startsWith('vscode/')) {
    if (['core', 'store', 'trainer', 'language-server', 'webview-ui'].includes(from)) {
      return `${from}/ never imports 'vscode' (it runs outside the extension host)`;
    }
    return undefined;
  }
  if (from === 'core' && spec.startsWith('@tensorflow/')) {
    return `core/ never imports tfjs (the trainer owns the tensors)`;
  }
  if (!spec.startsWith('.')) return undefined; // a package
  const target = path.resolve(path.dirname(path.resolve(fromFile)), spec);
  const to = topFolder(target);
  if (to === undefined) return undefined;
  // test/ and bench/ are the two development folders: neither ships, so what ships may
  // import neither (test/lsp/client.ts in dist/cli.js was the bug), and only the benchmarks
  // borrow the test harnesses (the LSP client, code-server and Playwright).
  if (to === 'test' && from !== 'test' && from !== 'bench') {
    return `only test/ (and the benchmarks in bench/) import test/ code: it would ship in the bundles`;
  }
  if (to === 'bench' && from !== 'bench' && from !== 'test') {
    return `only test/ and bench/ import bench/: the benchmarks do not ship (cli/bench.ts runs them in a child process)`;
  }
  if (from === 'core' && to !== 'core') {
    return `core/ imports nothing of ours outside core/ (found ${to}/)`;
  }
  if (from === 'webview-ui' && to !== 'webview-ui') {
    const rel = path.relative(path.join(repoRoot, 'core', 'protocol'), target);
    if (to !== 'core' || rel.startsWith('..')) {
      return `webview-ui/ imports only core/protocol/ of ours (found ${path.relative(repoRoot, target)})`;
    }
  }
  if (from === 'extension' && to === 'trainer') {
    const importer = path.relative(repoRoot, path.resolve(fromFile)).split(path.sep).join('/');
    const module = path.relative(repoRoot, target).split(path.sep).join('/').replace(/\.(ts|js)$/, '');
    if ((EXTENSION_TRAINER_IMPORTS[importer] ?? []).includes(module)) return undefined;
    return `extension/ reaches trainer/ through the job protocol (core/protocol/worker.ts), not by importing ${module} (allowed: the imports listed in scripts/eslint/boundaries.mjs)`;
  }
  const allowed = MAY_IMPORT[from];
  if (allowed && to !== from && !allowed.includes(to)) {
    return `${from}/ may import ${allowed.map((f) => `${f}/`).join(', ')} of ours, not ${to}/ (docs/architecture.md)`;
  }
  return undefined;
}

const rule = {
  meta: {
    type: 'problem',
    docs: { description: 'the folder import boundaries of docs/architecture.md' },
    schema: [],
    messages: { boundary: '{{why}}' },
  },
  create(context) {
    const file = context.filename;
    const check = (node, source) => {
      if (!source || source.type !== 'Literal' || typeof source.value !== 'string') return;
      const why = boundaryViolation(file, source.value);
      if (why) context.report({ node: source, messageId: 'boundary', data: { why } });
    };
    return {
      ImportDeclaration: (node) => check(node, node.source),
      ExportNamedDeclaration: (node) => check(node, node.source),
      ExportAllDeclaration: (node) => check(node, node.source),
      ImportExpression: (node) => check(node, node.source),
      TSImportEqualsDeclaration: (node) =>
        node.moduleReference.type === 'TSExternalModuleReference' && check(node, node.moduleReference.expression),
      CallExpression: (node) => {
        if (node.callee.type === 'Identifier' && node.callee.name === 'require' && node.arguments.length === 1) {
          check(node, node.arguments[0]);
        }
      },
    };
  },
};

export default { rules: { boundaries: rule } };
