// safetensors files of any size, read tensor by tensor: a Hugging Face model folder's
// `model.safetensors`, or the shards a `model.safetensors.index.json` names. F32, F16 and
// BF16 tensors come back as Float32Array (the backends compute in float32).
//
// The format (https://github.com/huggingface/safetensors): 8 bytes little-endian u64 N, N
// bytes of a JSON header {"__metadata__": {...}, name: {"dtype", "shape", "data_offsets":
// [begin, end]}}, then the data area; offsets are relative to it, the tensors tile it
// exactly (no gaps, no overlap, nothing after). Own code, not a library: the format is that
// small, the npm readers load the whole file into one buffer (a 1B model in F32 is over the
// 2 GiB a Buffer may hold), and every header field has to be checked with a message naming
// the file and the field anyway. Each tensor is read with positioned reads (fs.readSync at
// its offset) in bounded chunks, straight into its Float32Array (F32) or through one small
// scratch buffer (F16/BF16), so no file is ever held whole in memory.
// trainer/run/checkpoint.ts keeps its own in-memory encoder/decoder for the lab's checkpoints
// (F32/I32, small); this file is for foreign folders and the HF export.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { InputError, errnoText, fileKind, formatBytes, readInputObject } from '../../store/files';
import { HF_WEIGHTS_FILE, HF_WEIGHTS_INDEX_FILE } from '../../core/protocol/folders';

export type StDtype = 'F32' | 'F16' | 'BF16';
const DTYPE_BYTES: Record<StDtype, number> = { F32: 4, F16: 2, BF16: 2 };
/** Dtypes the safetensors format knows but this reader does not convert (named in the refusal). */
const KNOWN_OTHER = new Set(['F64', 'F8_E4M3', 'F8_E5M2', 'I64', 'I32', 'I16', 'I8', 'U64', 'U32', 'U16', 'U8', 'BOOL']);
/** safetensors' own cap on the header (100 MB). */
const MAX_HEADER = 100 * 1024 * 1024;
/** Bytes per positioned read or write (tests shrink it to exercise the chunking). */
let CHUNK = 16 * 1024 * 1024;
/** Tests: the chunk size in bytes (a positive multiple of 4); null restores 16 MiB. */
export function setChunkBytesForTests(n: number | null): void {
  CHUNK = n ?? 16 * 1024 * 1024;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export interface TensorEntry {
  name: string;
  dtype: StDtype;
  shape: number[];
  /** The file holding it. */
  file: string;
  /** Absolute byte offset of its data in the file. */
  start: number;
  byteLength: number;
}

// ---- dtype conversions ----------------------------------------------------------------

let halfTable: Float32Array | null = null;
/** float16 bits -> float32, all 65536 values (256 KB, built once). */
function f16Table(): Float32Array {
  if (halfTable) return halfTable;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const f = h & 0x3ff;
    t[h] = e === 0 ? s * f * 2 ** -24 : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * 2 ** (e - 15);
  }
  return (halfTable = t);
}

export function f16ToF32(bits: Uint16Array, out: Float32Array, at = 0): void {
  const t = f16Table();
  for (let i = 0; i < bits.length; i++) out[at + i] = t[bits[i]!]!;
}

export function bf16ToF32(bits: Uint16Array, out: Float32Array, at = 0): void {
  const u = new Uint32Array(out.buffer, out.byteOffset + at * 4, bits.length);
  for (let i = 0; i < bits.length; i++) u[i] = bits[i]! << 16;
}

const cvF = new Float32Array(1);
const cvU = new Uint32Array(cvF.buffer);

/** float32 -> float16 bits, round to nearest even (overflow: infinity; NaN stays NaN). */
export function f32ToF16Bits(x: number): number {
  cvF[0] = x;
  const b = cvU[0]!;
  const sign = (b >>> 16) & 0x8000;
  const e32 = (b >>> 23) & 0xff;
  let m = b & 0x7fffff;
  if (e32 === 255) return sign | 0x7c00 | (m ? 0x200 : 0);
  const e = e32 - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && h & 1)) h++;
    return sign | h;
  }
  let h = sign | (e << 10) | (m >>> 13);
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++; // a carry into the exponent is right (up to infinity)
  return h;
}

