// File writing that a crash cannot leave half-done: write a temporary sibling, fsync,
// rename over the target. A reader sees the old file or the new one, never a torn one.
//
// And file reading that a hostile path cannot hang or blow up: every input is opened
// non-blocking and checked to be a regular file under a size cap before a byte is read (a
// FIFO, /dev/zero or a link to it would otherwise hang or grow without bound), JSON that
// does not parse or has the wrong shape is an InputError naming the file, and invalid
// UTF-8 is said out loud instead of silently becoming U+FFFD (docs/decisions.md,
// "Hardening (issue 11)").
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseJsonl } from '../core/jsonl';

/**
 * A damaged, unreadable or unwritable input or output (not bad usage): the CLI prints its
 * one-line message and exits 1. The message names the file and the problem.
 */
export class InputError extends Error {
  constructor(message: string) {
    // One line, whatever the message quotes (a parser's excerpt of the file may hold newlines).
    super(message.replace(/\r?\n/g, '\\n'));
    this.name = 'InputError';
  }
}

const inputError = (message: string): InputError => new InputError(message);

const MiB = 1024 * 1024;

/** Size caps per kind of input (bytes). */
export const INPUT_LIMITS = {
  /** config.json, checkpoint.json, a run's small JSON files. */
  json: 16 * MiB,
  /** tokenizer.json (a 100k-token vocabulary is ~7 MB). */
  tokenizer: 64 * MiB,
  /** A `.transcript` (mask FILE). */
  transcript: 64 * MiB,
  /** JSONL data: traces, tasks, world files (V8 strings end at ~512M UTF-16 units). */
  data: 256 * MiB,
  /** safetensors (readFileSync's own limit is 2 GiB). */
  tensors: 2 * 1024 * MiB - 1,
} as const;

export function formatBytes(n: number): string {
  if (n >= MiB) return `${(n / MiB).toFixed(n >= 10 * MiB ? 0 : 1)} MB`;
  if (n >= 1024) return `${(n / 1024).toFixed(0)} KB`;
  return `${n} bytes`;
}

const ERRNO_WORDS: Record<string, string> = {
  ENOENT: 'no such file or folder',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'it is a folder',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  EEXIST: 'it already exists',
  ELOOP: 'too many symbolic links',
  ENAMETOOLONG: 'the name is too long',
  EMFILE: 'too many open files',
  EBUSY: 'busy',
  EINVAL: 'invalid argument',
};

/** "ENOENT (no such file or folder)" for an fs error; the message for anything else. */
export function errnoText(err: unknown): string {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (typeof code === 'string') return ERRNO_WORDS[code] ? `${code} (${ERRNO_WORDS[code]})` : code;
  return err instanceof Error ? err.message : String(err);
}

/** What a non-regular file is, in words. */
export function fileKind(st: fs.Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isSymbolicLink()) return 'a symbolic link';
  return 'a regular file';
}

/**
 * The bytes of a regular file of at most `maxBytes`. Opened non-blocking (a FIFO does not
 * block the open) and checked on the descriptor (no race between the check and the read);
 * read in a bounded loop, so a file that reports size 0 but never ends stops at the cap.
 */
export function readInputBytes(file: string, what: string, maxBytes: number): Buffer {
  if (file === '') throw new InputError(`${what}: the path is empty`);
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw new InputError(`cannot read ${what} ${file}: ${errnoText(err)}`);
  }
  try {
    const st = fs.fstatSync(fd);
    if (st.isDirectory()) throw new InputError(`${what} ${file} is a folder, not a file`);
    if (!st.isFile()) throw new InputError(`${what} ${file} is ${fileKind(st)}, not a regular file: refusing to read it`);
    if (st.size > maxBytes) throw new InputError(`${what} ${file} is ${formatBytes(st.size)}, over the ${formatBytes(maxBytes)} limit for it`);
    const chunks: Buffer[] = [];
    let total = 0;
    const chunk = Buffer.allocUnsafe(Math.min(Math.max(st.size + 1, 64 * 1024), 16 * MiB));
    for (;;) {
      let n: number;
      try {
        n = fs.readSync(fd, chunk, 0, chunk.length, null);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') throw new InputError(`${what} ${file} would block: not a regular file`);
        throw new InputError(`cannot read ${what} ${file}: ${errnoText(err)}`);
      }
      if (n === 0) break;
      total += n;
      if (total > maxBytes) throw new InputError(`${what} ${file} is over the ${formatBytes(maxBytes)} limit for it`);
      chunks.push(Buffer.from(chunk.subarray(0, n)));
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
  } finally {
    fs.closeSync(fd);
  }
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true });
const utf8Lenient = new TextDecoder('utf-8');

