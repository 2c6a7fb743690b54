// `agent-lab export --format trl-sft|trl-grpo`: reads a run folder (or one JSONL file),
// hands the text to core/export.ts and writes what it returns, each file atomically.
// Every input problem is a UsageError (exit 2) naming the file, the line and what is wrong.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BadInputError, UsageError } from './args';
import { DEFAULT_MAX_LEN } from '../core/sftFormat';
import { canonicalTokenizerJson, trainDefaultTokenizer } from '../core/tokenizer';
import { EXPORT_FORMATS, ExportError, ExportFormat, ExportResult, SourceRow, exportGrpo, exportSft, parseJsonl, systemPromptOf } from '../core/export';
import { INPUT_LIMITS, InputError, checkDirCreatable, readInputObject, readInputText, writeFileAtomic, writeJsonlStreamAtomic } from '../store/files';
import { dataFiles } from '../trainer/sft/prepare';
import { parseToolList, systemPromptFor } from '../core/worldTools';
import { WorldFileError } from '../core/worldSource';
import { loadCheckpoint } from '../trainer/run/checkpoint';
import { HfExportResult, writeHfFolder, writePeftFolder } from '../trainer/hf/hfExport';
import { CONFIG_FILE, HELDOUT_FILE, RUN_WORLD_DIR, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, TOOLS_FILE } from '../core/protocol/folders';

export interface ExportOptions {
  format: ExportFormat;
  run?: string | undefined;
  data?: string | undefined;
  /** A world folder (docs/worlds.md): trl-grpo prompts from its split's tasks. */
  world?: string | undefined;
  split?: 'train' | 'heldout' | 'dev' | undefined;
  out: string;
}

export const EXPORT_USAGE =
  'agent-lab export --format trl-sft|trl-grpo (--run DIR [--split train|heldout] | --data FILE | --world DIR [--split train|heldout|dev]) --out OUTDIR\n' +
  '  agent-lab export --format hf --run DIR [--checkpoint latest|step-N] [--peft] --out OUTDIR      (a Hugging Face model folder: config.json, model.safetensors, the tokenizer;\n' +
  '      a LoRA run exports merged into its base, or with --peft as a PEFT adapter folder: adapter_config.json, adapter_model.safetensors;\n' +
  "      a LoRA run that trained added rows adds them as modules_to_save, the tokenizer and a README: resize the base's embeddings first)";

/** The CLI entry: options as parsed by cli/args.ts. */
export function runExportCommand(options: Record<string, string | number | boolean | undefined>, log: (line: string) => void = console.log): ExportResult | HfExportResult {
  const format = options['format'];
  if (format === 'hf') return exportHf(options, log);
  if (options['checkpoint'] !== undefined) throw new UsageError('--checkpoint picks the weights of --format hf', EXPORT_USAGE);
  if (options['peft'] !== undefined) throw new UsageError("--peft writes a LoRA run's adapters: --format hf", EXPORT_USAGE);
  if (!EXPORT_FORMATS.includes(format as ExportFormat)) throw new UsageError(`--format must be one of ${EXPORT_FORMATS.join(', ')}`, EXPORT_USAGE);
  const str = (k: string): string | undefined => (typeof options[k] === 'string' ? (options[k] as string) : undefined);
  const split = str('split');
  return exportToTrl(
    { format: format as ExportFormat, run: str('run'), data: str('data'), world: str('world'), split: split as ExportOptions['split'], out: str('out') ?? '' },
    log,
  );
}

/**
 * The system prompt a world's own tool list makes (its tools.json: a world without calc
 * names search only), or undefined for the textbook's tools.
 */
function worldSystemPrompt(worldDir: string): { text: string; from: string } | undefined {
  const toolsFile = path.join(worldDir, TOOLS_FILE);
  if (!fs.existsSync(toolsFile)) return undefined;
  try {
    const tools = parseToolList(readInputText(toolsFile, 'the tool list', INPUT_LIMITS.json), toolsFile);
    return { text: systemPromptFor(tools), from: `the world's tool list (${toolsFile})` };
  } catch (err) {
    if (err instanceof InputError || err instanceof WorldFileError) throw new UsageError(err.message, EXPORT_USAGE);
    throw err;
  }
}

