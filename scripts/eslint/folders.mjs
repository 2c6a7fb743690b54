// The world and run folders' names have one home, core/protocol/folders.ts (docs/architecture.md,
// "The world and run folders"); this rule ("agent-lab/folder-names") keeps it so. The names are
// read from that module's `export const NAME = '...'` lines, so the rule and the module cannot
// drift. Outside the module, in code that ships or benchmarks (tests keep literals: they check
// the on-disk contract):
// - a file name of the module ('config.json', 'corpus.jsonl', ...) as a string literal, alone or
//   at the end of a path ('data/train.traces.jsonl'), is an error;
// - a folder name of the module ('checkpoints', 'data', 'eval', 'world', 'latest') is an error
//   as an argument of a path join (path.join, path.resolve, Uri.joinPath): elsewhere those are
//   ordinary words (a job kind, a JSON key).
import * as fs from 'node:fs';
import * as path from 'node:path';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const FOLDERS_MODULE = path.join('core', 'protocol', 'folders.ts');

/** The string constants of the folders module: { name: 'CONFIG_FILE', value: 'config.json' }. */
export function folderConstants(source = fs.readFileSync(path.join(repoRoot, FOLDERS_MODULE), 'utf8')) {
  const out = [];
  for (const m of source.matchAll(/^export const (\w+)(?:\s*:\s*[^=]+)?\s*=\s*'([^']+)';/gm)) out.push({ name: m[1], value: m[2] });
  return out;
}

let cached;
function names() {
  if (!cached) {
    const consts = folderConstants();
    const byValue = new Map();
    for (const c of consts) byValue.set(c.value, byValue.has(c.value) ? `${byValue.get(c.value)} or ${c.name}` : c.name);
    // A file name has an extension (or is a suffix like '.traces.jsonl', or the world format);
    // a folder name is a bare word.
    const isFolder = (v) => /^[a-z]+$/.test(v);
    cached = {
      files: new Map([...byValue].filter(([v]) => !isFolder(v))),
      folders: new Map([...byValue].filter(([v]) => isFolder(v))),
    };
  }
  return cached;
}

/** Whether the rule skips `file`: the folders module itself and the tests. */
export function exempt(file) {
  const rel = path.relative(repoRoot, path.resolve(file));
  if (rel.startsWith('..')) return true;
  if (rel === FOLDERS_MODULE) return true;
  return rel.split(path.sep)[0] === 'test' || /\.test\.ts$/.test(rel);
}

const JOIN_CALLS = new Set(['join', 'resolve', 'joinPath']);

/** Whether `node` is an argument of a path join: path.join(...), path.resolve(...), vscode.Uri.joinPath(...). */
function inPathJoin(node) {
  const call = node.parent;
  if (!call || call.type !== 'CallExpression' || !call.arguments.includes(node)) return false;
  const callee = call.callee;
  return callee.type === 'MemberExpression' && !callee.computed && callee.property.type === 'Identifier' && JOIN_CALLS.has(callee.property.name);
}

const rule = {
  meta: {
    type: 'problem',
    docs: { description: "the world and run folders' names come from core/protocol/folders.ts" },
    schema: [],
    messages: {
      file: "'{{text}}' is a folder file name: use {{constant}} from core/protocol/folders.ts (the names' one home)",
      folder: "'{{text}}' is a run folder's folder name: use {{constant}} from core/protocol/folders.ts (the names' one home)",
    },
  },
  create(context) {
    if (exempt(context.filename)) return {};
    const { files, folders } = names();
    const check = (node, text) => {
      const base = text.includes('/') && !files.has(text) ? text.slice(text.lastIndexOf('/') + 1) : text;
      const constant = files.get(text) ?? files.get(base);
      if (constant !== undefined) {
        context.report({ node, messageId: 'file', data: { text, constant } });
        return;
      }
      const folder = folders.get(text);
      if (folder !== undefined && inPathJoin(node)) context.report({ node, messageId: 'folder', data: { text, constant: folder } });
    };
    return {
      Literal: (node) => {
        if (typeof node.value === 'string') check(node, node.value);
      },
      TemplateLiteral: (node) => {
        if (node.expressions.length === 0 && node.quasis.length === 1) check(node, node.quasis[0].value.cooked ?? '');
      },
    };
  },
};

export default { rules: { 'folder-names': rule } };
