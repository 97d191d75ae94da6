"""`Registry`: the table behind each of jitlab's decorator registries (ops, passes,
backends, interpreter handlers, gradient rules, ONNX handlers, kernel rules...).

A registry is a dict from a key (a name, or a tuple) to what was registered, so reading
it stays plain dict access. Registering through it refuses a key registered before, and
`lookup` answers a missing key with one error naming the closest known key. It sits at
the bottom of the package: it imports nothing from jitlab but the errors.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from difflib import get_close_matches
from typing import Generic, TypeVar

from .errors import RegistryError, UnknownNameError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Registry(dict[K, V], Generic[K, V]):
    """Entries by key. `what` names one entry in messages ("pass", "op"); `unknown` is the
    error a failed lookup raises; `listed` says whether that error lists every known key."""

    def __init__(self, what: str, unknown: type[Exception] = UnknownNameError, listed: bool = True,
                 describe: Callable[[K], str] = repr):
        super().__init__()
        self.what, self.unknown, self.listed, self.describe = what, unknown, listed, describe

    def add(self, key: K, value: V) -> V:
        """Registers `value` under `key`, refusing a key registered before."""
        if key in self:
            raise RegistryError(f"{self.what} {self.describe(key)} is registered twice")
        self[key] = value
        return value

    def register(self, *keys: K) -> Callable[[V], V]:
        """Decorator: registers the decorated object under each of `keys`."""

        def decorate(value: V) -> V:
            for key in keys:
                self.add(key, value)
            return value

        return decorate

    def lookup(self, key: K, known: Iterable | None = None, what: str | None = None) -> V:
        """The entry under `key`, or the registry's error naming the closest of `known` (its keys
        unless given) and listing them; `what` overrides the entry's name in that message."""
        try:
            return self[key]
        except KeyError:
            raise self.unknown(self.unknown_message(key, known, what)) from None

    def close_match(self, key: K, known: Iterable | None = None) -> str | None:
        """The known key spelt most like `key`, if any is close."""
        match = get_close_matches(self._text(key), [self._text(k) for k in (self if known is None else known)], n=1)
        return match[0] if match else None

    def unknown_message(self, key: K, known: Iterable | None = None, what: str | None = None) -> str:
        known = sorted(self._text(k) for k in (self if known is None else known))
        close = self.close_match(key, known)
        what = what or self.what
        return (f"unknown {what} {self.describe(key)}" + (f" (did you mean {close}?)" if close else "")
                + (f"; known {_plural(what)}: {', '.join(known)}" if self.listed else ""))

    def _text(self, key) -> str:
        return key if isinstance(key, str) else self.describe(key)


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")