/** The offset of the first byte that is not part of valid UTF-8 (-1 when all of it is). */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    const need = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    if (i + need >= bytes.length && need > 0) return i;
    for (let k = 1; k <= need; k++) if ((bytes[i + k]! & 0xc0) !== 0x80) return i;
    if (need === 2) {
      const c = bytes[i + 1]!;
      if ((b === 0xe0 && c < 0xa0) || (b === 0xed && c > 0x9f)) return i;
    } else if (need === 3) {
      const c = bytes[i + 1]!;
      if ((b === 0xf0 && c < 0x90) || (b === 0xf4 && c > 0x8f)) return i;
    }
    i += need + 1;
  }
  return -1;
}

/** Where warnings about inputs go (stderr by default; the worker sends them as logs). */
export type Warn = (message: string) => void;
const stderrWarn: Warn = (message) => console.error(`[agent-lab] warning: ${message}`);

/**
 * A text input (UTF-8). Invalid UTF-8 is decoded with U+FFFD as before, but never
 * silently: `warn` is told where the first bad byte is.
 */
export function readInputText(file: string, what: string, maxBytes: number, warn: Warn = stderrWarn): string {
  const bytes = readInputBytes(file, what, maxBytes);
  try {
    return utf8Strict.decode(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    warn(`${what} ${file} is not valid UTF-8 (the first bad byte is at offset ${at}); invalid bytes read as U+FFFD`);
    return utf8Lenient.decode(bytes);
  }
}

const typeName = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : `a ${typeof v}`);

/** JSON text of `file`, parsed. */
export function readInputJson(file: string, what: string, maxBytes: number = INPUT_LIMITS.json, warn?: Warn): unknown {
  const text = readInputText(file, what, maxBytes, warn);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InputError(`${what} ${file} is not JSON (${(err as Error).message.split('\n')[0]})`);
  }
}

/** A JSON object file (config.json, checkpoint.json): anything else is an InputError. */
export function readInputObject(file: string, what: string, maxBytes: number = INPUT_LIMITS.json, warn?: Warn): Record<string, unknown> {
  const v = readInputJson(file, what, maxBytes, warn);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InputError(`${what} ${file} holds ${typeName(v)}, not a JSON object`);
  return v as Record<string, unknown>;
}

/** JSONL rows of `file` (blank lines skipped); a line that is not JSON names file:line. */
export function readInputJsonl(file: string, what: string, maxBytes: number = INPUT_LIMITS.data, warn?: Warn): unknown[] {
  return parseJsonl(readInputText(file, what, maxBytes, warn), file, inputError).map((r) => r.value);
}

