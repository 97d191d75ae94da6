"""Elementwise ops as CUDA scalar expressions: the CPU rules, with numpy's scalar functions
spelled as the device functions of `devicefns` (numba.cuda has no numpy ufuncs on scalars).

The CPU rules already keep numpy's semantics (dtype wrapping, integer division by zero,
saturating casts); only the names of the functions they call change. Operands are
variable names or literals, so renaming whole `np.<fn>(` tokens is exact.
"""

from __future__ import annotations

import re

from ..numba_cpu.scalar import SCALAR_RULES, Rule

DEVICE_NAMES = {f"np.{n}": f"_{n}" for n in (
    "exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt", "tanh", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "arctan2", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc",
    "rint", "isnan", "isinf", "isfinite", "power", "fmod", "sign")}
_CALL = re.compile(r"\bnp\.(\w+)\(")


# The complex forms: cmath's functions on the device (math's take only reals).
COMPLEX_DEVICE_NAMES = {**DEVICE_NAMES, "np.exp": "_cexp", "np.log": "_clog", "np.sqrt": "_csqrt"}


def _device_spelling(expr: str, names: dict[str, str] = DEVICE_NAMES) -> str:
    return _CALL.sub(lambda m: names.get(f"np.{m.group(1)}", m.group(0)[:-1]) + "(", expr)


def _on_device(rule: Rule) -> Rule:
    def device_rule(a, attrs, t):
        t.host_math = False          # the CPU's intrinsics and fastmath table do not exist on the device
        names = COMPLEX_DEVICE_NAMES if t.out.startswith("complex") else DEVICE_NAMES
        return _device_spelling(rule(a, attrs, t), names)

    return device_rule


CUDA_RULES: dict[str, Rule] = {name: _on_device(rule) for name, rule in SCALAR_RULES.items()}
