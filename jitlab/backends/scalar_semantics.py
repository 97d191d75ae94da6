"""numpy's scalar semantics that plain arithmetic does not give: NaN-propagating max/min and
integer division, remainder and power by zero or negatives. Written once in plain Python;
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


def int_pow(a, b):
    if b < 0:
        return 1 if a == 1 else ((1 if b % 2 == 0 else -1) if a == -1 else 0)
    r = 1
    for _ in range(b):
        r *= a
    return r