/** Whether `p` exists (without following it into a FIFO read). */
export function exists(p: string): boolean {
  try {
    fs.statSync(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * mkdir -p that cannot hang and says what is wrong: finds the nearest existing ancestor
 * (which must be a folder), then creates each missing level with a plain mkdir (Node's
 * recursive mkdir loops on file systems such as /proc that answer ENOENT to a mkdir).
 */
export function ensureDir(dir: string): void {
  if (dir === '') throw new InputError('the output folder path is empty');
  const abs = path.resolve(dir);
  const missing: string[] = [];
  for (let d = abs; ; ) {
    let st: fs.Stats | null = null;
    try {
      st = fs.statSync(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new InputError(`cannot create the folder ${abs}: ${d}: ${errnoText(err)}`);
    }
    if (st) {
      if (!st.isDirectory()) throw new InputError(`cannot create the folder ${abs}: ${d} is ${fileKind(st)}, not a folder`);
      break;
    }
    missing.push(d);
    const up = path.dirname(d);
    if (up === d) throw new InputError(`cannot create the folder ${abs}: no part of the path exists`);
    d = up;
  }
  for (const m of missing.reverse()) {
    try {
      fs.mkdirSync(m);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST' && fs.statSync(m).isDirectory()) continue;
      throw new InputError(`cannot create the folder ${m}: ${errnoText(err)}`);
    }
  }
}

/**
 * Checks, without creating anything, that `dir` is a folder or can be made one: the
 * nearest existing part of the path must be a folder (not a file, a device, a FIFO).
 */
export function checkDirCreatable(dir: string): void {
  if (dir === '') throw new InputError('the output folder path is empty');
  const abs = path.resolve(dir);
  for (let d = abs; ; d = path.dirname(d)) {
    let st: fs.Stats | null = null;
    try {
      st = fs.statSync(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new InputError(`cannot create the folder ${abs}: ${d}: ${errnoText(err)}`);
    }
    if (st) {
      if (!st.isDirectory()) throw new InputError(`cannot use ${abs} as a folder: ${d} is ${fileKind(st)}, not a folder`);
      return;
    }
    if (path.dirname(d) === d) return;
  }
}

/** The target of a file write must be absent or a regular file (never a folder, a device, a FIFO). */
export function checkWritableTarget(file: string): void {
  if (file === '') throw new InputError('the output file path is empty');
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return; // absent (or behind a path problem ensureDir reports)
  }
  if (st.isDirectory()) throw new InputError(`cannot write ${file}: it is a folder (give a file name)`);
  if (!st.isFile()) throw new InputError(`cannot write ${file}: it is ${fileKind(st)}, not a regular file; refusing to replace it`);
}

export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  checkWritableTarget(file);
  ensureDir(path.dirname(path.resolve(file)));
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.tmp-${process.pid}-${Date.now()}`);
  let fd: number;
  try {
    fd = fs.openSync(tmp, 'w');
  } catch (err) {
    throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
  }
  try {
    fs.writeFileSync(fd, data);
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
  }
  fs.closeSync(fd);
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
  }
}

export function toJsonl(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}

export function writeJsonlAtomic(file: string, rows: readonly unknown[]): void {
  writeFileAtomic(file, toJsonl(rows));
}

export function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, JSON.stringify(value, null, 2) + '\n');
}

/**
 * A JSONL file written as a stream of rows (never one string of the whole file, which for
 * long transcripts outgrows V8's string limit), atomically: a temporary sibling, fsync,
 * rename. `rows` is iterated once.
 */
export function writeJsonlStreamAtomic(file: string, rows: Iterable<unknown>): number {
  checkWritableTarget(file);
  ensureDir(path.dirname(path.resolve(file)));
  const tmp = path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.tmp-${process.pid}-${Date.now()}`);
  let fd: number;
  try {
    fd = fs.openSync(tmp, 'w');
  } catch (err) {
    throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
  }
  let n = 0;
  try {
    let buf: string[] = [];
    let size = 0;
    for (const row of rows) {
      const line = JSON.stringify(row) + '\n';
      buf.push(line);
      size += line.length;
      n++;
      if (size > 1 << 20) {
        fs.writeSync(fd, buf.join(''));
        buf = [];
        size = 0;
      }
    }
    if (buf.length) fs.writeSync(fd, buf.join(''));
    fs.fsyncSync(fd);
  } catch (err) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    // A row the iterator could not make is its error; a failed write is the file's.
    if (typeof (err as NodeJS.ErrnoException).code === 'string') throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
    throw err;
  }
  fs.closeSync(fd);
  try {
    fs.renameSync(tmp, file);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw new InputError(`cannot write ${file}: ${errnoText(err)}`);
  }
  return n;
}

/** Whether a process of this machine is alive (a lock's or a staging folder's owner). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** JSONL rows of a data file with where each came from ("file:line"); damage is an InputError. */
export function readJsonlRows(file: string): { value: unknown; where: string }[] {
  return parseJsonl(readInputText(file, 'the data file', INPUT_LIMITS.data), file, inputError).map(({ value, where }) => ({ value, where }));
}
