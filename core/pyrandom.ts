// A bit-exact port of CPython 3.11's `random.Random` (the MT19937 core in
// Modules/_randommodule.c and the pure-Python algorithms in Lib/random.py).
// The seed's world is drawn with `random.Random`, so the TypeScript world is
// byte-identical only if every draw consumes the generator exactly as CPython does:
// same seeding, same 32-bit words, same rejection loops, same sample() branches.
//
// API choice: integers that always fit a double (`randbelow(number)`, `randrange`,
// `choice`, `sample`, `shuffle`) are plain numbers; `getrandbits(k)` returns a
// bigint because k is unbounded in Python. `getrandbitsNumber(k)` (k <= 53) and
// `randbelow(bigint)` cover the other combinations with identical stream use.

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;
const TWO_32 = 4294967296;

export class PyRandom {
  private readonly mt = new Uint32Array(N);
  private index = N + 1;

  /** Same as `random.Random(seed)`: an int seed of any sign and size (CPython uses abs). */
  constructor(seed: number | bigint = 0) {
    this.seed(seed);
  }

  /**
   * `Random.seed(n)` for an int n: init_by_array over the 32-bit little-endian words
   * of abs(n) (one zero word for n = 0). Only int seeds are supported: CPython hashes
   * str/bytes seeds with SHA-512, which the world never uses.
   */
  seed(n: number | bigint): void {
    let big: bigint;
    if (typeof n === 'bigint') {
      big = n;
    } else {
      if (!Number.isSafeInteger(n)) {
        throw new TypeError(`PyRandom seed must be an integer (a safe integer when a number), got ${n}`);
      }
      big = BigInt(n);
    }
    if (big < 0n) big = -big;
    const key: number[] = [];
    while (big > 0n) {
      key.push(Number(big & 0xffffffffn));
      big >>= 32n;
    }
    if (key.length === 0) key.push(0);
    this.initByArray(key);
  }

