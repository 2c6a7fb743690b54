"""Golden data for the calculator port (core/tools/calc.ts): the seed's `calc` run on a few
hundred expressions by CPython 3.11.

Regenerate from the repository root:
    PYTHONPATH=../shared/seeds/reference python3 test/golden/gen_calc.py
It writes test/golden/calc_cases.json. Deterministic: two runs give identical bytes.

Left out, because they are docs/architecture.md's deliberate deviations and are tested on their own
(test/unit/calc.test.ts): cases where the reference hangs (9**9**9) or raises outside its
try (an int result over 4300 digits), and cases whose value passes through a complex number.
Cases CPython rejects before evaluating (syntax errors) carry "syntax": true.
Where CPython's platform pow (glibc's, not correctly rounded) and a correctly rounded pow
give different results, the case carries both: `out` (CPython) and `crPow` (what the
port returns); see the comment on `cr_pow` below.
"""
import ast, json, math, operator, os, sys, warnings
from decimal import Decimal, localcontext
from fractions import Fraction
from stacklm.agent import tools

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'support'))

assert sys.version_info[:2] == (3, 11), "golden data is defined by CPython 3.11"
warnings.simplefilter("ignore")  # '1if 1else 2' warns; the value is what matters

_ORIG_POW = tools._BINOPS[ast.Pow]
_complex_seen = [False]


def cr_pow(a, b):
    """operator.pow with float results correctly rounded. CPython's float ** float calls
    the C library's pow, which glibc computes to within ~0.52 ulp, so about 1 result in
    1000 differs in the last bit from the correctly rounded one the port computes."""
    r = operator.pow(a, b)
    if not isinstance(r, float) or math.isinf(r) or math.isnan(r) or r == 0.0:
        return r
    x, y = abs(float(a)), float(b)
    if not (math.isfinite(x) and math.isfinite(y)) or x in (0.0, 1.0) or y == 0.0:
        return r  # CPython's special cases, not the C library's pow
    return math.copysign(correctly_rounded_pow(x, y), r)


from crpow import correctly_rounded_pow  # test/support/crpow.py


def flagging(f):
    def g(a, b):
        r = f(a, b)
        if isinstance(r, complex):
            _complex_seen[0] = True
        return r
    return g


def run(expr, pow_fn):
    tools._BINOPS[ast.Pow] = flagging(pow_fn)
    try:
        return tools.calc(expr)
    except Exception:  # raised outside calc's try: a documented deviation
        return None
    finally:
        tools._BINOPS[ast.Pow] = _ORIG_POW


