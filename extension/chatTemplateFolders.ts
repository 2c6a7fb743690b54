// The Hugging Face tokenizer folders a workspace holds, for "Agent Lab: Choose Chat
// Template…" (issue 30): a folder counts when it has a chat template (chat_template.jinja, or
// a tokenizer_config.json whose chat_template is a string or a list of named templates). What
// each folder is (template source, tokenizer.json or not, generation blocks or not), the pick
// rows' words, and the value written to agentLab.chatTemplate are decided here. No vscode
// (unit-tested in test/unit/chatTemplateFolders.test.ts); extension/chatTemplatePicker.ts asks.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CHAT_TEMPLATE_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../core/protocol/folders';
import type { SettingKey } from './settingsTable';

export const CHAT_TEMPLATE_SETTING = 'chatTemplate' satisfies SettingKey;
/** The file names findFiles looks for: a folder holding one of them may be a template folder. */
export const TEMPLATE_FOLDER_GLOB = `**/{${TOKENIZER_CONFIG_FILE},${CHAT_TEMPLATE_FILE}}`;
/** tokenizer_config.json files are read whole; larger ones (a vocabulary written in) are refused unread. */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;
const GENERATION_TAG = /{%-?\s*generation\s*-?%}/;

export interface TemplateFolder {
  dir: string;
  /** Where the template comes from (transformers' order: the .jinja file wins). */
  source: typeof CHAT_TEMPLATE_FILE | typeof TOKENIZER_CONFIG_FILE;
  /** The language server needs tokenizer.json to tokenize. */
  hasTokenizer: boolean;
  /** The template has `{% generation %}` blocks (assistant_only_loss has something to train). */
  hasGenerationTags: boolean;
}

function readSmall(file: string): string | undefined {
  try {
    const st = fs.statSync(file);
    if (!st.isFile() || st.size > MAX_CONFIG_BYTES) return undefined;
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** The template texts of tokenizer_config.json's chat_template (a string, or the list's templates); [] when it has none. */
function configTemplates(text: string): string[] {
  let config: unknown;
  try {
    config = JSON.parse(text) as unknown;
  } catch {
    return [];
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return [];
  const t = (config as Record<string, unknown>)['chat_template'];
  if (typeof t === 'string') return t.trim() ? [t] : [];
  if (!Array.isArray(t)) return [];
  return t.flatMap((x) =>
    typeof x === 'object' && x !== null && typeof (x as { template?: unknown }).template === 'string' ? [(x as { template: string }).template] : [],
  );
}

/** What a folder is as a template folder, or undefined when it holds no chat template. */
export function describeTemplateFolder(dir: string): TemplateFolder | undefined {
  const hasTokenizer = fs.existsSync(path.join(dir, TOKENIZER_FILE));
  const jinja = readSmall(path.join(dir, CHAT_TEMPLATE_FILE));
  if (jinja !== undefined && jinja.trim() !== '') return { dir, source: CHAT_TEMPLATE_FILE, hasTokenizer, hasGenerationTags: GENERATION_TAG.test(jinja) };
  const config = readSmall(path.join(dir, TOKENIZER_CONFIG_FILE));
  const templates = config === undefined ? [] : configTemplates(config);
  if (templates.length === 0) return undefined;
  return { dir, source: TOKENIZER_CONFIG_FILE, hasTokenizer, hasGenerationTags: templates.some((t) => GENERATION_TAG.test(t)) };
}

/** The template folders among the folders of `files` (what findFiles found), each once, by path. */
export function templateFoldersOf(files: readonly string[]): TemplateFolder[] {
  const dirs = [...new Set(files.map((f) => path.dirname(f)))].sort((a, b) => a.localeCompare(b));
  return dirs.map(describeTemplateFolder).filter((f): f is TemplateFolder => f !== undefined);
}

/** The value agentLab.chatTemplate gets for a folder: relative to the first workspace folder (as the server reads it), else absolute. */
export function settingValueFor(root: string | undefined, dir: string): string {
  if (root === undefined) return dir;
  const rel = path.relative(root, dir);
  if (rel === '') return '.';
  if (rel.startsWith('..') || path.isAbsolute(rel)) return dir;
  return rel.split(path.sep).join('/');
}

/** The folder a setting value names (relative values start at the first workspace folder), or undefined when unset. */
export function settingFolder(root: string | undefined, value: string | undefined): string | undefined {
  const v = (value ?? '').trim();
  if (v === '') return undefined;
  return path.isAbsolute(v) ? path.normalize(v) : path.resolve(root ?? process.cwd(), v);
}

export interface PickRow {
  label: string;
  description: string;
  detail: string;
  dir: string;
}

/** One quick-pick row per folder: its name, where it is (and whether it is the current one), what the masks will be. */
export function pickRows(folders: readonly TemplateFolder[], root: string | undefined, current: string | undefined): PickRow[] {
  return folders.map((f) => {
    const rel = settingValueFor(root, f.dir);
    const parts = [f.source === CHAT_TEMPLATE_FILE ? CHAT_TEMPLATE_FILE : `${TOKENIZER_CONFIG_FILE}'s chat_template`];
    parts.push(
      f.hasGenerationTags
        ? '{% generation %} blocks: assistant_only_loss trains the assistant turns'
        : 'no {% generation %} blocks: assistant_only_loss would train nothing',
    );
    if (!f.hasTokenizer) parts.push(`no ${TOKENIZER_FILE}: the masks need one beside the template`);
    return {
      label: path.basename(f.dir) || f.dir,
      description: rel + (current !== undefined && path.resolve(current) === path.resolve(f.dir) ? ' · current' : ''),
      detail: parts.join(' · '),
      dir: f.dir,
    };
  });
}

/** Why a folder chosen with Browse… cannot be the template folder, or null when it can. */
export function browseProblem(dir: string): string | null {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) return `${dir} is not a folder`;
  const f = describeTemplateFolder(dir);
  if (!f) return `${dir} holds no chat template: neither ${CHAT_TEMPLATE_FILE} nor a chat_template in ${TOKENIZER_CONFIG_FILE}`;
  if (!f.hasTokenizer) return `${dir} has a chat template but no ${TOKENIZER_FILE}: the language server tokenizes with it`;
  return null;
}