export function exportToTrl(o: ExportOptions, log: (line: string) => void = () => {}, systemPrompt?: { text: string; from: string }): ExportResult {
  if (o.world !== undefined) {
    // A world's tasks are prompts with gold answers; transcripts come from a run (--run).
    if (o.run !== undefined || o.data !== undefined) throw new UsageError('give one of --run DIR, --data FILE, --world DIR', EXPORT_USAGE);
    if (o.format !== 'trl-grpo') throw new UsageError('--world exports a world\'s tasks: --format trl-grpo (transcripts come from a run: --run DIR)', EXPORT_USAGE);
    return exportToTrl({ ...o, world: undefined, split: undefined, data: path.join(o.world, `${o.split ?? 'train'}.jsonl`) }, log, worldSystemPrompt(o.world));
  }
  if (o.split === 'dev') throw new UsageError("--split dev is a world folder's split: use --world DIR", EXPORT_USAGE);
  if ((o.run === undefined) === (o.data === undefined)) throw new UsageError('give --run DIR or --data FILE (one of them)', EXPORT_USAGE);
  if (o.data !== undefined && o.split !== undefined) throw new UsageError('--split picks a run folder\'s file; with --data the file is the split', EXPORT_USAGE);
  if (o.out === '') throw new UsageError('missing --out OUTDIR', EXPORT_USAGE);
  // The output folder first: a path under a file, a device or a FIFO is refused before any work.
  checkDirCreatable(o.out);
  let result: ExportResult;
  try {
    result = o.run !== undefined ? fromRun(o, o.run) : fromData(o, o.data!, systemPrompt);
  } catch (err) {
    if (err instanceof ExportError) throw new UsageError(err.message, EXPORT_USAGE);
    throw err;
  }
  // Data first, README last: a reader who finds the README finds the rest.
  const names = Object.keys(result.files).sort((a, b) => Number(a === 'README.md') - Number(b === 'README.md'));
  for (const name of names) {
    const f = result.files[name]!;
    if (typeof f === 'string') writeFileAtomic(path.join(o.out, name), f);
    else writeJsonlStreamAtomic(path.join(o.out, name), f.jsonl);
  }
  const from = o.run !== undefined ? `${o.run} (${o.split ?? 'train'} split)` : o.data!;
  log(`wrote ${o.out} (${o.format} from ${from}):`);
  for (const line of result.summary) log(`  ${line}`);
  const script = o.format === 'trl-sft' ? 'train_sft.py' : 'train_grpo.py --model <the SFT model>';
  log(`next, on a GPU machine: accelerate launch --num_processes 8 ${path.join(o.out, script)}   (see ${path.join(o.out, 'README.md')})`);
  return result;
}

function readRows(file: string, what: string): SourceRow[] {
  let text: string;
  try {
    // A regular file under the size cap (a FIFO or /dev/zero would hang the export).
    text = readInputText(file, what, INPUT_LIMITS.data);
  } catch (err) {
    if (err instanceof InputError) throw new ExportError(err.message);
    throw err;
  }
  return parseJsonl(text, file);
}

function fromRun(o: ExportOptions, runDir: string): ExportResult {
  if (!fs.existsSync(runDir) || !fs.statSync(runDir).isDirectory()) throw new ExportError(`no run folder at ${runDir}`);
  const files = dataFiles(runDir);
  if (!fs.existsSync(path.dirname(files.trainTraces))) {
    throw new ExportError(`${runDir} is not a run folder with data: no data/ (agent-lab demo --minutes 0 --run ${runDir} makes one)`);
  }
  if (!fs.existsSync(files.tokenizer)) throw new ExportError(`${runDir} has no tokenizer.json`);
  let tokenizerJson: string;
  try {
    tokenizerJson = readInputText(files.tokenizer, 'the tokenizer', INPUT_LIMITS.tokenizer);
  } catch (err) {
    if (err instanceof InputError) throw new ExportError(err.message);
    throw err;
  }
  const split = o.split ?? 'train';
  const base = { source: { run: runDir, split }, tokenizerJson, tokenizerSource: files.tokenizer };
  if (o.format === 'trl-sft') {
    const traces = split === 'train' ? files.trainTraces : files.heldoutTraces;
    return exportSft({ ...base, traces: readRows(traces, 'the transcripts'), maxLen: runMaxLen(runDir) });
  }
  // The training pool (overlaps with held-out excluded) or the held-out split, with gold.
  const tasks = split === 'train' ? files.trainTasks : path.join(runDir, RUN_WORLD_DIR, HELDOUT_FILE);
  const sft = fs.existsSync(files.trainTraces) ? readRows(files.trainTraces, 'the transcripts') : [];
  return exportGrpo({ ...base, tasks: readRows(tasks, 'the tasks'), systemPrompt: systemPromptOf(sft) });
}

function fromData(o: ExportOptions, file: string, systemPrompt?: { text: string; from: string }): ExportResult {
  // The rows first (bad input fails at once), then the lab's default tokenizer (the one its
  // language server uses outside runs; training it takes a second or more).
  const rows = readRows(file, 'the data file');
  const base = { source: { data: file }, tokenizerJson: canonicalTokenizerJson(trainDefaultTokenizer()), tokenizerSource: 'the default tokenizer' };
  if (o.format === 'trl-sft') return exportSft({ ...base, traces: rows, maxLen: DEFAULT_MAX_LEN });
  return exportGrpo({ ...base, tasks: rows, ...(systemPrompt ? { systemPrompt: systemPrompt.text, systemPromptFrom: systemPrompt.from } : { systemPrompt: null }) });
}

