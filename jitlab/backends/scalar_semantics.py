"""numpy's scalar semantics that plain arithmetic does not give: NaN-propagating max/min,
integer division, remainder and power by zero, -1 or negatives, float floor division and remainder
(npy_divmod), saturating float -> int casts, the magnitude of a complex number. Written once in plain Python;
each backend compiles them for its own target (numba_cpu/helpers.py, numba_cuda/devicefns.py)."""

import math


def maximum(a, b):
    return a if (a >= b or a != a) else b


def minimum(a, b):
    return a if (a <= b or a != a) else b


def int_div(a, b):
    """C's truncating integer division (ONNX Div): 0 for a zero divisor, MIN / -1 wraps to MIN.
    Built on floor division, never on abs(): abs(MIN) overflows back to MIN in a narrow int type."""
    if b == 0:
        return a - a               # numpy gives 0; `a - a` keeps the operand's integer type
    if b < 0 and b == -1:
        return -a
    q = a // b
    return q + 1 if (a % b != 0 and (a < 0) != (b < 0)) else q


def int_fmod(a, b):
    """C's remainder (the dividend's sign), 0 for a zero or -1 divisor."""
    if b == 0 or (b < 0 and b == -1):
        return a - a
    r = a % b
    return r - b if (r != 0 and (r < 0) != (a < 0)) else r


def float_to_int_with(trunc):
    """Saturating float -> int (NaN -> 0) built on the backend's own `trunc`; lo/hi are the int
    range as floats, imin/imax as ints."""
    def float_to_int(x, lo, hi, imin, imax):
        t = trunc(x)
        if t != t:
            return imin - imin
        if t >= hi:
            return imax
        if t <= lo:
            return imin
        return type(imax)(t)

    return float_to_int


def int_pow(a, b):
    """a ** b wrapping as numpy's; a negative b (numpy raises) gives C's integer answer. Every
    return is of a's type: mixing an int64 literal into a uint64 function would make it float64."""
    one = type(a)(1)
    if b < 0:
        return one if a == 1 else ((one if b % 2 == 0 else a) if a == -1 else a - a)
    # By squaring: a loop of b multiplications would run for ages on a huge exponent.
    r, base = one, a
    while b > 0:
        if b & 1:
            r *= base
        base *= base
        b >>= 1
    return r


def int_floor_div(a, b):
    """numpy's integer floor division: 0 for a zero divisor, and MIN // -1 wraps to MIN."""
    if b == 0:
        return a - a
    if b < 0 and b == -1:          # a // -1 would overflow (and trap) at MIN; -a wraps as numpy does
        return -a
    return a // b


def int_mod(a, b):
    """numpy's integer remainder (the divisor's sign): 0 for a zero divisor or a -1 divisor."""
    if b == 0 or (b < 0 and b == -1):
        return a - a
    return a % b


def float_divmod_with(floor, fmod, copysign):
    """numpy's float floor division and remainder (npymath's npy_divmod) built on the backend's own
    `floor`, `fmod` and `copysign`: floor(a / b) rounds a / b first and is off by one where a / b
    rounds up to an integer (7.0 // 0.1 is 69, not 70), and wrong at infinities."""
    def floor_divide(a, b):
        if b == 0:
            return a / b
        mod = fmod(a, b)
        div = (a - mod) / b
        one = type(div)(1)
        if mod != 0 and (b < 0) != (mod < 0):
            div -= one
        if div == 0:
            return copysign(div, a / b)
        floordiv = floor(div)
        return floordiv + one if div - floordiv > type(div)(0.5) else floordiv

    def remainder(a, b):
        mod = fmod(a, b)
        if b == 0:
            return mod
        if mod == 0:
            return copysign(mod, b)
        return mod + b if (b < 0) != (mod < 0) else mod

    return floor_divide, remainder


def complex_abs_with(sqrt):
    """|z| as numpy 2's complex absolute loop computes it (the larger part times sqrt(1 + ratio**2):
    no overflow, and no libm hypot call, which does not vectorize), with C99's hypot at infinities and
    NaNs; built on the backend's own `sqrt`."""
    def complex_abs(z):
        a, b = abs(z.real), abs(z.imag)
        big = a if a > b else b
        small = b if a > b else a
        ratio = small / big
        h = big if small == 0 else big * sqrt(type(a)(1) + ratio * ratio)
        return type(a)(math.inf) if (a == math.inf or b == math.inf) else h

    return complex_abs