  private initGenrand(s: number): void {
    const mt = this.mt;
    mt[0] = s >>> 0;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]!;
      mt[i] = (Math.imul(1812433253, (prev ^ (prev >>> 30)) >>> 0) + i) >>> 0;
    }
    this.index = N;
  }

  private initByArray(key: readonly number[]): void {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1]!;
      // Uint32Array stores mod 2**32, which is the C code's `& 0xffffffff`.
      mt[i] = ((mt[i]! ^ Math.imul((prev ^ (prev >>> 30)) >>> 0, 1664525)) >>> 0) + key[j]! + j;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1]!;
      mt[i] = ((mt[i]! ^ Math.imul((prev ^ (prev >>> 30)) >>> 0, 1566083941)) >>> 0) - i;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000; // MSB is 1, assuring a non-zero initial array
    this.index = N;
  }

  /** genrand_uint32: the next tempered 32-bit word, as an unsigned number. */
  private genrandUint32(): number {
    const mt = this.mt;
    if (this.index >= N) {
      let kk = 0;
      let y: number;
      for (; kk < N - M; kk++) {
        y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
        mt[kk] = mt[kk + M]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      for (; kk < N - 1; kk++) {
        y = (mt[kk]! & UPPER_MASK) | (mt[kk + 1]! & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      }
      y = (mt[N - 1]! & UPPER_MASK) | (mt[0]! & LOWER_MASK);
      mt[N - 1] = mt[M - 1]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
      this.index = 0;
    }
    let y = mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `random()`: a float in [0, 1) with 53 random bits, from two words. */
  random(): number {
    const a = this.genrandUint32() >>> 5;
    const b = this.genrandUint32() >>> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
  }

  /**
   * `getrandbits(k)` for any k >= 0, as a bigint. Words are drawn least significant
   * first; the last (most significant) word is shifted right to keep k bits, as in C.
   */
  getrandbits(k: number): bigint {
    checkBitCount(k);
    if (k === 0) return 0n;
    if (k <= 32) return BigInt(this.genrandUint32() >>> (32 - k));
    let result = 0n;
    let shift = 0n;
    for (let left = k; left > 0; left -= 32) {
      let r = this.genrandUint32();
      if (left < 32) r >>>= 32 - left;
      result |= BigInt(r) << shift;
      shift += 32n;
    }
    return result;
  }

  /** `getrandbits(k)` for 0 <= k <= 53, as a number; consumes the stream identically. */
  getrandbitsNumber(k: number): number {
    checkBitCount(k);
    if (k > 53) throw new RangeError(`getrandbitsNumber supports k <= 53, got ${k}; use getrandbits`);
    if (k === 0) return 0;
    if (k <= 32) return this.genrandUint32() >>> (32 - k);
    const low = this.genrandUint32();
    const high = this.genrandUint32() >>> (64 - k);
    return high * TWO_32 + low;
  }

  /**
   * `_randbelow(n)` (CPython's `_randbelow_with_getrandbits`): a uniform int in
   * [0, n) by rejection on getrandbits(n.bit_length()). n must be > 0 (Python loops
   * forever on 0; we throw).
   */
  randbelow(n: number): number;
  randbelow(n: bigint): bigint;
  randbelow(n: number | bigint): number | bigint {
    if (typeof n === 'bigint') {
      if (n <= 0n) throw new RangeError(`randbelow needs n > 0, got ${n}`);
      const k = n.toString(2).length;
      let r = this.getrandbits(k);
      while (r >= n) r = this.getrandbits(k);
      return r;
    }
    if (!Number.isSafeInteger(n) || n <= 0) {
      throw new RangeError(`randbelow needs a safe integer n > 0, got ${n}`);
    }
    const k = bitLength(n);
    let r = this.getrandbitsNumber(k);
    while (r >= n) r = this.getrandbitsNumber(k);
    return r;
  }

  /** Python spelling of `randbelow`, for readers following the reference. */
  _randbelow(n: number): number {
    return this.randbelow(n);
  }

  /** `randrange(stop)` / `randrange(start, stop[, step])` for safe integers (3.11 rules). */
  randrange(start: number, stop?: number, step = 1): number {
    checkInt(start, 'start');
    if (stop === undefined) {
      if (step !== 1) throw new TypeError('Missing a non-None stop argument');
      if (start > 0) return this.randbelow(start);
      throw new RangeError('empty range for randrange()');
    }
    checkInt(stop, 'stop');
    checkInt(step, 'step');
    const width = stop - start;
    if (step === 1) {
      if (width > 0) return start + this.randbelow(width);
      throw new RangeError(`empty range for randrange() (${start}, ${stop}, ${width})`);
    }
    if (step === 0) throw new RangeError('zero step for randrange()');
    // Python's floor division, exactly (float division can round across an integer).
    const n = Number(floorDiv(BigInt(width) + BigInt(step > 0 ? step - 1 : step + 1), BigInt(step)));
    if (n <= 0) throw new RangeError('empty range for randrange()');
    return start + step * this.randbelow(n);
  }

  /** `randint(a, b)`: `randrange(a, b + 1)`. */
  randint(a: number, b: number): number {
    return this.randrange(a, b + 1);
  }

  /** `choice(seq)`: one `_randbelow(len)` draw. Throws on an empty sequence, as Python does. */
  choice<T>(seq: readonly T[]): T {
    if (seq.length === 0) throw new RangeError('Cannot choose from an empty sequence');
    return seq[this.randbelow(seq.length)]!;
  }

  /** `shuffle(x)` in place: Fisher-Yates from the end, `j = _randbelow(i + 1)`. */
  shuffle<T>(x: T[]): void {
    for (let i = x.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      const t = x[i]!;
      x[i] = x[j]!;
      x[j] = t;
    }
  }

  /**
   * `sample(population, k)` with CPython 3.11's two branches: a shrinking pool when an
   * n-list is smaller than a k-set (n <= setsize), else rejection against a set of
   * chosen indices. The branch changes which draws are made, so it must match.
   */
  sample<T>(population: readonly T[], k: number): T[] {
    const n = population.length;
    if (!Number.isInteger(k) || k < 0 || k > n) {
      throw new RangeError('Sample larger than population or is negative');
    }
    const result: T[] = new Array<T>(k);
    let setsize = 21; // size of a small set minus size of an empty list
    if (k > 5) setsize += 4 ** ceilLog4(k * 3); // table size for big sets
    if (n <= setsize) {
      const pool = population.slice();
      for (let i = 0; i < k; i++) {
        const j = this.randbelow(n - i);
        result[i] = pool[j]!;
        pool[j] = pool[n - i - 1]!; // move non-selected item into vacancy
      }
    } else {
      const selected = new Set<number>();
      for (let i = 0; i < k; i++) {
        let j = this.randbelow(n);
        while (selected.has(j)) j = this.randbelow(n);
        selected.add(j);
        result[i] = population[j]!;
      }
    }
    return result;
  }
}

function checkBitCount(k: number): void {
  if (!Number.isSafeInteger(k) || k < 0) {
    throw new RangeError(`number of bits must be a non-negative integer, got ${k}`);
  }
}

function checkInt(v: number, what: string): void {
  if (!Number.isSafeInteger(v)) throw new TypeError(`randrange ${what} must be a safe integer, got ${v}`);
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b; // truncates toward zero
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** int.bit_length() for a positive safe integer. */
function bitLength(n: number): number {
  return n <= 0xffffffff ? 32 - Math.clz32(n) : 32 + bitLength(Math.floor(n / TWO_32));
}

/**
 * ceil(log(x, 4)) as Python computes it for sample()'s setsize. Python uses float logs;
 * the exact integer answer is the same because x = 3k is never a power of 4, and the
 * float error only reaches the ceiling when 3k is within ~1e-16 relative of 4**m,
 * which needs populations far beyond a JS array's 2**32 limit.
 */
function ceilLog4(x: number): number {
  let m = 0;
  let p = 1;
  while (p < x) {
    p *= 4;
    m++;
  }
  return m;
}