/** float32 -> bfloat16 bits, round to nearest even (NaN stays NaN). */
export function f32ToBf16Bits(x: number): number {
  cvF[0] = x;
  const b = cvU[0]!;
  if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) return (b >>> 16) | 0x40;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

// ---- reading --------------------------------------------------------------------------

function openRegular(file: string, what: string): { fd: number; size: number } {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw new InputError(`cannot read ${what} ${file}: ${errnoText(err)}`);
  }
  const st = fs.fstatSync(fd);
  if (!st.isFile()) {
    fs.closeSync(fd);
    throw new InputError(`${what} ${file} is ${fileKind(st)}, not a regular file: refusing to read it`);
  }
  return { fd, size: st.size };
}

/** Exactly `len` bytes at `pos` into `buf` (from `off`), or an InputError naming the file. */
function readFully(fd: number, file: string, buf: Uint8Array, off: number, len: number, pos: number): void {
  while (len > 0) {
    let n: number;
    try {
      n = fs.readSync(fd, buf, off, len, pos);
    } catch (err) {
      throw new InputError(`cannot read ${file}: ${errnoText(err)}`);
    }
    if (n === 0) throw new InputError(`${file}: truncated (the file ended at byte ${pos} while reading)`);
    off += n;
    len -= n;
    pos += n;
  }
}

/** One open safetensors file: its header checked, its tensors read on demand. */
export class SafetensorsFile {
  readonly entries = new Map<string, TensorEntry>();
  readonly metadata: Record<string, string> = {};
  private fd: number | null;

  private constructor(
    readonly file: string,
    fd: number,
  ) {
    this.fd = fd;
  }

  /** Open and check `file`: an InputError (one line: the file and the field) when anything is wrong. */
  static open(file: string): SafetensorsFile {
    const { fd, size } = openRegular(file, 'the safetensors file');
    const f = new SafetensorsFile(file, fd);
    try {
      f.parseHeader(size);
    } catch (err) {
      f.close();
      throw err;
    }
    return f;
  }

