// The calculator against the seed's `calc` (CPython 3.11): the golden file
// (test/golden/calc_cases.json, made by test/golden/gen_calc.py), docs/architecture.md's deliberate
// deviations, and a live differential run on randomly generated expressions.
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { CALC_MAX_DEPTH, CALC_MAX_INPUT_CHARS, calc } from '../../core/tools/calc';
import { referenceUnavailable, runReference } from '../support/reference';

interface GoldenCase {
  expr: string;
  /** What CPython's calc returns. */
  out: string;
  /** CPython rejects it before evaluating: ours must be a CalcError too, wording free. */
  syntax?: true;
  /** Where CPython's libm pow is not correctly rounded: what ours (correctly rounded) gives. */
  crPow?: string;
}

/** The correctly rounded pow oracle (test/support/crpow.py), pasted into the Python programs. */
const CRPOW = readFileSync(path.join(__dirname, '..', 'support', 'crpow.py'), 'utf8');
const golden = JSON.parse(readFileSync(path.join(__dirname, '..', 'golden', 'calc_cases.json'), 'utf8')) as {
  python: string;
  cases: GoldenCase[];
};

/** Messages only the tree walk produces: a syntax error must never come out as one of these. */
const WALK_MESSAGE =
  /^CalcError: (disallowed expression node|non-numeric constant|division by zero|integer |float |0\.0 cannot|\(34,|int too large)/;

function checkAgainstReference(expr: string, ours: string, ref: string, syntax: boolean): void {
  if (syntax) {
    assert.ok(ours.startsWith('CalcError: '), `${JSON.stringify(expr)}: CPython rejects it, ours gave ${ours}`);
    assert.doesNotMatch(ours, WALK_MESSAGE, `${JSON.stringify(expr)}: CPython rejects it while parsing`);
  } else {
    assert.equal(ours, ref, JSON.stringify(expr));
  }
}

function timed(expr: string): { out: string; ms: number } {
  const t0 = performance.now();
  const out = calc(expr);
  return { out, ms: performance.now() - t0 };
}

describe('calc (the seed calculator, CPython 3.11 semantics)', () => {
  describe(`golden cases (CPython ${golden.python})`, () => {
    it('were made by CPython 3.11 and cover the ground', () => {
      assert.match(golden.python, /^3\.11\./);
      assert.ok(golden.cases.length >= 300, `${golden.cases.length} cases`);
    });

    const groups: [string, (c: GoldenCase) => boolean][] = [
      ['syntax errors (a CalcError of ours)', (c) => c.syntax === true],
      ['runtime errors (CPython messages)', (c) => !c.syntax && c.out.startsWith('CalcError: ')],
      ['integer results', (c) => !c.syntax && /^-?\d+$/.test(c.out)],
      ['float results', (c) => !c.syntax && !c.out.startsWith('CalcError: ') && !/^-?\d+$/.test(c.out)],
    ];
    for (const [title, pick] of groups) {
      const cases = golden.cases.filter(pick);
      it(`${title}: ${cases.length} cases`, () => {
        for (const c of cases) checkAgainstReference(c.expr, calc(c.expr), c.crPow ?? c.out, c.syntax === true);
      });
    }

    it('differs from CPython only where glibc pow is not correctly rounded (documented)', () => {
      const differing = golden.cases.filter((c) => c.crPow !== undefined);
      for (const c of differing) {
        assert.match(c.expr, /\*\*/);
        assert.equal(calc(c.expr), c.crPow);
      }
      assert.ok(differing.length <= 5, `${differing.length} golden cases differ`);
    });
  });

  describe('examples from docs/architecture.md and the seed', () => {
    const table: [string, string][] = [
      ['4042.0', '4042'],
      ['-3+4', '1'],
      ['1e16', '10000000000000000'],
      ['1e-5', '1e-05'],
      ['0.1+0.2', '0.30000000000000004'],
      ['1/3', '0.3333333333333333'],
      ['2**0.5', '1.4142135623730951'],
      ['10/4', '2.5'],
      ['-0.0', '0'],
      ['-2**2', '-4'],
      ['2**-1', '0.5'],
      ['2**3**2', '512'],
      ['1e999', 'inf'],
      ['-1e999', '-inf'],
      ['1e999-1e999', 'nan'],
      ['1e300*1e10', 'inf'],
      ['7//-2', '-4'],
      ['-7%3', '2'],
      ['-7.5%2', '0.5'],
      ['7.5//-2', '-4'],
      ['1e300', '1000000000000000052504760255204420248704468581108159154915854115511802457988908195786371375080447864043704443832883878176942523235360430575644792184786706982848387200926575803737830233794788090059368953234970799945081119038967640880074652742780142494579258788820056842838115669472196386865459400540160'],
      ['1/0', 'CalcError: division by zero'],
      ['1//0', 'CalcError: integer division or modulo by zero'],
      ['1%0', 'CalcError: integer modulo by zero'],
      ['1.0/0', 'CalcError: float division by zero'],
      ['1.0%0', 'CalcError: float modulo'],
      ['1.0//0', 'CalcError: float floor division by zero'],
      ['0**-1', 'CalcError: 0.0 cannot be raised to a negative power'],
      ['2.0**10000', "CalcError: (34, 'Numerical result out of range')"],
      ['10**400/3', 'CalcError: integer division result too large for a float'],
      ['1.5+10**400', 'CalcError: int too large to convert to float'],
      ['x', 'CalcError: disallowed expression node: Name'],
      ['1<2', 'CalcError: disallowed expression node: Compare'],
      ['abs(1)', 'CalcError: disallowed expression node: Call'],
      ['~1', 'CalcError: disallowed expression node: UnaryOp'],
      ['1@2', 'CalcError: disallowed expression node: BinOp'],
      ['(1/0)@2', 'CalcError: disallowed expression node: BinOp'],
      ['1/0+x', 'CalcError: division by zero'],
      ['x+1/0', 'CalcError: disallowed expression node: Name'],
      ['"1"', 'CalcError: non-numeric constant'],
      ['1j', 'CalcError: non-numeric constant'],
      ['None', 'CalcError: non-numeric constant'],
      ['...', 'CalcError: non-numeric constant'],
      ['1\0', 'CalcError: source code string cannot contain null bytes'],
      ['  12 * ( 3 + 4 )  ', '84'],
    ];
    for (const [expr, want] of table) {
      it(`${JSON.stringify(expr).slice(0, 40)} -> ${want.slice(0, 40)}`, () => assert.equal(calc(expr), want));
    }
  });

  describe('deliberate deviations (docs/architecture.md, "Calculator bounds")', () => {
    it('an int result over 4300 digits is a CalcError (the reference raises outside its try)', () => {
      assert.equal(calc('10**4299').length, 4300);
      assert.equal(calc('-(10**4299)').length, 4301);
      assert.match(calc('10**4299*10'), /^CalcError: integer result has more than 4300 digits/);
      assert.match(calc('2**14285'), /^CalcError: exponentiation result would have more than 4300 digits/);
      assert.equal(calc('2**14284').length, 4300);
    });

    it('checks the size of a power before computing it (9**9**9 returns at once)', () => {
      for (const expr of ['9**9**9', '2**10**10', '10**(10**100)', '(10**400)**11', '2**20001', '(-3)**100000']) {
        const { out, ms } = timed(expr);
        assert.match(out, /^CalcError: exponentiation result would have more than 4300 digits/, expr);
        assert.ok(ms < 200, `${expr}: ${ms} ms`);
      }
      // Bases whose powers stay small are computed, as Python does.
      assert.equal(calc('1**(10**100)'), '1');
      assert.equal(calc('0**(10**100)'), '0');
      assert.equal(calc('(-1)**(10**100+1)'), '-1');
    });

    it('bounds intermediate ints (20000 digits) but allows them past 4300', () => {
      assert.equal(calc('(10**4000)*(10**4000)//(10**3999*10**4000)'), '10');
      assert.match(calc('10**4000*10**4000*10**4000*10**4000*10**4000*10**4000'), /^CalcError: integer intermediate result/);
    });

    it('a complex result is a CalcError', () => {
      for (const expr of ['(0-8)**0.5', '(-8)**(1/3)', '(-2.0)**-0.5', '(0-8)**0.5*0']) {
        assert.match(calc(expr), /^CalcError: complex result not supported/, expr);
      }
      assert.equal(calc('(0-8)**2.0'), '64'); // an integral exponent stays real
    });

    it('True and False are CalcErrors (CPython treats them as the ints 1 and 0)', () => {
      assert.match(calc('True'), /^CalcError: True is a boolean/);
      assert.match(calc('False+1'), /^CalcError: False is a boolean/);
      assert.equal(calc('1/0+True'), 'CalcError: division by zero'); // the walk's order holds
    });

    it('10,000 nested parentheses, deep unary chains and long inputs return a CalcError quickly', () => {
      const cases = [
        '('.repeat(10000) + '1' + ')'.repeat(10000),
        '('.repeat(4999) + '1' + ')'.repeat(4999),
        '-'.repeat(9999) + '1',
        'not '.repeat(2000) + '1',
        '1+'.repeat(4999) + '1',
        '2**'.repeat(3000) + '2',
        'lambda:'.repeat(1400) + '1',
        '1'.repeat(CALC_MAX_INPUT_CHARS + 1),
        ' '.repeat(200000) + 'x' + ' '.repeat(200000),
        '[x for ([' .repeat(30) + 'q' + ']) in s]'.repeat(30),
      ];
      for (const expr of cases) {
        const { out, ms } = timed(expr);
        assert.match(out, /^CalcError: /, expr.slice(0, 30));
        assert.ok(ms < 500, `${expr.slice(0, 30)}...: ${ms} ms`);
      }
    });

    it(`nesting up to CPython's own limits works: 200 brackets, ${CALC_MAX_DEPTH} levels`, () => {
      assert.equal(calc('('.repeat(200) + '1' + ')'.repeat(200)), '1');
      assert.equal(calc('('.repeat(201) + '1' + ')'.repeat(201)), 'CalcError: too many nested parentheses');
      assert.equal(calc('-'.repeat(CALC_MAX_DEPTH - 1) + '1'), '-1');
      assert.match(calc('-'.repeat(CALC_MAX_DEPTH) + '1'), /^CalcError: expression is nested too deeply/);
      assert.equal(calc('1+'.repeat(CALC_MAX_DEPTH - 2) + '1'), String(CALC_MAX_DEPTH - 1));
    });
  });

  describe('never throws', () => {
    it('on arbitrary strings (controls, surrogates, unicode, huge literals)', () => {
      let seed = 12345;
      const rnd = (): number => {
        seed = (seed * 1103515245 + 12345) % 2147483648;
        return seed / 2147483648;
      };
      const alphabet = [...'0123456789+-*/.()[]{}<>=!~@%&|^,:;\'"\\#$?_ \t\n\r\fxjeEabfrN', '\0', '\ud800', '\udc00', 'é', '𝑥', '\u3000', '١'];
      for (let i = 0; i < 3000; i++) {
        let s = '';
        const n = Math.floor(rnd() * 30);
        for (let j = 0; j < n; j++) s += alphabet[Math.floor(rnd() * alphabet.length)];
        const out = calc(s);
        assert.equal(typeof out, 'string');
        assert.ok(out.length > 0);
      }
      assert.equal(calc('1+\ud800'), "CalcError: 'utf-8' codec can't encode character '\\ud800' in position 2: surrogates not allowed");
      assert.equal(calc('\udc00\udc00'), "CalcError: 'utf-8' codec can't encode characters in position 0-1: surrogates not allowed");
      assert.match(calc('1'.repeat(4301)), /^CalcError: /);
      assert.equal(calc('0x' + 'f'.repeat(3000) + '//16**2999'), '15');
    });
  });

  describe('live differential against the Python reference', function () {
    // The reference's calc, plus the same calc with a correctly rounded pow: a case may
    // differ from CPython only when CPython's glibc pow rounds differently.
    const PROGRAM = `
import ast, math, operator, warnings
from decimal import Decimal, localcontext
from fractions import Fraction
from stacklm.agent import tools
warnings.simplefilter("ignore")
ORIG = tools._BINOPS[ast.Pow]
seen = [False]
${CRPOW}
cr = correctly_rounded_pow
def cr_pow(a, b):
    r = operator.pow(a, b)
    if not isinstance(r, float) or math.isinf(r) or math.isnan(r) or r == 0.0:
        return r
    x, y = abs(float(a)), float(b)
    if not (math.isfinite(x) and math.isfinite(y)) or x in (0.0, 1.0) or y == 0.0:
        return r
    return math.copysign(cr(x, y), r)
def flag(f):
    def g(a, b):
        r = f(a, b)
        if isinstance(r, complex):
            seen[0] = True
        return r
    return g
def run(e, p):
    tools._BINOPS[ast.Pow] = flag(p)
    try:
        return tools.calc(e)
    except Exception:
        return None
out = []
for e in INPUT:
    seen[0] = False
    a = run(e, ORIG)
    b = run(e, cr_pow)
    try:
        ast.parse(e.strip(), mode="eval")
        syntax = False
    except Exception:
        syntax = True
    out.append([a, b, seen[0], syntax])
print(json.dumps(out))
`;

    /** mulberry32: a seeded generator, so every run tests the same expressions. */
    function rng(seed: number): () => number {
      return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }

    function generate(): string[] {
      const rnd = rng(20240607);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
      const exprs: string[] = [];
      // 1. Strings over the tool grammar's alphabet, as a model could write them.
      const alphabet = '0123456789+-*/.() ';
      for (let i = 0; i < 1000; i++) {
        const n = 1 + Math.floor(rnd() * 24);
        let s = '';
        for (let j = 0; j < n; j++) s += rnd() < 0.45 ? pick([...'0123456789']) : pick([...alphabet]);
        exprs.push(s);
      }
      // 2. Well-formed arithmetic over the same alphabet, plus // % and small powers.
      const num = (): string =>
        pick([
          () => String(Math.floor(rnd() * 10)),
          () => String(Math.floor(rnd() * 100000)),
          () => String(Math.floor(rnd() * 1e9)) + String(Math.floor(rnd() * 1e9)),
          () => (rnd() * 1000).toFixed(1 + Math.floor(rnd() * 4)),
          () => '.' + String(Math.floor(rnd() * 1000)),
          () => String(Math.floor(rnd() * 10)) + '.',
          () => pick(['0.1', '0.2', '0.0', '1e16', '1e-5', '2.5', '1e308', '1e999', '5e-324', '9007199254740993']),
        ])();
      const expr = (d: number): string => {
        if (d > 3 || rnd() < 0.25) return num();
        return pick([
          () => `${expr(d + 1)}${pick(['+', '-', '*', '/', ' + ', ' - ', ' * ', ' / '])}${expr(d + 1)}`,
          () => `${expr(d + 1)}${pick(['//', '%', ' // ', ' % '])}${expr(d + 1)}`,
          () => `(${expr(d + 1)})`,
          () => `-${expr(d + 1)}`,
          () => `${pick(['2', '3', '10', '0', '1', '(0-2)', '1.5', '0.5', '7', '1.1', '0.0'])}**${pick(['2', '3', '0', '-1', '-2', '0.5', '-0.5', '1.5', '10', '(0-3)', '23', '(1/3)'])}`,
        ])();
      };
      for (let i = 0; i < 1000; i++) exprs.push(expr(0));
      return exprs;
    }

    it('agrees on ~2000 generated expressions (results and runtime errors exactly)', function () {
      const why = referenceUnavailable();
      if (why !== null) {
        console.log(`      skipped: ${why}`);
        this.skip();
      }
      this.timeout(120000);
      const exprs = generate();
      const ref = runReference<[string | null, string | null, boolean, boolean][]>(PROGRAM, exprs);
      let compared = 0;
      let syntax = 0;
      let powRounding = 0;
      let skipped = 0;
      exprs.forEach((e, i) => {
        const [out, crOut, sawComplex, isSyntax] = ref[i]!;
        // Not comparable: the reference raised outside its try, or went through a complex.
        if (out === null || crOut === null || sawComplex) {
          skipped++;
          return;
        }
        const ours = calc(e);
        if (!isSyntax && ours !== out && ours === crOut) {
          powRounding++;
          return;
        }
        checkAgainstReference(e, ours, out, isSyntax);
        if (isSyntax) syntax++;
        else compared++;
      });
      assert.ok(compared >= 1000, `only ${compared} compared`);
      assert.ok(powRounding <= 10, `${powRounding} cases differ by glibc pow rounding`);
      // Shown in the test output, so a reader sees what was and was not compared.
      console.log(`      compared ${compared} exactly, ${syntax} syntax errors, ${powRounding} glibc-pow rounding, ${skipped} skipped`);
    });
  });
});
