"""The one Registry behind jitlab's decorator tables: duplicates and unknown keys give the
same errors everywhere, with the closest known key."""

import pytest

import jitlab as jl
from jitlab.errors import RegistryError, UnknownNameError, UnknownOpError
from jitlab.registry import Registry


def test_a_key_registered_twice_is_refused_and_the_first_entry_kept():
    table = Registry("widget")
    first = table.register("a", "b")(lambda: 1)
    with pytest.raises(RegistryError, match="widget 'b' is registered twice"):
        table.add("b", "other")
    assert table == {"a": first, "b": first}
    assert issubclass(RegistryError, ValueError) and issubclass(RegistryError, jl.JitlabError)


def test_an_unknown_key_names_the_closest_and_lists_the_known():
    table = Registry("pass")
    table.add("canonicalize", 1)
    table.add("cse", 2)
    with pytest.raises(UnknownNameError, match=r"unknown pass 'canonicalise' \(did you mean canonicalize\?\); "
                                               "known passes: canonicalize, cse") as info:
        table.lookup("canonicalise")
    assert isinstance(info.value, KeyError) and str(info.value).startswith("unknown pass")
    assert table.lookup("cse") == 2


def test_a_registry_may_raise_its_own_error_and_describe_keys():
    table = Registry("handler", UnknownOpError, listed=False, describe=lambda k: f"{k[0]} version {k[1]}")
    table.add(("Relu", 14), 1)
    with pytest.raises(RegistryError, match="handler Relu version 14 is registered twice"):
        table.add(("Relu", 14), 2)
    with pytest.raises(UnknownOpError, match=r"^unknown handler Relu version 13 \(did you mean Relu version 14\?\)$"):
        table.lookup(("Relu", 13))
    backends = Registry("backend", listed=False)
    with pytest.raises(UnknownNameError, match=r"unknown target 'cpx' \(did you mean cpu\?\)$"):
        backends.lookup("cpx", known=["cpu", "cuda"], what="target")


def test_unknown_op_names_suggest_within_the_dialect():
    with pytest.raises(UnknownOpError, match=r"unknown op 'np.expp' \(did you mean np.exp\?\)$"):
        jl.ir.opdef.get_opdef("np.expp")
    with pytest.raises(UnknownOpError, match="op names are 'dialect.op'"):
        jl.ir.opdef.get_opdef("exp")
    with pytest.raises(RegistryError, match="op 'np.exp' is registered twice"):
        jl.ir.opdef.register(jl.ir.opdef.get_opdef("np.exp"))


def test_every_decorator_table_is_a_registry_and_refuses_a_second_entry():
    from jitlab import cli
    from jitlab.autodiff import registry as autodiff
    from jitlab.backends import base, indexing
    from jitlab.backends.numba_cpu import fastmath, scalar
    from jitlab.bench import models
    from jitlab.dialects import reference
    from jitlab.frontend import numpy_api
    from jitlab.ir import opdef
    from jitlab.onnx import ops  # noqa: F401  (registers the handlers)
    from jitlab.onnx import registry as onnx
    from jitlab.passes import manager, rules

    base.get_backend("numba_cpu")       # loads the built-in backends

    tables = [opdef._REGISTRY, manager.PASSES, rules.RULES, base.BACKENDS, reference.HANDLERS, numpy_api.FUNCTIONS,
              onnx.HANDLERS, autodiff.CLAIMS, scalar.SCALAR_RULES, indexing.INDEX_RULES, fastmath.TABLE,
              models.MODELS, cli.COMMANDS]
    for table in tables:
        assert isinstance(table, Registry) and table, table
        key = next(iter(table))
        with pytest.raises(RegistryError, match=f"^{table.what} .* is registered twice$"):
            table.add(key, None)
        assert table[key] is not None
