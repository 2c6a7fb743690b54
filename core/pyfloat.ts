// CPython 3.11 float semantics that JavaScript does not share, for the calculator and the
// verifier's normalize(): repr/str of a float, float(str), int(float), int -> float and
// int / int (both correctly rounded in CPython), and the float operators whose edge cases
// (signed zeros, error messages, pow's special cases) differ from JS's.
// No Node imports: panels and the language server load core.

/** A Python exception, carried as a value; `message` is what `str(e)` prints. */
export class PyError extends Error {
  /**
   * `pyType` is the Python exception class (`ZeroDivisionError`, `OverflowError`, ...),
   * or `complex` where CPython would not raise but return a complex number, which the
   * calculator does not support.
   */
  constructor(
    readonly pyType: string,
    message: string,
  ) {
    super(message);
    this.name = pyType;
  }
}

// ---------------------------------------------------------------------------------------
// Bits of a double.

const F64 = new Float64Array(1);
const U64 = new BigUint64Array(F64.buffer);

/** Exactly 2**k for an integer k in [-1074, 1023] (Math.pow is not specified to be exact). */
function pow2(k: number): number {
  if (k >= -1022) U64[0] = BigInt(k + 1023) << 52n;
  else U64[0] = 1n << BigInt(k + 1074);
  return F64[0]!;
}

/** A finite nonzero |x| as m * 2**e with m a positive odd integer. */
function decompose(x: number): [bigint, number] {
  F64[0] = Math.abs(x);
  const bits = U64[0]!;
  const biased = Number(bits >> 52n);
  let m = bits & 0xfffffffffffffn;
  let e: number;
  if (biased === 0) e = -1074;
  else {
    m |= 1n << 52n;
    e = biased - 1075;
  }
  while ((m & 1n) === 0n) {
    m >>= 1n;
    e++;
  }
  return [m, e];
}

/** Number of bits of |n| (0 for 0). */
export function bitLength(n: bigint): number {
  if (n < 0n) n = -n;
  if (n === 0n) return 0;
  const hex = n.toString(16);
  return (hex.length - 1) * 4 + (32 - Math.clz32(parseInt(hex[0]!, 16)));
}

/**
 * num/den * 2**e2 (num >= 0, den > 0) rounded to the nearest double, ties to even,
 * subnormals included; Infinity when it rounds past the largest double.
 */
function roundRational(num: bigint, den: bigint, e2: number): number {
  if (num === 0n) return 0;
  // Scale so the integer quotient q has 55 or 56 bits; `inexact` is the sticky bit.
  const s = 55 - (bitLength(num) - bitLength(den));
  let q: bigint;
  let inexact: boolean;
  if (s >= 0) {
    const n2 = num << BigInt(s);
    q = n2 / den;
    inexact = n2 % den !== 0n;
  } else {
    const d2 = den << BigInt(-s);
    q = num / d2;
    inexact = num % d2 !== 0n;
  }
  const qb = bitLength(q);
  const top = qb - 1 + e2 - s; // exponent of the leading bit of the value
  if (top > 1023) return Infinity;
  const lsb = Math.max(top - 52, -1074); // exponent of the result's last bit
  const drop = lsb - (e2 - s); // >= 2: q has at least 55 bits
  const dropN = BigInt(drop);
  let m = q >> dropN;
  const rest = q - (m << dropN);
  const half = 1n << (dropN - 1n);
  if (rest > half || (rest === half && (inexact || (m & 1n) === 1n))) m += 1n;
  // m <= 2**53, so the product is exact unless it overflows to Infinity, as it should.
  return Number(m) * pow2(lsb);
}

// ---------------------------------------------------------------------------------------
// repr / str

