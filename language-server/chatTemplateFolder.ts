// Reading a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json,
// chat_template.jinja) for the chat-template loss mask (core/chatTemplate, issue 30). Shared
// by the server and `agent-lab mask --template DIR`. Every problem is one ChatTemplateError
// naming the folder and the file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ChatModel, ChatTemplateError, loadChatModel, patchGenerationTags } from '../core/chatTemplate';
import { MAX_TOKENIZER_BYTES, readRegularFile } from './tokenizers';
import { CHAT_TEMPLATE_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../core/protocol/folders';

const MAX_SMALL_BYTES = 16 * 1024 * 1024;

/** The files of a template folder, for a cache key: each file's mtime and size, '' when absent. */
export function templateFolderStamp(dir: string): string {
  return [TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, CHAT_TEMPLATE_FILE]
    .map((f) => {
      try {
        const st = fs.statSync(path.join(dir, f));
        return `${st.mtimeMs}:${st.size}`;
      } catch {
        return '';
      }
    })
    .join('|');
}

export function readTemplateFolder(dir: string): ChatModel {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new ChatTemplateError(`template folder ${dir} does not exist`);
  }
  if (!st.isDirectory()) throw new ChatTemplateError(`template folder ${dir} is not a folder (a Hugging Face tokenizer folder holds tokenizer.json and tokenizer_config.json)`);
  const read = (name: string, cap: number, required: boolean): string | undefined => {
    const file = path.join(dir, name);
    if (!fs.existsSync(file)) {
      if (required) throw new ChatTemplateError(`template folder ${dir} has no ${name}`);
      return undefined;
    }
    try {
      return readRegularFile(file, cap);
    } catch (err) {
      throw new ChatTemplateError(`${file} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
    }
  };
  const tokenizerJson = read(TOKENIZER_FILE, MAX_TOKENIZER_BYTES, true)!;
  const tokenizerConfigJson = read(TOKENIZER_CONFIG_FILE, MAX_SMALL_BYTES, false);
  const chatTemplateJinja = read(CHAT_TEMPLATE_FILE, MAX_SMALL_BYTES, false);
  try {
    return loadChatModel({ tokenizerJson, ...(tokenizerConfigJson !== undefined ? { tokenizerConfigJson } : {}), ...(chatTemplateJinja !== undefined ? { chatTemplateJinja } : {}) });
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new ChatTemplateError(`template folder ${dir}: ${err.message}`);
    throw err;
  }
}

// ---- the quick fix "write a patched template with generation tags" --------------------------

/** The edit that writes a patched template folder, or why there is none (a disabled action's reason). */
export interface PatchedFolderFix {
  title: string;
  /** The new folder (absent when refused). */
  folder?: string;
  /** LSP documentChanges: CreateFile (never overwriting) then the text of each new file. */
  documentChanges?: ({ kind: 'create'; uri: string; options: { overwrite: false; ignoreIfExists: false } } | { textDocument: { uri: string; version: null }; edits: { range: { start: { line: 0; character: 0 }; end: { line: 0; character: 0 } }; newText: string }[] })[];
  refused?: string;
}

/** A name beside `dir` that nothing holds yet: `<name>-generation`, then `-generation-2` ... `-generation-99`. */
export function freePatchedFolder(dir: string, exists: (p: string) => boolean = fs.existsSync): string | null {
  const base = path.join(path.dirname(dir), `${path.basename(dir)}-generation`);
  for (let n = 1; n < 100; n++) {
    const p = n === 1 ? base : `${base}-${n}`;
    if (!exists(p)) return p;
  }
  return null;
}

/**
 * The quick fix of an all-zero generation mask: `chat_template.jinja` with `{% generation %}`
 * blocks (patchGenerationTags) in a NEW folder beside the template folder, with copies of its
 * tokenizer.json and tokenizer_config.json as they are and a README saying what was patched
 * from which file. It writes over nothing (a free name, and CreateFile with overwrite off) and
 * leaves the chatTemplate setting alone: the picker selects the new folder.
 */
export function patchedFolderFix(dir: string, toUri: (p: string) => string, exists: (p: string) => boolean = fs.existsSync, loaded?: ChatModel): PatchedFolderFix {
  const title = 'Write a patched template with generation tags';
  const folder = freePatchedFolder(dir, exists);
  if (folder === null) return { title: `${title}…`, refused: `${path.basename(dir)}-generation and -generation-2 ... -99 beside ${dir} all exist` };
  const files = patchedFolderFiles(dir, folder, exists, loaded);
  if ('refused' in files) return { title: `${title}…`, refused: files.refused };
  const documentChanges: NonNullable<PatchedFolderFix['documentChanges']> = [];
  for (const [name, text] of files.files) {
    const uri = toUri(path.join(folder, name));
    documentChanges.push({ kind: 'create', uri, options: { overwrite: false, ignoreIfExists: false } });
    documentChanges.push({ textDocument: { uri, version: null }, edits: [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: text }] });
  }
  return { title: `${title} to ${path.basename(folder)}/ (select it with Agent Lab: Choose Chat Template…)`, folder, documentChanges };
}

/** The files of the patched folder `folder` made from the template folder `dir` (name, text), or why there are none. Shared with `agent-lab mask --patch-out`. */
export function patchedFolderFiles(dir: string, folder: string, exists: (p: string) => boolean = fs.existsSync, loaded?: ChatModel): { files: [string, string][]; blocks: number; notes: string[] } | { refused: string } {
  const refuse = (why: string): { refused: string } => ({ refused: why });
  const read = (name: string, cap: number): string | undefined => {
    const file = path.join(dir, name);
    if (!exists(file)) return undefined;
    return readRegularFile(file, cap);
  };
  let tokenizerJson: string | undefined;
  let configText: string | undefined;
  let jinja: string | undefined;
  try {
    tokenizerJson = read(TOKENIZER_FILE, MAX_TOKENIZER_BYTES);
    configText = read(TOKENIZER_CONFIG_FILE, MAX_SMALL_BYTES);
    jinja = read(CHAT_TEMPLATE_FILE, MAX_SMALL_BYTES);
  } catch (err) {
    return refuse(`the template folder ${dir} cannot be read: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (tokenizerJson === undefined) return refuse(`the template folder ${dir} has no ${TOKENIZER_FILE}`);
  let source = jinja;
  let from: string = CHAT_TEMPLATE_FILE;
  let tokenVars: Record<string, string> = {};
  try {
    // The server has the folder loaded already: parsing a real tokenizer.json again takes a second.
    const model = loaded ?? loadChatModel({ tokenizerJson, ...(configText !== undefined ? { tokenizerConfigJson: configText } : {}), ...(jinja !== undefined ? { chatTemplateJinja: jinja } : {}) });
    tokenVars = model.tokenVars;
    if (source === undefined) {
      const ct = configText !== undefined ? (JSON.parse(configText) as { chat_template?: unknown }).chat_template : undefined;
      // A list of named templates (default, tool_use): one chat_template.jinja would replace them all.
      if (typeof ct !== 'string') return refuse(`${TOKENIZER_CONFIG_FILE}'s chat_template is a list of named templates: a single chat_template.jinja would replace every one of them`);
      source = ct;
      from = `${TOKENIZER_CONFIG_FILE} (chat_template)`;
    }
  } catch (err) {
    return refuse(`the template folder ${dir} does not load: ${err instanceof Error ? err.message : String(err)}`);
  }
  const r = patchGenerationTags(source, { vars: tokenVars });
  if (!r.ok) return refuse(`the template cannot be patched safely: ${r.reason}`);
  const readme = [
    `# ${path.basename(folder)}`,
    '',
    `chat_template.jinja is the chat template of ${path.join(dir, from === CHAT_TEMPLATE_FILE ? from : TOKENIZER_CONFIG_FILE)}${from === CHAT_TEMPLATE_FILE ? '' : ' (its chat_template)'} with ${r.blocks} {% generation %} block${r.blocks === 1 ? '' : 's'} added by Agent Lab around each assistant turn's content and end-of-turn token, so that return_assistant_tokens_mask / TRL's assistant_only_loss supervise them. It renders the same text as the original on the conversations it was checked on.`,
    ...r.notes.map((n) => `Where its generation mask differs from the prefix-difference mask: ${n}.`),
    `${TOKENIZER_FILE}${configText !== undefined ? ` and ${TOKENIZER_CONFIG_FILE} are copies` : ' is a copy'} of the original folder's, unchanged (chat_template.jinja takes precedence over a chat_template in ${TOKENIZER_CONFIG_FILE}, as in transformers).`,
    '',
  ].join('\n');
  const files: [string, string][] = [
    [CHAT_TEMPLATE_FILE, r.template],
    [TOKENIZER_FILE, tokenizerJson],
    ...(configText !== undefined ? ([[TOKENIZER_CONFIG_FILE, configText]] as [string, string][]) : []),
    ['README.md', readme],
  ];
  return { files, blocks: r.blocks, notes: r.notes };
}
