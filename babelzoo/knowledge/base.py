"""The knowledge-base plug-in API: the :class:`KnowledgeBase` protocol, the registry of backends
(third-party ones found through the ``babelzoo.knowledge_bases`` entry-point group, as every
registry finds its plug-ins, :mod:`babelzoo.registry`), and :func:`load_kb`.

A backend is a callable (function or class) that returns an object following the protocol.
Register one in code::

    from babelzoo.knowledge import register_kb

    @register_kb("my-graph")
    def my_graph(path="graph.tsv"):
        return GraphKB.from_files(path)

or ship it as a package by declaring an entry point (``pyproject.toml``)::

    [project.entry-points."babelzoo.knowledge_bases"]
    my-graph = "my_package.kb:my_graph"

Then ``load_kb("my-graph")`` builds it, and ``load_kb("path/to/folder")`` reads any of the file
layouts documented in :mod:`babelzoo.knowledge.kb_layouts`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Optional, Protocol, runtime_checkable

from ..errors import BabelzooError
from ..registry import Registry, RegistryError

ENTRY_POINT_GROUP = "babelzoo.knowledge_bases"


class KBError(BabelzooError, ValueError):
    """A knowledge-base file, entity or query is invalid. File errors name ``file:line``."""


class Triple(NamedTuple):
    head: str
    relation: str
    tail: str


@runtime_checkable
class KnowledgeBase(Protocol):
    """What every knowledge base offers. Entities and relations are string ids; ``lang`` is a
    BCP-47-style code (``en``, ``de``, ``zh_Hant``); names are plain strings.

    - ``entities()`` / ``relations()``: all ids, in a stable order.
    - ``triples(head=None, relation=None, tail=None)``: facts, optionally filtered.
    - ``labels(entity, lang=None)``: the entity's names in ``lang`` (preferred label first), or in
      every language when ``lang`` is None.
    - ``aliases(lang=None)``: every name → the entities it may denote (an ambiguous name keeps all
      its candidates), for one language, several, or all.
    - ``neighbors(entity, hops=1)``: entities within ``hops`` edges, either direction.
    """

    def entities(self) -> list[str]: ...

    def relations(self) -> list[str]: ...

    def triples(self, head: Optional[str] = None, relation: Optional[str] = None,
                tail: Optional[str] = None) -> list[Triple]: ...

    def labels(self, entity: str, lang: Optional[str] = None) -> list[str]: ...

    def aliases(self, lang: Optional[str | Iterable[str]] = None) -> dict[str, list[str]]: ...

    def neighbors(self, entity: str, hops: int = 1) -> set[str]: ...


# the built-in backends register below; the layers above and installed packages through the group
KNOWLEDGE_BASES: Registry[Callable[..., KnowledgeBase]] = Registry("knowledge base", group=ENTRY_POINT_GROUP,
                                                                   listed_by="babelzoo list kbs")


def register_kb(name: str, replace: bool = False) -> Callable:
    """Decorator: register a knowledge-base factory under ``name``."""
    return KNOWLEDGE_BASES.register(name=name, replace=replace)


def list_kbs(pattern: Optional[str] = None) -> list[str]:
    """Names of registered and installed knowledge bases, optionally filtered by a wildcard."""
    return KNOWLEDGE_BASES.list(pattern)


def load_kb(path_or_name: str | Path, **kwargs: Any) -> KnowledgeBase:
    """Build a registered knowledge base by name (``"cldr"``, ``"codex-s"``, an installed
    plug-in) or read one from a file or folder (see :func:`babelzoo.knowledge.kb_layouts.read_kb`).
    Keyword arguments go to the backend."""
    name = str(path_or_name)
    if not isinstance(path_or_name, Path):
        KNOWLEDGE_BASES.load_plug_ins(name)  # an installed backend of that name, imported now
    if not isinstance(path_or_name, Path) and name in KNOWLEDGE_BASES:
        kb = KNOWLEDGE_BASES.get(name)(**kwargs)
        if not isinstance(kb, KnowledgeBase):
            raise KBError(f"knowledge base {name!r} returned a {type(kb).__name__}, which lacks the "
                          f"KnowledgeBase methods (entities, relations, triples, labels, aliases, neighbors)")
        return kb
    path = Path(path_or_name)
    from .dbp5l import is_dbp5l_graph
    from .id_graphs import is_id_graph

    if path.exists() or is_dbp5l_graph(path) or is_id_graph(path):
        from .kb_layouts import read_kb

        return read_kb(path, **kwargs)
    raise RegistryError(f"{KNOWLEDGE_BASES.unknown_message(name)}; and {name!r} is no file or folder")


# Built-in backends: thin factories so that babel, pycountry and networkx load only when used.

@register_kb("cldr")
def _cldr(**kwargs: Any) -> KnowledgeBase:
    """Territories, languages, currencies, scripts, time zones and subdivisions from Unicode
    CLDR (babel) and ISO 3166 (pycountry), with names in every CLDR locale."""
    from .cldr import load_cldr

    return load_cldr(**kwargs)


def _codex(size: str) -> Callable[..., KnowledgeBase]:
    def factory(**kwargs: Any) -> KnowledgeBase:
        from .codex import load_codex

        return load_codex(size=size, **kwargs)

    factory.__doc__ = f"CoDEx-{size.upper()} (Safavi & Koutra, 2020), Wikidata triples with train/valid/test splits."
    return factory


for _size in ("s", "m", "l"):
    KNOWLEDGE_BASES.register(_codex(_size), name=f"codex-{_size}")


@register_kb("wn18rr")
def _wn18rr(**kwargs: Any) -> KnowledgeBase:
    """WN18RR (Dettmers et al., 2018) with every entity's lemma and WordNet gloss and every
    relation's words, in the layout KG-BERT publishes."""
    from .text_kg import load_wn18rr

    return load_wn18rr(**kwargs)


def _dbp5l(lang: str) -> Callable[..., KnowledgeBase]:
    def factory(**kwargs: Any) -> KnowledgeBase:
        from .dbp5l import load_dbp5l

        return load_dbp5l(lang, **kwargs)

    factory.__doc__ = (f"DBP-5L's {lang} DBpedia graph (Chen et al., 2020), entities named in their own language, "
                       f"with train/valid/test splits.")
    return factory


for _lang in ("el", "en", "es", "fr", "ja"):
    KNOWLEDGE_BASES.register(_dbp5l(_lang), name=f"dbp5l-{_lang}")