/** Python's `repr(x)` (= `str(x)`) of a float: shortest round-trip digits, CPython's layout. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  // JS and CPython both produce the shortest digit string that round-trips, the nearest
  // one when several do; only the layout differs, so take JS's digits and re-lay them.
  const js = String(Math.abs(x));
  const ePos = js.indexOf('e');
  const mant = ePos < 0 ? js : js.slice(0, ePos);
  const exp10 = ePos < 0 ? 0 : parseInt(js.slice(ePos + 1), 10);
  const dot = mant.indexOf('.');
  const intPart = dot < 0 ? mant : mant.slice(0, dot);
  const fracPart = dot < 0 ? '' : mant.slice(dot + 1);
  let digits = intPart + fracPart;
  let decpt = intPart.length + exp10; // x = 0.<digits> * 10**decpt
  const lead = /^0*/.exec(digits)![0].length;
  digits = digits.slice(lead).replace(/0+$/, '');
  decpt -= lead;
  const sign = x < 0 ? '-' : '';
  // CPython's repr switches to exponent form when the exponent is < -4 or >= 16.
  if (decpt <= -4 || decpt > 16) {
    const e = decpt - 1;
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const ee = Math.abs(e).toString().padStart(2, '0');
    return `${sign}${m}e${e < 0 ? '-' : '+'}${ee}`;
  }
  if (decpt <= 0) return `${sign}0.${'0'.repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${'0'.repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

// ---------------------------------------------------------------------------------------
// float(str)

// float() strips ASCII whitespace, and maps non-ASCII Unicode whitespace to ' ' first
// (ASCII controls such as \x1c stay and make the string invalid, unlike str.strip()).
const FLOAT_ASCII_SPACE = ' \t\n\x0b\x0c\r';
const UNICODE_SPACE = /^[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/u;
const DECIMAL_DIGIT = /^\p{Nd}$/u;
const FLOAT_SYNTAX = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const INF_NAN = /^([+-]?)(inf|infinity|nan)$/i;

/** The value of a Unicode decimal digit: they come in runs of ten, starting at zero. */
function unicodeDigitValue(cp: number): number {
  let start = cp;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}

/** Python's `float(s)` for a str; null where Python raises ValueError. */
export function pyParseFloat(s: string): number | null {
  let t = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (cp < 127) t += ch;
    else if (UNICODE_SPACE.test(ch)) t += ' ';
    else if (DECIMAL_DIGIT.test(ch)) t += String(unicodeDigitValue(cp));
    else return null;
  }
  let a = 0;
  let b = t.length;
  while (a < b && FLOAT_ASCII_SPACE.includes(t[a]!)) a++;
  while (b > a && FLOAT_ASCII_SPACE.includes(t[b - 1]!)) b--;
  t = t.slice(a, b);
  if (t.includes('_')) {
    // Underscores only between digits (CPython checks the characters on both sides).
    if (!/^[^_]*(?:(?<=\d)_(?=\d)[^_]*)*$/.test(t)) return null;
    t = t.replace(/_/g, '');
  }
  const special = INF_NAN.exec(t);
  if (special) {
    const v = special[2]!.toLowerCase() === 'nan' ? NaN : Infinity;
    return special[1] === '-' ? -v : v;
  }
  if (!FLOAT_SYNTAX.test(t)) return null;
  return Number(t); // correctly rounded, as CPython's strtod
}

// ---------------------------------------------------------------------------------------
// int <-> float

/** `x.is_integer()` */
export function isIntegerFloat(x: number): boolean {
  return Number.isFinite(x) && Math.trunc(x) === x;
}

/** `int(x)` for a float: exact, truncating toward zero. */
export function floatToBigInt(x: number): bigint {
  if (Number.isNaN(x)) throw new PyError('ValueError', 'cannot convert float NaN to integer');
  if (!Number.isFinite(x)) throw new PyError('OverflowError', 'cannot convert float infinity to integer');
  return BigInt(Math.trunc(x));
}

/** `float(n)` for an int: correctly rounded (ties to even), OverflowError past the range. */
export function bigIntToFloat(n: bigint): number {
  const f = Number(n);
  if (!Number.isFinite(f)) throw new PyError('OverflowError', 'int too large to convert to float');
  return f;
}

const TWO_53 = 1n << 53n;

/** `a / b` for ints: correctly rounded however large they are, as CPython's long_true_divide. */
export function bigIntTrueDiv(a: bigint, b: bigint): number {
  if (b === 0n) throw new PyError('ZeroDivisionError', 'division by zero');
  const negate = a < 0n !== b < 0n;
  if (a === 0n) return negate ? -0 : 0;
  const aa = a < 0n ? -a : a;
  const bb = b < 0n ? -b : b;
  let r: number;
  if (aa <= TWO_53 && bb <= TWO_53) r = Number(aa) / Number(bb); // both exact: one rounding
  else r = roundRational(aa, bb, 0);
  if (r === Infinity) throw new PyError('OverflowError', 'integer division result too large for a float');
  return negate ? -r : r;
}

// ---------------------------------------------------------------------------------------
// Float operators (CPython's floatobject.c behaviour, including messages and signed zeros).

/** `x / y` for floats. */
export function pyFloatTrueDiv(x: number, y: number): number {
  if (y === 0) throw new PyError('ZeroDivisionError', 'float division by zero');
  return x / y;
}

/** `x % y` for floats: the result takes the divisor's sign (float_rem). */
export function pyFloatMod(x: number, y: number): number {
  if (y === 0) throw new PyError('ZeroDivisionError', 'float modulo');
  let mod = x % y; // C fmod: exact
  if (mod !== 0) {
    if (y < 0 !== mod < 0) mod += y;
  } else {
    mod = y < 0 ? -0 : 0;
  }
  return mod;
}

/** `x // y` for floats (float_floor_div via _float_div_mod). */
export function pyFloatFloorDiv(x: number, y: number): number {
  if (y === 0) throw new PyError('ZeroDivisionError', 'float floor division by zero');
  const mod = x % y;
  let div = (x - mod) / y;
  if (mod !== 0 && y < 0 !== mod < 0) div -= 1;
  if (div !== 0) {
    let floordiv = Math.floor(div);
    if (div - floordiv > 0.5) floordiv += 1;
    return floordiv;
  }
  // A zero quotient takes the sign of the true quotient.
  return x / y < 0 || Object.is(x / y, -0) ? -0 : 0;
}