CASES = [
    # integers, big integers, exactness
    "1+2", "2*3", "7-10", "0", "00", "0_0", "1_000_000", "123456789*987654321",
    "2**64", "2**100", "-2**63", "3**200", "10**50+1", "(10**30+7)*(10**30-7)",
    "99999999999999999999999999999*99999999999999999999999999999",
    "2**53+1", "2**1000//3**500", "2**14284", "-2**14283", "10**4299", "10**4299*9",
    "12345678901234567890123456789012345678901234567890 % 97",
    "0x10", "0X1F", "0o17", "0b101", "0b1_0", "0x_ff", "0xDEAD_BEEF", "0o7_7",
    # float formatting edge cases
    "1e16", "1e15", "1e-5", "1e-4", "0.0001", "0.00001", "1.5e300", "1e22", "1e23",
    "0.1+0.2", "1/3", "2/3", "2**0.5", "10/4", "10/5", "-0.0", "0.0", "-0.5", "0.5",
    "1/7", "100/3", "1e308*10", "-1e308*10", "1e999", "-1e999", "1e999-1e999", "1e999*0",
    "5e-324", "5e-324/2", "2.5e-310", "1.7976931348623157e308", "123456789.123456789",
    "9007199254740993.0", "4042.0", "4042.5", "1e16+1", "0.1*3", "1.1*1.1", "3.14159",
    "1.", ".5", "1.e2", "1_0.5", "1e1_0", "1E+05", "09.5", "0001.5", "00.0", "1e-320",
    "12345678901234567.0", "0.30000000000000004", "1/1e-300", "1e300*1e10", "2.0**1023",
    "2.0**-1074", "2.0**-1075", "1e-7", "123e-20", "1.5e-7*2", "7e-5", "-7e-5",
    "10**16/1", "10**15/7", "10**22/7", "2**53/3", "1/2**1074", "1/2**1075", "3/2**1075",
    # integer / float mixing and overflow
    "10**400/3", "10**400/10**399", "1/10**400", "-1/10**400", "1.5+10**400", "10**400*1.0",
    "10**308*10.0", "2**1024*1.0", "2**1023*1.0", "(2**1024-2**970)*1.0",
    "(2**1024-2**971)*1.0", "(2**1024-2**970-1)*1.0", "2**-(10**400)", "2.0**(10**400)",
    "(10**400)**0.5", "10**400//0.5", "10**400%7.0", "10**309/10**308", "3*10**308/10",
    "2**2000/2**1990", "(2**2000+1)/2**1990", "(2**53+1)/2", "(2**54+3)/2", "0/-5",
    "0/5", "-0/5", "0.0/-5", "(-0.0)//1", "(-0.0)%1",
    # division and modulo: errors
    "1/0", "1.0/0", "1/0.0", "0/0", "1//0", "1%0", "1.0//0", "1.0%0", "1//0.0", "1%0.0",
    "0**-1", "0.0**-1", "0**-1.5", "0.0**-0.5", "(0-0)**-2", "10**400/0", "1e999/0",
    # floor division and modulo sign combinations
] + [f"{a}{op}{b}" for op in ("//", "%", "/")
     for a in ("7", "-7", "(0-7)", "7.5", "-7.5", "0", "-0.0", "6", "1e300", "1e-300")
     for b in ("2", "-2", "(0-2)", "2.5", "-2.5", "0.5", "3", "1e-300", "1e999", "-1e999")] + [
    "-7//2", "7//-2", "-7%2", "7%-2", "-7%-2", "5.0%-0.0", "1e999%2", "-1e999//3", "2%1e999",
    "-2%1e999", "2//1e999", "-2//1e999", "0.1%0.01", "1%0.1", "-1%0.1", "3.5//0.1",
    "10**20%7", "-(10**20)%7", "10**20//-7", "-10**20//-7", "2**100%3.0", "1e16%3",
    # powers
    "2**-1", "2**-2", "10**-3", "(-2)**-1", "(-2)**3", "(-2)**-3", "(0-2)**2", "-2**2",
    "2**3**2", "(2**3)**2", "2**-1**2", "(-1)**(10**100)", "1**(10**100)", "0**(10**100)",
    "0**0", "0.0**0", "2**0.5", "2.0**0.5", "4**0.5", "8**(1/3)", "1.5**2", "1.5**34",
    "3.0**34", "10.0**23", "10**-23", "2.5**23", "25.0**11.5", "0.5**1074", "0.5**1075",
    "2.0**10000", "(-2.0)**10001", "1e308**2", "(-1e308)**3", "1e-308**2", "10**0.5",
    "1.0001**10000", "0.9**7000", "1.5**-1800", "1e999**0", "1e999**-1", "(-1e999)**3",
    "(-1e999)**2", "(-1e999)**-3", "1**1e999", "2**1e999", "0.5**1e999", "2**-1e999",
    "(1e999-1e999)**0", "(1e999-1e999)**2", "1**(1e999-1e999)", "2**(1e999-1e999)",
    "(-8)**2.0", "(-8.0)**3", "(-1)**0.0", "(-1.0)**1e300", "(-2.0)**-1075", "7**-1",
    "(10**400)**-1", "2**1.5", "3**2.5", "1.1**10", "1.05**12", "100**-0.5", "2**-0.5",
    # precedence, associativity, unary
    "1+2*3", "(1+2)*3", "1-2-3", "1-(2-3)", "2*3/4", "2/3*4", "8/4/2", "8//3*3", "7%4*2",
    "-3**2", "(-3)**2", "--3", "-+-3", "+-+1", "- - 1", "-(-(1))", "2*-3", "2**-3**2",
    "-2**-2", "1+-1", "1--1", "3*-1**2", "10-2**3*4", "((((1))))", "(1)+(2)",
    # whitespace (strip, tabs, form feeds, newlines in parens, comments, continuations)
    "  1 + 2  ", "\t1\t+\t2\t", "\n1+2\n", " \r\n 3*3 \r\n", "1\x0c+2", "(1 +\n 2)",
    "(1 +\r\n 2)", "1 + \\\n 2", "1 # comment", "1\n# comment", "\\\n1", "\x1c1+2\x1f",
    "\u30001+2\u3000", "\xa01+2\xa0", "\x851\x85",
    # disallowed nodes and non-numeric constants (the walk's order decides which error)
    "x", "x+1", "1+x", "1/0+x", "x+1/0", "abs(1)", "(1)(2)", "1.(2)", "(1).real",
    "1 .real", "1<2", "1==1", "1 and 2", "not 1", "~1", "1@2", "1<<2", "1>>1", "1&1",
    "1|1", "1^1", "(1/0)@2", "(1/0)<<2", "[1]", "[]", "()", "(1,)", "1,", "1,2", "{1}",
    "{}", "{1:2}", "[x for x in y]", "(x for x in y)", "{x for x in y}", "{x:1 for x in y}",
    "(x:=1)", "lambda: 1", "1 if 2 else 3", "1if 1else 2", "0xfor 1", "'a'", "b'a'",
    "'a' 'b'", "f'a'", "f'{1}'", "'1'+1", "1+'1'", "None", "None+1", "1j", "1+1j", "1J",
    "...", "1+...", "(1/0)+...", "a[1]", "a[1:2]", "await x", "(yield)", "(yield 1)",
    "(yield from x)", "-x", "-(1<2)", "+None", "-(1,)", "2**x", "x**2", "(1/0)**x",
    "1e5j", "print(1)", "__import__('os')", "().__class__", "1 is 1", "1 in [1]",
    "1 not in []", "[*a]", "{**a}", "f(*a, **k)", "f(a=1)",
    # runtime error order: left before right
    "1/0 + 1%0", "1%0 + 1/0", "1.0//0 - 1/0", "(1/0)*(x)", "2**-1/0", "0**-1 + 1/0",
    "10**400*1.0 + 1/0", "1/0 - 10**400*1.0",
    # syntax errors (messages differ by design; both are CalcErrors)
    "", "   ", "1+", "(1", "1)", "1 2", "01", "0_", "1__0", "1_", "1e", "1e+", "0x", "0b2",
    "0o8", "1.__class__", "$", "1 +* 2", "**2", "*1", "(*1)", "f'{}'", "f'{'", "f'}'",
    "'abc", "1\n2", "  1\n  2", "1+\\", "1\x00", "\ufeff1", "1\xa0+2", "1;2", "1=1",
    "a := 1", "f(1=2)", "f(a=1, b)", "[x for f() in y]", "lambda a=1, b: 0", "b'\xe9'",
    "'\\x1'", "b'a' 'b'", "'\\N{}'", "(" * 201 + "1" + ")" * 201, "yield 1", "await",
]


def main():
    seen = set()
    out = []
    for expr in CASES:
        if expr in seen:
            continue
        seen.add(expr)
        _complex_seen[0] = False
        ref = run(expr, _ORIG_POW)
        cr = run(expr, cr_pow)
        if ref is None or _complex_seen[0]:
            continue
        case = {"expr": expr, "out": ref}
        try:
            ast.parse(expr.strip(), mode="eval")
        except Exception:
            case["syntax"] = True  # the port answers with a CalcError of its own wording
        if cr != ref:
            case["crPow"] = cr
        out.append(case)
    data = {"python": sys.version.split()[0], "cases": out}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calc_cases.json")
    with open(path, "w", encoding="utf-8") as f:  # one case a line, for readable diffs
        f.write('{"python": %s, "cases": [\n' % json.dumps(data["python"]))
        f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in out))
        f.write("\n]}\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
