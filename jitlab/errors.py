"""Every error a user can cause: one base class, one subclass per kind of mistake."""

from __future__ import annotations


class JitlabError(Exception):
    """Base of every error jitlab raises for bad input; never a crash of the process."""


class ParseError(JitlabError):
    """Malformed IR text, with the line and column where reading stopped."""

    def __init__(self, message: str, line: int, column: int, source_line: str = ""):
        self.line, self.column, self.source_line = line, column, source_line
        where = f"line {line}, column {column}: {message}"
        if source_line:
            where += f"\n  {source_line}\n  {' ' * (column - 1)}^"
        super().__init__(where)


class VerifyError(JitlabError):
    """The IR breaks a rule of the verifier; names the op and where it stands."""


class ShapeError(JitlabError):
    """Shapes that do not fit an op, or symbolic constraints that cannot hold."""


class DTypeError(JitlabError):
    """Dtypes an op does not accept."""


class InputError(JitlabError):
    """Arguments at call time do not match the program's signature."""


class OutOfBoundsError(InputError, IndexError):
    """An index out of range at run time, as numpy's IndexError (an InputError too)."""


class UnknownOpError(JitlabError):
    """An op name that no dialect registers."""


class RegistryError(JitlabError, ValueError):
    """A name registered twice in one of jitlab's tables (ops, passes, backends, rules...)."""


class UnknownNameError(JitlabError, KeyError):
    """A name none of a table's entries has (a KeyError too, for code catching those)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsupportedError(JitlabError):
    """Something valid that jitlab cannot (yet) handle; names what and why."""


class UnsupportedOp(UnsupportedError):
    """An op, attribute value or numpy function that jitlab does not support."""


class TraceError(JitlabError):
    """Tracing a Python function failed because of what the function did."""


class PassError(JitlabError):
    """A pass failed or left the IR broken; names the pass."""


class CompileError(JitlabError):
    """A backend could not compile a group or op."""


class OutOfMemoryError(JitlabError):
    """The planned peak memory is over the budget; gives the peak and the largest tensors."""


class PluginError(JitlabError):
    """A backend plugin is broken; names the plugin."""


class ModelError(JitlabError):
    """A model file that cannot be read: corrupt, truncated, or referring to data outside its folder."""


class LongTraceWarning(UserWarning):
    """Tracing has recorded so many ops that compiling will be slow; names the line that made most."""


class CacheWarning(RuntimeWarning):
    """A compile cache entry was not used (corrupt, foreign, or in a folder others may write)."""