/**
 * The max length the run's SFT drops at: a trained run's model context (config.json
 * `model.maxSeq`: SFT drops what does not fit it), else `sftMaxLen` (the demo's data
 * report), else the lab's default.
 */
export function runMaxLen(runDir: string): number {
  const file = path.join(runDir, CONFIG_FILE);
  if (!fs.existsSync(file)) return DEFAULT_MAX_LEN;
  let config: Record<string, unknown>;
  try {
    config = readInputObject(file, 'the run config');
  } catch (err) {
    if (err instanceof InputError) throw new ExportError(err.message);
    throw err;
  }
  const model = config['model'] as { maxSeq?: unknown } | undefined;
  if (model && typeof model === 'object' && Number.isSafeInteger(model.maxSeq) && (model.maxSeq as number) > 0) return model.maxSeq as number;
  if (Number.isSafeInteger(config['sftMaxLen']) && (config['sftMaxLen'] as number) > 0) return config['sftMaxLen'] as number;
  return DEFAULT_MAX_LEN;
}

/**
 * `export --format hf`: a run's checkpoint as a Hugging Face model folder (trainer/hf/hfExport.ts)
 * with the run's tokenizer beside it. A damaged run or a model with no Hugging Face
 * counterpart is bad input: one line, exit 2, nothing written.
 */
function exportHf(options: Record<string, string | number | boolean | undefined>, log: (line: string) => void): HfExportResult {
  const run = options['run'];
  const out = options['out'];
  for (const k of ['data', 'world', 'split'] as const) if (options[k] !== undefined) throw new UsageError(`--${k} is not for --format hf (it exports a run's weights: --run DIR)`, EXPORT_USAGE);
  if (typeof run !== 'string') throw new UsageError('--format hf needs --run DIR', EXPORT_USAGE);
  if (typeof out !== 'string' || out === '') throw new UsageError('missing --out OUTDIR', EXPORT_USAGE);
  const which = typeof options['checkpoint'] === 'string' ? options['checkpoint'] : 'latest';
  const peft = options['peft'] === true;
  try {
    const ck = loadCheckpoint(run, which);
    const files = dataFiles(run);
    const extra: Record<string, string> = {};
    if (!fs.existsSync(files.tokenizer)) throw new InputError(`${run} has no tokenizer.json: the exported model would have no tokenizer`);
    extra[TOKENIZER_FILE] = readInputText(files.tokenizer, 'the tokenizer', INPUT_LIMITS.tokenizer);
    const tc = path.join(run, TOKENIZER_CONFIG_FILE);
    if (fs.existsSync(tc)) extra[TOKENIZER_CONFIG_FILE] = readInputText(tc, 'the tokenizer config', INPUT_LIMITS.json);
    const meta = { agent_lab_run: path.resolve(run), agent_lab_checkpoint: ck.name };
    if (peft) {
      if (!ck.lora) throw new InputError(`--peft writes a LoRA run's adapters: ${run} ${ck.name} is not a LoRA run (export its full weights without --peft)`);
      const ids = ck.lora.spec.trainedRows ?? [];
      // Trained rows travel as PEFT's modules_to_save (the resized embedding and head), with the run's tokenizer.
      const r = writePeftFolder(out, ck.config, ck.lora.spec, ck.lora.adapters, ck.lora.base.dir, meta, ids.length ? { merged: ck.weights, files: extra } : null);
      log(
        `wrote ${r.dir} (a PEFT LoRA adapter, r=${ck.lora.spec.r} alpha=${ck.lora.spec.alpha}, for ${ck.lora.base.dir}, from ${run} ${ck.name}, ${(r.bytes / 1e6).toFixed(2)} MB): ${r.files.join(', ')}` +
          (ids.length
            ? `; the ${ids.length} added rows ${ids[0]}..${ids[ids.length - 1]} are in modules_to_save (embed_tokens, lm_head): resize the base's embeddings to ${ck.config.vocab} rows (model.resize_token_embeddings(${ck.config.vocab})) before PeftModel.from_pretrained (README.md)`
            : ''),
      );
      return r;
    }
    // A LoRA run's checkpoint loads merged (W + (alpha/r) BA): the folder is a plain model.
    const r = writeHfFolder(out, ck.config, ck.weights, extra, meta);
    log(`wrote ${r.dir} (${r.architecture} from ${run} ${ck.name}${ck.lora ? ', LoRA merged into its base' : ''}, ${(r.bytes / 1e6).toFixed(1)} MB): ${r.files.join(', ')}`);
    return r;
  } catch (err) {
    if (err instanceof InputError) throw new BadInputError(err.message);
    throw err;
  }
}
