"""numpy's scalar semantics that plain arithmetic does not give: NaN-propagating max/min,
integer division, remainder and power by zero or negatives, saturating float -> int casts. Written once in plain Python;
each backend compiles them for its own target (numba_cpu/helpers.py, numba_cuda/devicefns.py)."""


def maximum(a, b):
    return a if (a >= b or a != a) else b


def minimum(a, b):
    return a if (a <= b or a != a) else b


def int_div(a, b):
    if b == 0:
        return a - a               # numpy gives 0; `a - a` keeps the operand's integer type
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def int_fmod(a, b):
    if b == 0:
        return a - a
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


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
    if b < 0:
        return 1 if a == 1 else ((1 if b % 2 == 0 else -1) if a == -1 else 0)
    r = 1
    for _ in range(b):
        r *= a
    return r
