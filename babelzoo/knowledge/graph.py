"""A knowledge base on a networkx ``MultiDiGraph``: :class:`GraphKB`, with per-language names of
its entities and relations. The files it reads are described in :mod:`babelzoo.knowledge.graph_files`
(triples and names, TSV or JSONL) and :mod:`babelzoo.knowledge.kb_layouts` (the folder layouts
:func:`~babelzoo.knowledge.kb_layouts.read_kb` recognises).

A triple repeated in the input is one fact: it is stored once and counted in ``kb.stats``.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Iterable, Optional

from .base import KBError, Triple
from .graph_files import read_names, read_triples

UNDETERMINED = "und"  # BCP-47 "undetermined language": names that belong to no one language
SPLITS = ("train", "valid", "test")


class GraphKB:
    """A knowledge base stored as a networkx ``MultiDiGraph`` (edge key = relation id) plus
    per-language names. Implements :class:`~babelzoo.knowledge.base.KnowledgeBase`.

        kb = GraphKB("toy")
        kb.add_label("Q17", "en", "Japan")
        kb.add_triple("Q17", "currency", "Q8146")   # with on_unknown="add" semantics
    """

    def __init__(self, name: str = "graph"):
        import networkx as nx

        self.name = name
        self.graph = nx.MultiDiGraph()
        # lang -> entity -> {label: None, alias: None, ...}: an insertion-ordered set, so adding a
        # name is O(1) however many an entity has
        self._names: dict[str, dict[str, dict[str, None]]] = {}
        self._relation_names: dict[str, dict[str, dict[str, None]]] = {}
        self._relations: dict[str, None] = {}  # insertion-ordered set
        self.splits: dict[str, list[Triple]] = {}  # train/valid/test when read from a split layout
        self.negatives: dict[str, list[Triple]] = {}  # known-false triples (CoDEx hard negatives)
        self.stats: dict[str, int] = {"duplicate_triples": 0}
        # added to an entity's linking prior by its type: ranks ambiguous names (see linker.py)
        self.type_prior: dict[str, float] = {}

    # --- building -----------------------------------------------------------------------------
    def add_entity(self, entity: str, type: Optional[str] = None) -> None:
        _check_id(entity, "entity")
        if entity not in self.graph:
            self.graph.add_node(entity)
        if type is not None:
            self.graph.nodes[entity]["type"] = type

    def add_relation(self, relation: str) -> None:
        _check_id(relation, "relation")
        self._relations.setdefault(relation, None)

    def add_triple(self, head: str, relation: str, tail: str) -> bool:
        """Add a fact, creating unseen entities and relations. Returns False for a duplicate."""
        for value, what in ((head, "head"), (relation, "relation"), (tail, "tail")):
            _check_id(value, what)
        self.add_entity(head)
        self.add_entity(tail)
        self.add_relation(relation)
        if self.graph.has_edge(head, tail, key=relation):
            self.stats["duplicate_triples"] += 1
            return False
        self.graph.add_edge(head, tail, key=relation)
        return True

    def add_label(self, entity: str, lang: str, name: str, preferred: bool = False) -> None:
        """Add a name of ``entity`` in ``lang``; ``preferred`` puts it first (the label)."""
        self.add_entity(entity)
        _add_name(self._names, entity, lang, name, preferred)

    def add_relation_label(self, relation: str, lang: str, name: str, preferred: bool = False) -> None:
        self.add_relation(relation)
        _add_name(self._relation_names, relation, lang, name, preferred)

    # --- the KnowledgeBase protocol -----------------------------------------------------------
    def entities(self) -> list[str]:
        return list(self.graph.nodes)

    def relations(self) -> list[str]:
        return list(self._relations)

    def triples(self, head: Optional[str] = None, relation: Optional[str] = None,
                tail: Optional[str] = None) -> list[Triple]:
        if head is not None and head not in self.graph or tail is not None and tail not in self.graph:
            return []
        if head is not None:
            edges = self.graph.out_edges(head, keys=True)
        elif tail is not None:
            edges = self.graph.in_edges(tail, keys=True)
        else:
            edges = self.graph.edges(keys=True)
        return [Triple(h, r, t) for h, t, r in edges
                if (relation is None or r == relation) and (tail is None or t == tail)]

    def labels(self, entity: str, lang: Optional[str] = None) -> list[str]:
        return _names_of(self._names, entity, lang)

    def relation_labels(self, relation: str, lang: Optional[str] = None) -> list[str]:
        return _names_of(self._relation_names, relation, lang)

    def label(self, entity: str, lang: str = "en", fallback: Iterable[str] = ("en", UNDETERMINED)) -> str:
        """The preferred name in ``lang``, else in the first ``fallback`` language that has one,
        else the id itself."""
        for code in (lang, *fallback):
            names = self._names.get(code, {}).get(entity)
            if names:
                return next(iter(names))
        return entity

    def entity_text(self, entity: str, lang: str = "en") -> str:
        """The text a text model reads for ``entity``: its ``text`` attribute (a name and a
        description, as a text KG gives them), else its label (:meth:`label`)."""
        text = self.graph.nodes[entity].get("text") if entity in self.graph else None
        return text if text else self.label(entity, lang)

    def entity_name(self, entity: str, lang: str = "en") -> str:
        """The entity's short name: its ``name`` attribute (a text KG's ``name, description``
        gives it), else its label (:meth:`label`)."""
        name = self.graph.nodes[entity].get("name") if entity in self.graph else None
        return name if name else self.label(entity, lang)

    def relation_label(self, relation: str, lang: str = "en",
                       fallback: Iterable[str] = ("en", UNDETERMINED)) -> str:
        for code in (lang, *fallback):
            names = self._relation_names.get(code, {}).get(relation)
            if names:
                return next(iter(names))
        return relation.replace("_", " ")

    def aliases(self, lang: Optional[str | Iterable[str]] = None) -> dict[str, list[str]]:
        """Name → candidate entities, for one language, several, or (None) all. Language-neutral
        names are filed under ``und``: ask for them explicitly (``aliases(["en", "und"])``). A
        name shared by several entities keeps them all, in order of first appearance."""
        langs = list(self._names) if lang is None else [lang] if isinstance(lang, str) else list(lang)
        out: dict[str, list[str]] = {}
        for code in langs:
            for entity, names in self._names.get(code, {}).items():
                for name in names:
                    candidates = out.setdefault(name, [])
                    if entity not in candidates:
                        candidates.append(entity)
        return out

    def neighbors(self, entity: str, hops: int = 1) -> set[str]:
        if entity not in self.graph:
            raise KBError(f"unknown entity {entity!r} in knowledge base {self.name!r}")
        seen, frontier = {entity}, deque([(entity, 0)])
        while frontier:
            node, depth = frontier.popleft()
            if depth == hops:
                continue
            for nxt in (*self.graph.successors(node), *self.graph.predecessors(node)):
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append((nxt, depth + 1))
        seen.discard(entity)
        return seen

    # --- extras ------------------------------------------------------------------------------
    def languages(self) -> list[str]:
        return sorted(self._names)

    def label_counts(self) -> dict[str, tuple[int, int]]:
        """Language → (entities named in it, names in it)."""
        return {lang: (len(table), sum(len(names) for names in table.values()))
                for lang, table in sorted(self._names.items())}

    def entity_type(self, entity: str) -> Optional[str]:
        return self.graph.nodes[entity].get("type") if entity in self.graph else None

    def degree(self, entity: str) -> int:
        return self.graph.degree(entity) if entity in self.graph else 0

    def __contains__(self, entity: object) -> bool:
        return entity in self.graph

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def __repr__(self) -> str:
        return (f"GraphKB({self.name!r}: {len(self)} entities, {len(self._relations)} relations, "
                f"{self.graph.number_of_edges()} triples, {len(self._names)} languages)")

    # --- serialisation (plain JSON: a cache never executes code) ----------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name,
                "entities": [[e, dict(self.graph.nodes[e])] for e in self.graph.nodes],
                "relations": self.relations(),
                "triples": [list(t) for t in self.triples()],
                "names": _as_lists(self._names), "relation_names": _as_lists(self._relation_names),
                "splits": {k: [list(t) for t in v] for k, v in self.splits.items()},
                "negatives": {k: [list(t) for t in v] for k, v in self.negatives.items()},
                "type_prior": self.type_prior}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "GraphKB":
        kb = cls(data["name"])
        for entity, attributes in data["entities"]:
            kb.add_entity(entity)
            kb.graph.nodes[entity].update(attributes)
        for relation in data["relations"]:
            kb.add_relation(relation)
        for h, r, t in data["triples"]:
            kb.add_triple(h, r, t)
        kb._names = {lang: {e: dict.fromkeys(n) for e, n in names.items()} for lang, names in data["names"].items()}
        kb._relation_names = {lang: {e: dict.fromkeys(n) for e, n in names.items()}
                              for lang, names in data["relation_names"].items()}
        kb.splits = {k: [Triple(*t) for t in v] for k, v in data.get("splits", {}).items()}
        kb.negatives = {k: [Triple(*t) for t in v] for k, v in data.get("negatives", {}).items()}
        kb.type_prior = dict(data.get("type_prior", {}))
        return kb

    @classmethod
    def from_files(cls, triples: str | Path | Iterable[str | Path], entities: str | Path | None = None,
                   relations: str | Path | None = None, on_unknown: str = "error",
                   name: Optional[str] = None) -> "GraphKB":
        """Read triples (one file or several) plus optional entity and relation name files."""
        paths = [Path(triples)] if isinstance(triples, (str, Path)) else [Path(p) for p in triples]
        kb = cls(name or paths[0].stem)
        declared_entities = read_names(entities, kb, "entity") if entities is not None else None
        declared_relations = read_names(relations, kb, "relation") if relations is not None else None
        for path in paths:
            for t in read_triples(path, kb, declared_entities, declared_relations, on_unknown):
                kb.add_triple(*t)
        return kb


def _check_id(value: Any, what: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise KBError(f"{what} id must be a non-empty string, got {value!r}")


def _add_name(table: dict, key: str, lang: str, name: str, preferred: bool) -> None:
    if not isinstance(name, str) or not name.strip():
        raise KBError(f"name of {key!r} in {lang!r} must be a non-empty string, got {name!r}")
    names = table.setdefault(lang, {}).setdefault(key, {})
    if not preferred:
        names.setdefault(name)
    elif next(iter(names), None) != name:  # the label goes first (a rebuild, once per label)
        rest = [n for n in names if n != name]
        names.clear()
        names.update(dict.fromkeys([name, *rest]))


def _as_lists(table: dict) -> dict[str, dict[str, list[str]]]:
    return {lang: {key: list(names) for key, names in entries.items()} for lang, entries in table.items()}


def _names_of(table: dict, key: str, lang: Optional[str]) -> list[str]:
    if lang is not None:
        return list(table.get(lang, {}).get(key, ()))
    out: list[str] = []
    for names in table.values():
        out.extend(n for n in names.get(key, ()) if n not in out)
    return out
