// `agent-lab mask --template DIR [--json] [--max-length N] [--template-kwargs JSON] FILE.jsonl`:
// the loss mask of a TRL conversational dataset under a Hugging Face chat template (issue 30),
// both ways (the template's generation blocks, the prefix difference), with findings. Exit 1
// when a row has an error finding (an all-zero generation mask is one): a CI gate for a
// training set. A row that is not a conversation, a template that fails to render or a
// folder that does not load is bad input: one line naming it, exit 2.
import { BadInputError, CliError, ParsedArgs, UsageError } from './args';
import { ChatTemplateError, RowError, RowMask, computeRowMask, parseConversationRow } from '../core/chatTemplate';
import { CHAT_TEMPLATE_FILE } from '../core/protocol/folders';
import { isObj } from '../core/protocol/isObj';
import { patchedFolderFiles, readTemplateFolder } from '../language-server/chatTemplateFolder';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { INPUT_LIMITS, readInputText } from '../store/files';

export interface JsonRow {
  row: number;
  tokens: { id: number; text: string; generation: boolean; prefix: boolean }[];
  findings: { code: string; message: string }[];
}

export function cmdChatMask(a: ParsedArgs): void {
  const file = a.positional!;
  const dir = a.options['template'] as string;
  let templateKwargs: Record<string, unknown> | undefined;
  if (a.options['template-kwargs'] !== undefined) {
    let v: unknown;
    try {
      v = JSON.parse(a.options['template-kwargs'] as string);
    } catch {
      throw new UsageError(`--template-kwargs needs a JSON object, got '${a.options['template-kwargs'] as string}'`);
    }
    if (!isObj(v)) throw new UsageError(`--template-kwargs needs a JSON object, got '${a.options['template-kwargs'] as string}'`);
    templateKwargs = v;
  }
  const maxLength = typeof a.options['max-length'] === 'number' ? a.options['max-length'] : undefined;
  let model;
  try {
    model = readTemplateFolder(dir);
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new BadInputError(err.message);
    throw err;
  }
  const text = readInputText(file, 'the dataset', INPUT_LIMITS.data);
  const rows: JsonRow[] = [];
  const masks: RowMask[] = [];
  const lines = text.split('\n');
  let rowNo = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    rowNo++;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new BadInputError(`${file} line ${i + 1}: not JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    let mask: RowMask;
    try {
      mask = computeRowMask(model, parseConversationRow(value), { ...(maxLength !== undefined ? { maxLength } : {}), ...(templateKwargs ? { templateKwargs } : {}) });
    } catch (err) {
      if (err instanceof RowError) throw new BadInputError(`${file} line ${i + 1}: not a conversation: ${err.message}`);
      if (err instanceof ChatTemplateError) throw new BadInputError(`${file} line ${i + 1}: ${err.message}`);
      throw err;
    }
    masks.push(mask);
    rows.push({
      row: rowNo,
      tokens: mask.tokens.map((t) => ({ id: t.id, text: t.text, generation: t.generation, prefix: t.prefix })),
      findings: mask.findings.map((f) => ({ code: f.code, message: f.message })),
    });
  }
  if (a.options['json']) console.log(JSON.stringify({ rows }));
  else printSummary(rows, masks);
  const failing = masks.map((m, i) => (m.findings.some((f) => f.severity === 'error') ? i + 1 : 0)).filter((n) => n > 0);
  if (failing.length) {
    throw new CliError(`${failing.length} of ${rows.length} rows have an error finding (rows ${failing.slice(0, 10).join(', ')}${failing.length > 10 ? ', ...' : ''})`);
  }
}

function printSummary(rows: JsonRow[], masks: RowMask[]): void {
  let gen = 0;
  let pre = 0;
  let total = 0;
  rows.forEach((r, i) => {
    const g = r.tokens.filter((t) => t.generation).length;
    const p = r.tokens.filter((t) => t.prefix).length;
    gen += g;
    pre += p;
    total += r.tokens.length;
    console.log(`row ${r.row}: ${r.tokens.length} tokens; supervised: ${g} by the generation mask, ${p} by the prefix mask`);
    for (const f of masks[i]!.findings) console.log(`  ${f.severity} ${f.code}: ${f.message}`);
  });
  console.log(`${rows.length} row${rows.length === 1 ? '' : 's'}, ${total} tokens; supervised: ${gen} by the generation mask, ${pre} by the prefix mask`);
}

/**
 * `agent-lab mask --template DIR --patch-out NEWDIR`: the quick fix's patched template folder
 * (chat_template.jinja with generation blocks, copies of the tokenizer files, a README),
 * written to NEWDIR, which must not exist: nothing is written over.
 */
export function cmdPatchTemplate(dir: string, out: string): void {
  if (fs.existsSync(out)) throw new BadInputError(`--patch-out ${out} exists: the patched template goes to a new folder, never over one`);
  try {
    readTemplateFolder(dir);
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new BadInputError(err.message);
    throw err;
  }
  const r = patchedFolderFiles(dir, out);
  if ('refused' in r) throw new CliError(`${dir}: ${r.refused}`);
  try {
    fs.mkdirSync(out); // not recursive: a folder made meanwhile fails here rather than being written into
  } catch (err) {
    throw new BadInputError(`--patch-out ${out} cannot be made: ${err instanceof Error ? err.message : String(err)}`);
  }
  for (const [name, text] of r.files) fs.writeFileSync(path.join(out, name), text, { flag: 'wx' });
  console.log(`wrote ${out}: chat_template.jinja with ${r.blocks} generation block${r.blocks === 1 ? '' : 's'}, ${r.files.map(([n]) => n).filter((n) => n !== CHAT_TEMPLATE_FILE).join(', ')}`);
  for (const n of r.notes) console.log(`note: ${n}`);
}
