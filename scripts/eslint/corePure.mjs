// core/ is pure (docs/architecture.md, "The folders and what each may import"): the rules,
// formats and algorithms every part shares, the webviews included, so nothing in it may need
// Node. This rule ("agent-lab/core-pure") refuses in core/:
// - an import (static, dynamic, `export ... from`, `require`) of a Node module: `node:*`, or a
//   builtin's bare name ('fs', 'path', 'crypto', 'fs/promises', ...);
// - the Node globals `Buffer`, `process` (process.env included), `__dirname`, `__filename`, `global`.
// What core/ needs of Node comes from its caller: a value passed in (the teacher's API key)
// or an injected function. Web-standard globals (TextEncoder, fetch, setTimeout) are allowed.
import { builtinModules } from 'node:module';
import * as path from 'node:path';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

const NODE_GLOBALS = new Set(['Buffer', 'process', '__dirname', '__filename', 'global']);
const BUILTINS = new Set(builtinModules);

/** Whether `file` is in core/ (the rule's only folder). */
export function inCore(file) {
  const rel = path.relative(repoRoot, path.resolve(file));
  return !rel.startsWith('..') && rel.split(path.sep)[0] === 'core';
}

/** Whether an import specifier names a Node module: `node:x`, `fs`, `fs/promises`... */
export function isNodeModule(spec) {
  return spec.startsWith('node:') || BUILTINS.has(spec) || BUILTINS.has(spec.split('/')[0]);
}

const rule = {
  meta: {
    type: 'problem',
    docs: { description: 'core/ is pure: no Node modules, no Buffer, no process' },
    schema: [],
    messages: {
      module: "core/ is pure: it imports no Node module (found '{{spec}}'); pass what it needs in from the Node-side caller (docs/architecture.md)",
      global: 'core/ is pure: it uses no Node global (found {{name}}); pass what it needs in from the Node-side caller (docs/architecture.md)',
    },
  },
  create(context) {
    if (!inCore(context.filename)) return {};
    const check = (source) => {
      if (source && source.type === 'Literal' && typeof source.value === 'string' && isNodeModule(source.value)) {
        context.report({ node: source, messageId: 'module', data: { spec: source.value } });
      }
    };
    return {
      ImportDeclaration: (node) => check(node.source),
      ExportNamedDeclaration: (node) => check(node.source),
      ExportAllDeclaration: (node) => check(node.source),
      ImportExpression: (node) => check(node.source),
      TSImportEqualsDeclaration: (node) => node.moduleReference.type === 'TSExternalModuleReference' && check(node.moduleReference.expression),
      CallExpression: (node) => {
        if (node.callee.type === 'Identifier' && node.callee.name === 'require' && node.arguments.length === 1) check(node.arguments[0]);
      },
      // A global is a reference that resolves to no declaration of the file's own.
      'Program:exit': (program) => {
        const globalScope = context.sourceCode.getScope(program);
        for (const ref of globalScope.through) {
          const name = ref.identifier.name;
          if (NODE_GLOBALS.has(name)) context.report({ node: ref.identifier, messageId: 'global', data: { name } });
        }
      },
    };
  },
};

export default { rules: { 'core-pure': rule } };
