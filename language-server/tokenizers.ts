// Which tokenizer a document is measured with (docs/architecture.md, "Tokenizers"): the setting
// `agentLab.tokenizerPath` when set; inside a run folder (the nearest folder above the
// file that holds a config.json) that run's tokenizer.json; otherwise the lab's default
// tokenizer, trained deterministically from the default world (about a second, once).
// The call grammar comes with it: a run of a user's world with a tool list
// (`<run>/world/tools.json`, docs/worlds.md "Tools") is checked with that world's grammar.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TokenizerInfo } from '../core/protocol/lsp';
import { DEFAULT_MAX_LEN } from '../core/sftFormat';
import { type BpeTokenizer, type Tokenizer, anyTokenizerFromJsonText, trainDefaultTokenizer } from '../core/tokenizer';
import { TEMPLATES, type Template } from '../core/grammar';
import { parseToolList, templatesFor } from '../core/worldTools';
import { CONFIG_FILE, RUN_WORLD_DIR, TOKENIZER_FILE, TOOLS_FILE } from '../core/protocol/folders';


export interface ResolvedTokenizer {
  tok: Tokenizer;
  info: TokenizerInfo;
  /** Identity for caches: results computed with one key stay valid for it. */
  key: string;
  /** The run's SFT max_len (config.json `sftMaxLen`), else the default 1024. */
  maxLen: number;
  /** A tokenizer that could not be loaded (the default is used instead). */
  problem: string | null;
  /** The run folder, when the document is inside one. */
  runDir: string | null;
  /** The call grammar: the run's world's (its world/tools.json), else the textbook's. */
  grammar: readonly Template[];
}

interface Loaded {
  mtimeMs: number;
  size: number;
  tok: Tokenizer | null;
  error: string | null;
}

const RECHECK_MS = 2000;
/** A tokenizer.json larger than this is not read (a 100k-token vocabulary is ~7 MB). */
export const MAX_TOKENIZER_BYTES = 64 * 1024 * 1024;
/** config.json is read for its max_len only. */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

