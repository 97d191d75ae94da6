"""The handler registry: one function per (domain, op type, since_version), chosen by the
model's opset as the newest handler not newer than it.

A handler is registered at every ONNX schema version whose semantics it implements, so a
newer schema version (a release of onnx we have not read yet) is never silently run by an
older handler: `lookup` refuses a node whose schema is newer than its handler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import UnsupportedOp
from ..registry import Registry

if TYPE_CHECKING:
    from .node import Node

Handler = Callable[["Node"], object]

HANDLERS: Registry[tuple[str, str, int], Handler] = Registry(
    "ONNX handler", UnsupportedOp, describe=lambda k: f"{k[0] + '::' if k[0] else ''}{k[1]} version {k[2]}")
ONNX_DOMAINS = ("", "ai.onnx")


def onnx_op(op_type: str, *versions: int, domain: str = "") -> Callable[[Handler], Handler]:
    """Registers the decorated handler for `op_type` at each schema since_version in `versions`."""
    if not versions:
        raise ValueError(f"onnx_op({op_type!r}) needs at least one since_version")

    return HANDLERS.register(*((domain, op_type, v) for v in versions))


def canonical_domain(domain: str) -> str:
    """The default ONNX domain as "" whichever way a model spells it."""
    return "" if domain in ONNX_DOMAINS else domain


def versions_of(op_type: str, domain: str = "") -> list[int]:
    """The since_versions at which `op_type` has a handler, oldest first."""
    return sorted(v for d, t, v in HANDLERS if d == domain and t == op_type)


def lookup(op_type: str, domain: str, opset: int) -> Handler:
    """The handler for `op_type` in a model importing `domain` at version `opset`."""
    domain = canonical_domain(domain)
    versions = [v for v in versions_of(op_type, domain) if v <= opset]
    where = f"{domain}::{op_type}" if domain else op_type
    if not versions:
        known = versions_of(op_type, domain)
        if known:
            raise UnsupportedOp(f"{where} at opset {opset} is not supported (handlers exist from opset {known[0]})")
        raise UnsupportedOp(f"{where} is not supported by jitlab's ONNX importer")
    since = schema_version(op_type, domain, opset)
    if since is not None and since > versions[-1]:
        raise UnsupportedOp(f"{where} version {since} (opset {opset}) is newer than jitlab's handler "
                            f"(version {versions[-1]})")
    return HANDLERS[(domain, op_type, versions[-1])]


def schema_version(op_type: str, domain: str, opset: int) -> int | None:
    """The since_version of the ONNX schema `op_type` has at `opset`, if onnx knows the op."""
    import onnx.defs

    try:
        return onnx.defs.get_schema(op_type, opset, domain).since_version
    except onnx.defs.SchemaError:
        return None