function isOddInteger(x: number): boolean {
  return Math.abs(x) % 2 === 1;
}

const RANGE_ERROR = "(34, 'Numerical result out of range')";

/**
 * `x ** y` for floats (float_pow): CPython's special cases, then the platform pow, which is
 * computed here correctly rounded. Overflow raises OverflowError(34, ...) as CPython does;
 * a negative base to a non-integer power throws PyError('complex', ...).
 */
export function pyFloatPow(x: number, y: number): number {
  if (y === 0) return 1;
  if (Number.isNaN(x)) return x;
  if (Number.isNaN(y)) return x === 1 ? 1 : y;
  if (!Number.isFinite(y)) {
    const ax = Math.abs(x);
    if (ax === 1) return 1;
    if (y > 0 === ax > 1) return Infinity;
    return 0;
  }
  if (!Number.isFinite(x)) {
    const odd = isOddInteger(y);
    if (y > 0) return odd ? x : Math.abs(x);
    return odd ? (x < 0 ? -0 : 0) : 0;
  }
  if (x === 0) {
    if (y < 0) throw new PyError('ZeroDivisionError', '0.0 cannot be raised to a negative power');
    return isOddInteger(y) ? x : 0;
  }
  let negate = false;
  if (x < 0) {
    if (y !== Math.floor(y)) {
      throw new PyError('complex', 'a negative number raised to a non-integer power has a complex result');
    }
    x = -x;
    negate = isOddInteger(y);
  }
  if (x === 1) return negate ? -1 : 1;
  const r = correctlyRoundedPow(x, y);
  if (r === Infinity) throw new PyError('OverflowError', RANGE_ERROR);
  return negate ? -r : r;
}

// ---------------------------------------------------------------------------------------
// A correctly rounded pow for x > 0 finite, x != 1, y finite nonzero. Results that are
// exact rationals are rounded exactly; the rest (irrational, so never a tie) by Ziv's
// method: evaluate exp(y ln x) in fixed point, widening until the rounding is certain.

/** trunc(a * b / 2**w): truncation toward zero keeps alternating series terminating. */
function mulShift(a: bigint, b: bigint, w: bigint): bigint {
  const p = a * b;
  return p < 0n ? -(-p >> w) : p >> w;
}

/** isqrt(n) when n is a perfect square, else null. */
function exactSqrt(n: bigint): bigint | null {
  if (n < 2n) return n;
  let x = BigInt(Math.floor(Math.sqrt(Number(n))));
  // Newton steps from the double estimate until it settles.
  for (;;) {
    const y = (x + n / x) >> 1n;
    if (y >= x) break;
    x = y;
  }
  while (x * x > n) x -= 1n;
  while ((x + 1n) * (x + 1n) <= n) x += 1n;
  return x * x === n ? x : null;
}