  private parseHeader(size: number): void {
    const file = this.file;
    const fail = (what: string): never => {
      throw new InputError(`${file}: ${what}`);
    };
    if (size < 8) fail(`not a safetensors file (${size} bytes, shorter than the 8-byte header length)`);
    const lenBytes = new Uint8Array(8);
    readFully(this.fd!, file, lenBytes, 0, 8, 0);
    const n = new DataView(lenBytes.buffer).getBigUint64(0, true);
    if (n < 2n || n > BigInt(MAX_HEADER)) fail(`header length ${n} is not in 2..${MAX_HEADER} bytes: not a safetensors file`);
    const hn = Number(n);
    if (8 + hn > size) fail(`truncated: the header says it is ${hn} bytes, the file has ${size - 8} after the length`);
    const hb = new Uint8Array(hn);
    readFully(this.fd!, file, hb, 0, hn, 8);
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(hb));
    } catch (err) {
      fail(`the header is not JSON (${(err as Error).message.split('\n')[0]})`);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header)) fail('the header is not a JSON object');
    const dataStart = 8 + hn;
    const dataLen = size - dataStart;
    const isCount = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
    const spans: { name: string; b: number; e: number }[] = [];
    for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) fail('__metadata__ is not an object');
        for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
          if (typeof v !== 'string') fail(`__metadata__.${k} is not a string`);
          this.metadata[k] = v as string;
        }
        continue;
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) fail(`tensor ${name}: the entry is not an object`);
      const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof v.dtype !== 'string') fail(`tensor ${name}: "dtype" is missing`);
      const dtype = v.dtype as string;
      if (!(dtype in DTYPE_BYTES)) {
        fail(`tensor ${name}: dtype ${JSON.stringify(dtype)} is ${KNOWN_OTHER.has(dtype) ? 'not supported' : 'unknown'} (supported: F32, F16, BF16)`);
      }
      if (!Array.isArray(v.shape) || !v.shape.every(isCount)) fail(`tensor ${name}: "shape" ${JSON.stringify(v.shape)} is not a list of sizes`);
      if (!Array.isArray(v.data_offsets) || v.data_offsets.length !== 2 || !v.data_offsets.every(isCount)) {
        fail(`tensor ${name}: "data_offsets" ${JSON.stringify(v.data_offsets)} is not [begin, end]`);
      }
      const shape = v.shape as number[];
      const [b, e] = v.data_offsets as [number, number];
      const count = shape.reduce((a, c) => a * c, 1);
      const want = count * DTYPE_BYTES[dtype as StDtype];
      if (!Number.isSafeInteger(want) || e < b || e - b !== want) {
        fail(`tensor ${name}: "data_offsets" [${b}, ${e}] hold ${e - b} bytes, its shape [${shape}] of ${dtype} needs ${want}`);
      }
      if (e > dataLen) {
        fail(`truncated: tensor ${name} ends at byte ${e} of the data, the file has ${dataLen} (${formatBytes(dataLen)}) after the header`);
      }
      spans.push({ name, b, e });
      this.entries.set(name, { name, dtype: dtype as StDtype, shape, file, start: dataStart + b, byteLength: e - b });
    }
    // The tensors tile the data area exactly, as the safetensors library requires.
    spans.sort((x, y) => x.b - y.b || x.e - y.e);
    let at = 0;
    for (const s of spans) {
      if (s.b !== at) fail(`tensor ${s.name}: "data_offsets" begin at ${s.b}, expected ${at} (the tensors must tile the data without gaps or overlap)`);
      at = s.e;
    }
    if (at !== dataLen) fail(`the header's tensors end at byte ${at} of the data, the file has ${dataLen} (${dataLen > at ? 'trailing bytes' : 'truncated'})`);
  }

  /** The tensor `name` as float32 (F16/BF16 converted). */
  read(name: string): Float32Array {
    const e = this.entries.get(name);
    if (!e) throw new InputError(`${this.file}: no tensor ${name}`);
    return this.readEntry(e);
  }

  readEntry(e: TensorEntry): Float32Array {
    if (this.fd === null) throw new Error(`${this.file}: read after close`);
    if (!LITTLE_ENDIAN) throw new InputError('safetensors: this reader needs a little-endian machine');
    const count = e.byteLength / DTYPE_BYTES[e.dtype];
    const out = new Float32Array(count);
    if (e.dtype === 'F32') {
      const bytes = new Uint8Array(out.buffer);
      for (let off = 0; off < e.byteLength; off += CHUNK) readFully(this.fd, this.file, bytes, off, Math.min(CHUNK, e.byteLength - off), e.start + off);
      return out;
    }
    const scratch = new Uint8Array(Math.min(CHUNK, e.byteLength));
    for (let off = 0; off < e.byteLength; off += CHUNK) {
      const len = Math.min(CHUNK, e.byteLength - off);
      readFully(this.fd, this.file, scratch, 0, len, e.start + off);
      const bits = new Uint16Array(scratch.buffer, 0, len / 2);
      if (e.dtype === 'F16') f16ToF32(bits, out, off / 2);
      else bf16ToF32(bits, out, off / 2);
    }
    return out;
  }

  close(): void {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }
}

export const SINGLE_FILE = HF_WEIGHTS_FILE;
export const INDEX_FILE = HF_WEIGHTS_INDEX_FILE;

/** A model folder's weights: one `model.safetensors`, or the shards its index names. */
export class SafetensorsModel {
  private constructor(
    readonly dir: string,
    readonly files: SafetensorsFile[],
    /** Tensor name -> the file holding it. */
    private readonly where: Map<string, SafetensorsFile>,
    /** The index file, when sharded. */
    readonly index: string | null,
  ) {}

  /** Open a folder's safetensors weights (index first, then the single file). */
  static open(dir: string): SafetensorsModel {
    const indexFile = path.join(dir, INDEX_FILE);
    const single = path.join(dir, SINGLE_FILE);
    if (fs.existsSync(indexFile)) return SafetensorsModel.openSharded(dir, indexFile);
    if (!fs.existsSync(single)) {
      const bin = ['pytorch_model.bin', 'model.bin', 'pytorch_model.bin.index.json'].find((f) => fs.existsSync(path.join(dir, f)));
      throw new InputError(
        `${dir}: no ${SINGLE_FILE} or ${INDEX_FILE}` + (bin ? ` (it has ${bin}: PyTorch pickles are not read; save the model with safe_serialization=True)` : ''),
      );
    }
    const f = SafetensorsFile.open(single);
    return new SafetensorsModel(dir, [f], new Map([...f.entries.keys()].map((k) => [k, f])), null);
  }