function kindOf(st: fs.Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * The text of a regular file of at most `cap` bytes. Opened non-blocking and checked on
 * the descriptor: a FIFO, /dev/zero or a link to one would hang the server or grow it
 * without bound; a file that grows past the cap while being read stops there.
 */
export function readRegularFile(file: string, cap: number): string {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new Error(`it is ${kindOf(st)}, not a regular file`);
    if (st.size > cap) throw new Error(`it is ${(st.size / 1048576).toFixed(0)} MB, over the ${(cap / 1048576).toFixed(0)} MB limit`);
    const chunks: Buffer[] = [];
    let total = 0;
    const buf = Buffer.allocUnsafe(Math.min(Math.max(st.size + 1, 65536), 16 * 1048576));
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      total += n;
      if (total > cap) throw new Error(`it is over the ${(cap / 1048576).toFixed(0)} MB limit`);
      chunks.push(Buffer.from(buf.subarray(0, n)));
    }
    return Buffer.concat(chunks, total).toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

export class TokenizerStore {
  private defaultTok: BpeTokenizer | null = null;
  private readonly files = new Map<string, Loaded>();
  private readonly runDirOf = new Map<string, { at: number; runDir: string | null; maxLen: number }>();
  private readonly grammars = new Map<string, { templates: readonly Template[]; key: string }>();

  constructor(private readonly log: (line: string) => void = () => undefined) {}

  /** The default tokenizer (trained on first use, then kept). */
  defaultTokenizer(): BpeTokenizer {
    if (!this.defaultTok) {
      const t0 = Date.now();
      this.defaultTok = trainDefaultTokenizer();
      this.log(`default tokenizer trained in ${Date.now() - t0} ms (${this.defaultTok.vocabSize} tokens)`);
    }
    return this.defaultTok;
  }

  /** The tokenizer for a file (null: an untitled document), honouring the override setting. */
  resolve(fsPath: string | null, settingPath: string | null): ResolvedTokenizer {
    const run = fsPath ? this.runFolder(path.dirname(fsPath)) : { runDir: null, maxLen: DEFAULT_MAX_LEN };
    if (settingPath) {
      const loaded = this.load(settingPath);
      if (loaded.tok) return this.make(loaded.tok, 'setting', settingPath, run.runDir, run.maxLen, null);
      return this.fallback(`agentLab.tokenizerPath ${settingPath}: ${loaded.error}`, run.runDir, run.maxLen);
    }
    if (run.runDir) {
      const file = path.join(run.runDir, TOKENIZER_FILE);
      if (fs.existsSync(file)) {
        const loaded = this.load(file);
        if (loaded.tok) return this.make(loaded.tok, 'run', file, run.runDir, run.maxLen, null);
        return this.fallback(`${file}: ${loaded.error}`, run.runDir, run.maxLen);
      }
    }
    return this.make(this.defaultTokenizer(), 'default', null, run.runDir, run.maxLen, null);
  }

  private fallback(problem: string, runDir: string | null, maxLen: number): ResolvedTokenizer {
    return this.make(this.defaultTokenizer(), 'default', null, runDir, maxLen, `${problem}; using the default tokenizer`);
  }

  private make(
    tok: Tokenizer,
    source: TokenizerInfo['source'],
    file: string | null,
    runDir: string | null,
    maxLen: number,
    problem: string | null,
  ): ResolvedTokenizer {
    const loaded = file ? this.files.get(file) : undefined;
    const key = file ? `${file}@${loaded?.mtimeMs ?? 0}:${loaded?.size ?? 0}` : 'default';
    const grammar = this.grammarOf(runDir);
    return { tok, info: { source, path: file, vocabSize: tok.vocabSize }, key: `${key}#${maxLen}#${grammar.key}`, maxLen, problem, runDir, grammar: grammar.templates };
  }

  /** The run's world grammar (world/tools.json, re-read when it changes); a bad list is logged and the textbook's is used. */
  private grammarOf(runDir: string | null): { templates: readonly Template[]; key: string } {
    const file = runDir ? path.join(runDir, RUN_WORLD_DIR, TOOLS_FILE) : null;
    let st: fs.Stats | null = null;
    try {
      st = file ? fs.statSync(file) : null;
    } catch {
      st = null;
    }
    if (!file || !st) return { templates: TEMPLATES, key: 'grammar:default' };
    const key = `grammar:${file}@${st.mtimeMs}:${st.size}`;
    const hit = this.grammars.get(file);
    if (hit && hit.key === key) return hit;
    let templates: readonly Template[] = TEMPLATES;
    try {
      templates = templatesFor(parseToolList(readRegularFile(file, MAX_CONFIG_BYTES), file));
      this.log(`grammar of ${file}`);
    } catch (e) {
      this.log(`cannot read the tool list ${file}: ${(e as Error).message}; the textbook's grammar is used`);
    }
    const entry = { templates, key };
    this.grammars.set(file, entry);
    return entry;
  }

  private load(file: string): Loaded {
    let st: fs.Stats;
    try {
      st = fs.statSync(file);
    } catch (e) {
      return { mtimeMs: 0, size: 0, tok: null, error: `cannot read it (${(e as NodeJS.ErrnoException).code ?? String(e)})` };
    }
    const hit = this.files.get(file);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit;
    let loaded: Loaded;
    try {
      const tok = anyTokenizerFromJsonText(readRegularFile(file, MAX_TOKENIZER_BYTES));
      loaded = { mtimeMs: st.mtimeMs, size: st.size, tok, error: null };
      this.log(`loaded ${file} (${tok.vocabSize} tokens)`);
    } catch (e) {
      loaded = { mtimeMs: st.mtimeMs, size: st.size, tok: null, error: (e as Error).message };
      this.log(`cannot load ${file}: ${(e as Error).message}`);
    }
    this.files.set(file, loaded);
    return loaded;
  }

  /** The nearest folder at or above `dir` holding a config.json (checked at most every 2 s). */
  private runFolder(dir: string): { runDir: string | null; maxLen: number } {
    const now = Date.now();
    const hit = this.runDirOf.get(dir);
    if (hit && now - hit.at < RECHECK_MS) return hit;
    let runDir: string | null = null;
    for (let d = dir; ; d = path.dirname(d)) {
      if (fs.existsSync(path.join(d, CONFIG_FILE))) {
        runDir = d;
        break;
      }
      if (path.dirname(d) === d) break;
    }
    const maxLen = runDir ? readMaxLen(path.join(runDir, CONFIG_FILE)) : DEFAULT_MAX_LEN;
    const entry = { at: now, runDir, maxLen };
    this.runDirOf.set(dir, entry);
    return entry;
  }
}

function readMaxLen(configFile: string): number {
  try {
    const cfg = JSON.parse(readRegularFile(configFile, MAX_CONFIG_BYTES)) as Record<string, unknown>;
    const sft = cfg['sft'] as Record<string, unknown> | undefined;
    const model = cfg['model'] as Record<string, unknown> | undefined;
    // A trained run drops at its model's context (model.maxSeq); the demo's data report says sftMaxLen.
    for (const v of [model?.['maxSeq'], cfg['sftMaxLen'], cfg['maxLen'], cfg['max_len'], sft?.['maxLen']]) {
      if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
    }
  } catch {
    // unreadable or partial config: the default
  }
  return DEFAULT_MAX_LEN;
}