/** x**y as an exact rational m**k * 2**e2 when it is one and cheap to get, else null. */
function exactPow(x: number, y: number): number | null {
  const [m, e] = decompose(x);
  if (m === 1n) {
    // x is a power of two: x**y = 2**(e*y), rational only when e*y is an integer.
    const [, ey] = decompose(y);
    if (ey < 0 && e % 2 ** -ey !== 0) return null;
    const e2 = e * y;
    if (e2 > 1100) return Infinity;
    if (e2 < -1200) return 0;
    return roundRational(1n, 1n, e2);
  }
  // y = a / 2**k; a rational result needs m to be a perfect 2**k-th power, so k <= 5
  // (3**64 > 2**53), and small results keep |a| small.
  let k = 0;
  let a = y;
  while (!Number.isInteger(a) && k <= 5) {
    a *= 2;
    k++;
  }
  if (!Number.isInteger(a) || Math.abs(y) > 64) return null;
  if ((e * a) % 2 ** k !== 0) return null;
  let root = m;
  for (let i = 0; i < k; i++) {
    const r = exactSqrt(root);
    if (r === null) return null;
    root = r;
  }
  const p = root ** BigInt(Math.abs(a));
  const e2 = (e * a) / 2 ** k;
  return a > 0 ? roundRational(p, 1n, e2) : roundRational(1n, p, e2);
}

const lnTwoCache = new Map<number, bigint>();

/** ln 2 * 2**w, error < 1 unit. */
function lnTwo(w: number): bigint {
  let v = lnTwoCache.get(w);
  if (v === undefined) {
    // ln 2 = 2 atanh(1/3), with 8 guard bits.
    const W = BigInt(w + 8);
    const one = 1n << W;
    let term = one / 3n;
    let sum = term;
    for (let k = 3n; term !== 0n; k += 2n) {
      term /= 9n;
      sum += term / k;
    }
    v = (2n * sum) >> 8n;
    lnTwoCache.set(w, v);
  }
  return v;
}

function correctlyRoundedPow(x: number, y: number): number {
  const t = y * Math.log2(x);
  if (t > 1100) return Infinity;
  if (t < -1200) return 0;
  const exact = exactPow(x, y);
  if (exact !== null) return exact;

  const [mx, ex] = decompose(x);
  const [my, ey] = decompose(y); // |y| = my * 2**ey
  const yBits = bitLength(my) + ey; // |y| < 2**yBits
  for (let w = 120 + Math.max(0, yBits); ; w *= 2) {
    const W = BigInt(w);
    const one = 1n << W;
    // ln x = ln(m) + n ln 2 with m in [sqrt(1/2), sqrt(2)).
    const mb = bitLength(mx);
    let M = mx << (W - BigInt(mb - 1)); // m * 2**w, m in [1, 2)
    let n2 = ex + mb - 1;
    if (M * M > 2n * one * one) {
      M >>= 1n;
      n2 += 1;
    }
    const z = ((M - one) << W) / (M + one); // |z| < 0.172
    const z2 = mulShift(z, z, W);
    let term = z;
    let s = z;
    let terms = 1;
    for (let k = 3n; term !== 0n; k += 2n) {
      term = mulShift(term, z2, W);
      s += term / k;
      terms++;
    }
    const ln2 = lnTwo(w);
    const lnx = 2n * s + BigInt(n2) * ln2;
    const errLn = BigInt(4 * terms + 4 + Math.abs(n2)); // units of 2**-w
    // L = y ln x.
    let L = lnx * my;
    let errL = errLn * my;
    if (ey >= 0) {
      L <<= BigInt(ey);
      errL <<= BigInt(ey);
    } else {
      L >>= BigInt(-ey);
      errL = (errL >> BigInt(-ey)) + 1n;
    }
    if (y < 0) L = -L;
    // exp(L) = 2**n * exp(r), |r| <= ln2 / 2.
    const n = (L + (L >= 0n ? ln2 / 2n : -ln2 / 2n)) / ln2;
    const r = L - n * ln2;
    const errR = errL + (n < 0n ? -n : n) + 1n;
    let eterm = one;
    let E = one;
    let eterms = 1;
    for (let k = 1n; eterm !== 0n; k++) {
      eterm = mulShift(eterm, r, W) / k;
      E += eterm;
      eterms++;
    }
    // exp(r + d) = exp(r)(1 + d + ...), exp(r) < 1.42: 2 per unit of errR is ample;
    // the series' own truncations, propagated, stay under 4 per term.
    const errE = 2n * errR + BigInt(4 * eterms + 4);
    const shift = Number(n) - w;
    const lo = roundRational(E - errE, 1n, shift);
    const hi = roundRational(E + errE, 1n, shift);
    if (lo === hi) return lo;
    if (w > 20000) return roundRational(E, 1n, shift); // unreachable in practice
  }
}
