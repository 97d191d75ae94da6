"""Rule sets: named, ordered collections of patterns that a pass applies with the greedy
driver; `RULES` finds any registered rule by name (for the explorer), and `rule_pass`
makes a pass of your own rules, e.g. in a notebook cell."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

from ..errors import PassError
from ..ir.program import Program
from ..registry import Registry
from .manager import Pass, PassContext, register_pass
from .rewriter import Pattern, apply_patterns

RULES: Registry[str, Pattern] = Registry("rule")


class RuleSet:
    """Patterns in the order they were added. The names of a `public` set are unique
    across all public sets and listed in `RULES`."""

    def __init__(self, name: str, public: bool = True):
        self.name, self.public = name, public
        self._patterns: Registry[str, Pattern] = Registry("rule")

    def add(self, *patterns: Pattern) -> Pattern:
        """Adds `patterns`; returns the last."""
        for p in patterns:
            if not p.name:
                raise PassError(f"a pattern of rule set {self.name} has no name")
            if self.public:
                RULES.add(p.name, p)
            self._patterns.add(p.name, p)
        return patterns[-1]

    def __iter__(self) -> Iterator[Pattern]:
        return iter(self._patterns.values())

    def __len__(self) -> int:
        return len(self._patterns)

    def __getitem__(self, name: str) -> Pattern:
        return self._patterns[name]

    def select(self, disable: Iterable[str] = ()) -> list[Pattern]:
        """The patterns minus those named in `disable` (each must exist)."""
        disable = set(disable)
        unknown = disable - set(self._patterns)
        if unknown:
            raise PassError(f"{self.name} has no rule(s) {', '.join(sorted(unknown))}; "
                            f"its rules are {', '.join(self._patterns)}")
        return [p for name, p in self._patterns.items() if name not in disable]


CANONICALIZE = RuleSet("canonicalize")
DECOMPOSE = RuleSet("decompose")


@dataclass
class RewritePass(Pass):
    """A pass that applies a rule set to a fixpoint with the greedy driver."""

    max_iterations: int = 10
    disable: tuple[str, ...] = ()
    rules: ClassVar[RuleSet]

    def patterns(self) -> list[Pattern]:
        return self.rules.select(self.disable)

    def apply(self, program: Program, ctx: PassContext) -> Program:
        apply_patterns(program, self.patterns(), ctx.log, max_iterations=self.max_iterations)
        return program


def rule_pass(name: str, patterns: Iterable[Pattern], summary: str = "") -> type[Pass]:
    """Registers a pass named `name` applying `patterns` (DRR rules or imperative ones)."""
    rules = RuleSet(name, public=False)
    rules.add(*patterns)
    cls = dataclass(type(name.title().replace("-", ""), (RewritePass,),
                         {"name": name, "summary": summary or f"Applies the rules {', '.join(p.name for p in rules)}.",
                          "rules": rules, "__module__": __name__}))
    return register_pass(cls)