  private static openSharded(dir: string, indexFile: string): SafetensorsModel {
    const idx = readInputObject(indexFile, 'the safetensors index');
    const map = idx['weight_map'];
    if (typeof map !== 'object' || map === null || Array.isArray(map)) throw new InputError(`${indexFile}: "weight_map" must be an object of tensor name -> shard file`);
    const byShard = new Map<string, string[]>();
    for (const [name, shard] of Object.entries(map as Record<string, unknown>)) {
      if (typeof shard !== 'string' || shard === '' || shard !== path.basename(shard) || shard === '.' || shard === '..') {
        throw new InputError(`${indexFile}: "weight_map"."${name}" must be a file name in the folder (got ${JSON.stringify(shard)})`);
      }
      const list = byShard.get(shard) ?? [];
      list.push(name);
      byShard.set(shard, list);
    }
    if (byShard.size === 0) throw new InputError(`${indexFile}: "weight_map" is empty`);
    const files: SafetensorsFile[] = [];
    const where = new Map<string, SafetensorsFile>();
    try {
      for (const [shard, names] of byShard) {
        const p = path.join(dir, shard);
        if (!fs.existsSync(p)) throw new InputError(`${indexFile}: shard ${shard} is missing (it holds ${names[0]}${names.length > 1 ? ` and ${names.length - 1} more` : ''})`);
        const f = SafetensorsFile.open(p);
        files.push(f);
        for (const n of names) {
          if (!f.entries.has(n)) throw new InputError(`${indexFile}: "weight_map" puts ${n} in ${shard}, which has no such tensor`);
          where.set(n, f);
        }
      }
    } catch (err) {
      for (const f of files) f.close();
      throw err;
    }
    return new SafetensorsModel(dir, files, where, indexFile);
  }

  names(): string[] {
    return [...this.where.keys()];
  }

  entry(name: string): TensorEntry | undefined {
    return this.where.get(name)?.entries.get(name);
  }

  read(name: string): Float32Array {
    const f = this.where.get(name);
    if (!f) throw new InputError(`${this.index ?? path.join(this.dir, SINGLE_FILE)}: no tensor ${name}`);
    return f.read(name);
  }

  close(): void {
    for (const f of this.files) f.close();
  }
}

// ---- writing --------------------------------------------------------------------------

export interface TensorToWrite {
  name: string;
  dtype: StDtype;
  shape: number[];
  /** float32 values (converted to dtype on the way out). */
  data: Float32Array;
}

/**
 * Write tensors (in order) as one safetensors file, streamed in chunks (never one buffer of
 * the whole file). `file` is written as named; the caller decides about temporary names.
 */
export function writeSafetensorsFile(file: string, tensors: readonly TensorToWrite[], metadata: Record<string, string> = {}): void {
  if (!LITTLE_ENDIAN) throw new Error('safetensors: this writer needs a little-endian machine');
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length) header['__metadata__'] = metadata;
  let offset = 0;
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    if (n !== t.data.length) throw new Error(`safetensors: ${t.name} has ${t.data.length} values for shape [${t.shape}]`);
    if (t.name in header) throw new Error(`safetensors: tensor ${t.name} twice`);
    const bytes = n * DTYPE_BYTES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const hb = Buffer.from(json, 'utf8');
  const fd = fs.openSync(file, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(hb.length));
    fs.writeSync(fd, len);
    fs.writeSync(fd, hb);
    const per = CHUNK / 4;
    for (const t of tensors) {
      for (let i = 0; i < t.data.length; i += per) {
        const part = t.data.subarray(i, Math.min(t.data.length, i + per));
        if (t.dtype === 'F32') {
          fs.writeSync(fd, new Uint8Array(part.buffer, part.byteOffset, part.byteLength));
          continue;
        }
        const bits = new Uint16Array(part.length);
        const enc = t.dtype === 'F16' ? f32ToF16Bits : f32ToBf16Bits;
        for (let j = 0; j < part.length; j++) bits[j] = enc(part[j]!);
        fs.writeSync(fd, new Uint8Array(bits.buffer));
      }
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
