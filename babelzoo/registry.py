"""One small generic registry: a name → object table with decorator registration,
wildcard listing and close-match errors.

Every pluggable kind of part in babelzoo (model architectures, objectives, knowledge-base
backends, benchmark tasks) is a :class:`Registry` instance, so they all behave the same way::

    MODELS = Registry("model")

    @MODELS.register
    def xlmr_tiny():
        ...

    MODELS.list("xlm*")   # ['xlm_base', 'xlm_tiny', 'xlmr_base', 'xlmr_tiny']
    MODELS.get("xlmr_tiy")  # KeyError: unknown model 'xlmr_tiy'; did you mean 'xlmr_tiny'?
"""

from __future__ import annotations

import difflib
import fnmatch
from typing import Generic, Iterator, TypeVar

from .errors import BabelzooError

T = TypeVar("T")


class RegistryError(BabelzooError, KeyError):
    """An unknown or duplicate registry name. Subclasses KeyError so ``except KeyError`` works."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """A named table of objects (usually factories or classes) of one kind."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, obj: T | None = None, *, name: str | None = None, replace: bool = False):
        """Register ``obj`` under ``name`` (default: its ``__name__``). Usable as a decorator,
        bare (``@reg.register``) or with arguments (``@reg.register(name="x")``)."""

        def add(o: T) -> T:
            key = name or getattr(o, "registry_name", None) or getattr(o, "__name__")
            if key in self._entries and not replace and self._entries[key] is not o:
                raise RegistryError(f"{self.kind} {key!r} is already registered")
            self._entries[key] = o
            return o

        return add if obj is None else add(obj)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise RegistryError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._entries, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(sorted(self._entries)) or 'none'})"

    def list(self, pattern: str | None = None) -> list[str]:
        """Sorted names, optionally filtered by a shell-style wildcard such as ``"xlm*"``."""
        names = sorted(self._entries)
        return names if pattern is None else [n for n in names if fnmatch.fnmatchcase(n, pattern)]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self._entries)

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._entries[n]) for n in self.list()]
