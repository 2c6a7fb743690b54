// Reading a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json,
// chat_template.jinja) for the chat-template loss mask (core/chatTemplate, issue 30). Shared
// by the server and `agent-lab mask --template DIR`. Every problem is one ChatTemplateError
// naming the folder and the file.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ChatModel, ChatTemplateError, loadChatModel } from '../core/chatTemplate';
import { MAX_TOKENIZER_BYTES, readRegularFile } from './tokenizers';
import { TOKENIZER_CONFIG_FILE, TOKENIZER_FILE } from '../core/protocol/folders';

const MAX_SMALL_BYTES = 16 * 1024 * 1024;

/** The files of a template folder, for a cache key: each file's mtime and size, '' when absent. */
export function templateFolderStamp(dir: string): string {
  return [TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, 'chat_template.jinja']
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
  const chatTemplateJinja = read('chat_template.jinja', MAX_SMALL_BYTES, false);
  try {
    return loadChatModel({ tokenizerJson, ...(tokenizerConfigJson !== undefined ? { tokenizerConfigJson } : {}), ...(chatTemplateJinja !== undefined ? { chatTemplateJinja } : {}) });
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new ChatTemplateError(`template folder ${dir}: ${err.message}`);
    throw err;
  }
}
