"""A correctly rounded float pow, the oracle the calculator's float ** is checked against
(CPython's pow comes from the C library and is not always correctly rounded). Used by
test/golden/gen_calc.py and, read as text, by the live differential tests."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction


def correctly_rounded_pow(x, y):
    if y.is_integer() and abs(y) <= 2000:
        return float(Fraction(x) ** int(y))  # Fraction -> float is correctly rounded
    with localcontext() as ctx:
        ctx.prec = 120
        d = (Decimal(y) * Decimal(x).ln()).exp()
    # An exact result (25.0**11.5 = 5**23) may be a tie: round the exact value, not d.
    # x = m * 2**e with m odd; an exact x**y is then a multiple of 2**(e*y).
    fy, fx = Fraction(y), Fraction(x)
    if fy.denominator <= 64 and abs(fy.numerator) <= 4096:
        e = 0
        while fx.denominator > 1 and (fx * 2**-e).denominator > 1:
            e -= 1
        k = max(0, -math.floor(e * y))
        c = Fraction(round(Fraction(d) * 2**k), 2**k)
        if c ** fy.denominator == fx ** fy.numerator:
            return float(c)
    return float(d)
