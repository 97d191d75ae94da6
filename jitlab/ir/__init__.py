"""The IR: types, attributes, values, ops, blocks, regions, programs, text and verifier."""

from .attributes import Dense
from .builder import Builder
from .core import Block, BlockArgument, Location, Operation, OpResult, Region, Use, Value
from .dtypes import dtype_name
from .opdef import ConstraintSet, InferCtx, OpDef, Trait, defop, get_opdef, registered_ops
from .parser import parse
from .printer import print_op, print_program
from .program import Program
from .shapes import Dim, Sym, sym
from .types import TensorType, type_of
from .verifier import verify

__all__ = ["Block", "BlockArgument", "Builder", "ConstraintSet", "Dense", "Dim", "InferCtx",
           "Location", "OpDef", "OpResult", "Operation", "Program", "Region", "Sym", "TensorType",
           "Trait", "Use", "Value", "defop", "dtype_name", "get_opdef", "parse", "print_op",
           "print_program", "registered_ops", "sym", "type_of", "verify"]
