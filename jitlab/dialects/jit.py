"""The `jit` dialect: fused groups. A `jit.group` holds a subgraph in its region and
names the kernel that runs it; `jit.yield` returns the group's results."""

from __future__ import annotations

from ..errors import VerifyError
from ..ir.attributes import INT, SHAPE, STR, Attr
from ..ir.core import Operation
from ..ir.opdef import Trait, defop


def _verify_group(op: Operation) -> None:
    block = op.body
    arg_types = [a.type for a in block.args]
    operand_types = [v.type for v in op.operands]
    if arg_types != operand_types:
        raise VerifyError(f"block argument types ({', '.join(map(str, arg_types))}) differ from the "
                          f"operand types ({', '.join(map(str, operand_types))})")
    yielded = [v.type for v in block.last_op.operands] if block.last_op is not None else []
    results = [r.type for r in op.results]
    if yielded != results:
        raise VerifyError(f"jit.yield gives ({', '.join(map(str, yielded))}) but the group returns "
                          f"({', '.join(map(str, results))})")


GROUP = defop("jit.group", operands=(0, None),
              attrs={"id": Attr(INT, doc="the group's number in its program"),
                     "key": Attr(STR, "", doc="compile-cache key of the group's kernel"),
                     "backend": Attr(STR, "", doc="backend that compiles the group")},
              traits=(Trait.PURE, Trait.ISOLATED), regions=1,
              doc="A fused subgraph compiled into one kernel; block arguments are its operands.")
GROUP.rules["verify"] = _verify_group

YIELD = defop("jit.yield", operands=(0, None), traits=(Trait.TERMINATOR,),
              doc="Ends a group's block; its operands are the group's results.")


def _view_infer(ctx, types, attrs):
    from ..ir.shapes import num_elements

    (t,) = types
    ctx.equal(num_elements(t.shape), num_elements(attrs["shape"]), f"element count of {t} viewed as "
              f"[{','.join(map(str, attrs['shape']))}]")
    return [t.with_shape(attrs["shape"])]


VIEW = defop("jit.view", operands=1, attrs={"shape": Attr(SHAPE, doc="the shape it is seen as")},
             traits=(Trait.PURE, Trait.VIEW), infer=_view_infer,
             reference=lambda x, shape: x.reshape(shape),
             doc="A no-task alias: the operand's buffer seen under another shape; no kernel, no copy.")
