"""Reverse-mode differentiation as an IR transform: the VJP rule table, the `grad` pass
and `jl.grad` / `jl.value_and_grad`."""

from . import rules  # noqa: F401  (fills the VJP table)
from .api import GradFunction, grad, value_and_grad
from .registry import NO_GRADIENT, VJPS, Primal, no_gradient, rule_for, vjp
from .transform import Grad, append_grads, backward, grad_program

__all__ = ["NO_GRADIENT", "VJPS", "Grad", "GradFunction", "Primal", "append_grads", "backward", "grad",
           "grad_program", "no_gradient", "rule_for", "value_and_grad", "vjp"]
