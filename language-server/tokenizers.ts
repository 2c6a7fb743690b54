// Which tokenizer a document is measured with (DESIGN.md, "Tokenizers"): the setting
// `agentLab.tokenizerPath` when set; inside a run folder (the nearest folder above the
// file that holds a config.json) that run's tokenizer.json; otherwise the lab's default
// tokenizer, trained deterministically from the default world (about a second, once).
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TokenizerInfo } from '../core/protocol/lsp';
import { DEFAULT_MAX_LEN } from '../core/sftFormat';
import { BpeTokenizer, tokenizerFromJsonText, trainDefaultTokenizer } from '../core/tokenizer';

export interface ResolvedTokenizer {
  tok: BpeTokenizer;
  info: TokenizerInfo;
  /** Identity for caches: results computed with one key stay valid for it. */
  key: string;
  /** The run's SFT max_len (config.json `sftMaxLen`), else the default 1024. */
  maxLen: number;
  /** A tokenizer that could not be loaded (the default is used instead). */
  problem: string | null;
  /** The run folder, when the document is inside one. */
  runDir: string | null;
}

interface Loaded {
  mtimeMs: number;
  size: number;
  tok: BpeTokenizer | null;
  error: string | null;
}

const RECHECK_MS = 2000;

export class TokenizerStore {
  private defaultTok: BpeTokenizer | null = null;
  private readonly files = new Map<string, Loaded>();
  private readonly runDirOf = new Map<string, { at: number; runDir: string | null; maxLen: number }>();

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
      const file = path.join(run.runDir, 'tokenizer.json');
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
    tok: BpeTokenizer,
    source: TokenizerInfo['source'],
    file: string | null,
    runDir: string | null,
    maxLen: number,
    problem: string | null,
  ): ResolvedTokenizer {
    const loaded = file ? this.files.get(file) : undefined;
    const key = file ? `${file}@${loaded?.mtimeMs ?? 0}:${loaded?.size ?? 0}` : 'default';
    return { tok, info: { source, path: file, vocabSize: tok.vocabSize }, key: `${key}#${maxLen}`, maxLen, problem, runDir };
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
      const tok = tokenizerFromJsonText(fs.readFileSync(file, 'utf8'));
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
      if (fs.existsSync(path.join(d, 'config.json'))) {
        runDir = d;
        break;
      }
      if (path.dirname(d) === d) break;
    }
    const maxLen = runDir ? readMaxLen(path.join(runDir, 'config.json')) : DEFAULT_MAX_LEN;
    const entry = { at: now, runDir, maxLen };
    this.runDirOf.set(dir, entry);
    return entry;
  }
}

function readMaxLen(configFile: string): number {
  try {
    const cfg = JSON.parse(fs.readFileSync(configFile, 'utf8')) as Record<string, unknown>;
    const sft = cfg['sft'] as Record<string, unknown> | undefined;
    for (const v of [cfg['sftMaxLen'], cfg['maxLen'], cfg['max_len'], sft?.['maxLen']]) {
      if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
    }
  } catch {
    // unreadable or partial config: the default
  }
  return DEFAULT_MAX_LEN;
}
