"""A knowledge base on a networkx ``MultiDiGraph``, and the file formats it reads.

File formats (UTF-8; blank lines are skipped, and so are comments: lines whose first character
is ``#``). A ``#`` line that has the fields of a data line with ``#`` glued to its first id
(``#tag<TAB>P1<TAB>Q2``) is ambiguous and refused by line: write ``# `` (hash, space) to comment
a line out; an id that starts with ``#`` is written in a JSONL file (or not first on a TSV line).

- **Triples, TSV**: ``head<TAB>relation<TAB>tail``, exactly three non-empty fields a line.
- **Triples, JSONL**: one ``{"head": h, "relation": r, "tail": t}`` object (or ``[h, r, t]``
  list) a line.
- **Entity names, TSV** (``entities.tsv``): ``id<TAB>lang<TAB>label[<TAB>alias...]``: the label
  is the preferred name in ``lang``, further fields are aliases. Several lines may name the same
  entity (more languages, more aliases).
- **Entity names, JSONL** (``entities.jsonl``), Wikidata-like: ``{"id": "Q17", "type": "country",
  "labels": {"en": "Japan"}, "aliases": {"en": ["Nippon"]}}``; a label may also be written
  ``{"value": "Japan"}`` as in Wikidata dumps.
- **Relation names**: the same two formats in ``relations.tsv`` / ``relations.jsonl``.
- **A folder** holds ``triples.{tsv,txt,jsonl}`` or split files ``train/valid/test.{tsv,txt,jsonl}``,
  with optional ``entities.*`` and ``relations.*`` beside them. The OpenKE layout
  (``entity2id.txt``, ``relation2id.txt``, ``train2id.txt`` [+ ``valid2id.txt``,
  ``test2id.txt``]), the CoDEx layout (:mod:`babelzoo.knowledge.codex`) and the text layout of
  KG-BERT, StAR and SimKGC (``entity2text.txt``, :mod:`babelzoo.knowledge.text_kg`) are
  recognised too, and one graph of a DBP-5L folder, named ``ROOT/LANG``
  (:mod:`babelzoo.knowledge.dbp5l`), or of an entity-alignment folder in the DBP15K layout,
  ``ROOT/1`` or ``ROOT/2`` (:mod:`babelzoo.knowledge.id_graphs`).

Unknown-entity policy: when an entities file declares the entities, a triple naming any other
entity is an error (``file:line``) unless ``on_unknown="add"``, which adds it without names;
with no entities file the triples define the entities. The same holds for relations. A triple
repeated in the input is one fact: it is stored once and counted in ``kb.stats``.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from .._files import refuse_utf16
from .base import KBError, Triple

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


# --- readers -----------------------------------------------------------------------------------

def _lines(path: Path, fields: int = 0, what: str = "", whitespace: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank, non-comment lines of a UTF-8 text file (a leading
    byte-order mark is not part of the first line). A comment starts with ``#`` as its first
    character; one whose ``#`` is glued to the first of ``fields`` fields (tab-separated, or
    whitespace-separated with ``whitespace``) could be a line of ``what`` whose id starts with
    ``#``, and is refused rather than dropped."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                refuse_utf16(path, raw, KBError)
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise KBError(f"{path}:{number}: not UTF-8 text (byte {err.start + 1} of the line: "
                              f"{raw[err.start:err.start + 1]!r})") from None
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            if text.startswith("#"):
                _check_comment(path, number, text, fields, what, whitespace)
                continue
            yield number, text


def _check_comment(path: Path, number: int, text: str, fields: int, what: str, whitespace: bool) -> None:
    if fields < 2 or _is_jsonl(path) or text[1:2].isspace() or text[1:2] in ("", "#"):
        return
    parts = text.split() if whitespace and "\t" not in text else text.split("\t")
    if len(parts) < fields:
        return
    jsonl = "" if whitespace else "; an id that starts with '#' goes in a JSONL file"
    raise KBError(f"{path}:{number}: a line starting with '#' is a comment, but this one has the {len(parts)} "
                  f"fields of {what}, so {parts[0].strip()!r} may be an id: write '# ' (hash, space) to comment a "
                  f"line out{jsonl}")


def _is_jsonl(path: Path) -> bool:
    return path.suffix in (".jsonl", ".json")


def _json_line(path: Path, number: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise KBError(f"{path}:{number}: invalid JSON ({err.msg})") from None


def read_triples(path: str | Path, kb: Optional[GraphKB] = None, entities: Optional[set[str]] = None,
                 relations: Optional[set[str]] = None, on_unknown: str = "error",
                 declared_in: Optional[dict[str, str]] = None) -> list[Triple]:
    """Parse a TSV or JSONL triples file (format in the module docstring). With ``entities`` /
    ``relations`` given (the declared sets), an undeclared id raises unless ``on_unknown="add"``;
    ``declared_in`` names the file that declares each kind (``{"entity": "entity2text.txt"}``)
    for the error."""
    if on_unknown not in ("error", "add"):
        raise KBError(f"on_unknown={on_unknown!r} must be 'error' or 'add'")
    path = Path(path)
    out: list[Triple] = []
    for number, text in _lines(path, 3, "a triple (head, relation, tail)"):
        if _is_jsonl(path):
            item = _json_line(path, number, text)
            if isinstance(item, dict):
                missing = [k for k in ("head", "relation", "tail") if k not in item]
                if missing:
                    raise KBError(f"{path}:{number}: triple object lacks {', '.join(missing)}")
                fields = [item["head"], item["relation"], item["tail"]]
            elif isinstance(item, list):
                fields = item
            else:
                raise KBError(f"{path}:{number}: expected a JSON object or list, got {type(item).__name__}")
        else:
            fields = text.split("\t")
        if len(fields) != 3:
            raise KBError(f"{path}:{number}: expected 3 fields (head, relation, tail), got {len(fields)}: {text!r}")
        fields = [f.strip() if isinstance(f, str) else f for f in fields]
        for value, what in zip(fields, ("head", "relation", "tail")):
            if not isinstance(value, str) or not value:
                raise KBError(f"{path}:{number}: empty or non-string {what} id {value!r}")
        head, relation, tail = fields
        for value, declared, what in ((head, entities, "entity"), (tail, entities, "entity"),
                                      (relation, relations, "relation")):
            if declared is not None and value not in declared:
                if on_unknown == "error" and declared_in:
                    raise KBError(f"{path}:{number}: unknown {what} {value!r}: it has no line in "
                                  f"{declared_in[what]}")
                if on_unknown == "error":
                    raise KBError(f"{path}:{number}: unknown {what} {value!r} (not declared in the {what} "
                                  f"names file); declare it or pass on_unknown='add'")
                declared.add(value)
        out.append(Triple(head, relation, tail))
    return out


def read_names(path: str | Path, kb: GraphKB, kind: str = "entity") -> set[str]:
    """Read an entity (``kind="entity"``) or relation names file into ``kb``; returns the ids it
    declares."""
    path = Path(path)
    add = kb.add_label if kind == "entity" else kb.add_relation_label
    declared: set[str] = set()
    for number, text in _lines(path, 3, f"an {kind} name line (id, lang, label)" if kind == "entity"
                               else f"a {kind} name line (id, lang, label)"):
        if _is_jsonl(path):
            item = _json_line(path, number, text)
            if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not item["id"].strip():
                raise KBError(f"{path}:{number}: expected an object with a non-empty string 'id'")
            unknown = sorted(set(item) - set(NAME_KEYS[kind]))
            if unknown:
                raise KBError(f"{path}:{number}: unknown key(s) {unknown}; {'an' if kind == 'entity' else 'a'} {kind} line takes "
                              f"{', '.join(NAME_KEYS[kind])}")
            ident = item["id"].strip()
            if kind == "entity":
                kind_of = item.get("type")
                if kind_of is not None and (not isinstance(kind_of, str) or not kind_of.strip()):
                    raise KBError(f"{path}:{number}: 'type' must be a non-empty string, got {kind_of!r}")
                kb.add_entity(ident, kind_of)
            else:
                kb.add_relation(ident)
            for lang, value in _mapping(item, "labels", path, number).items():
                add(ident, lang, _name_value(value, path, number), preferred=True)
            for lang, values in _mapping(item, "aliases", path, number).items():
                for value in values if isinstance(values, list) else [values]:
                    add(ident, lang, _name_value(value, path, number))
        else:
            fields = [f.strip() for f in text.split("\t")]
            if len(fields) < 3:
                raise KBError(f"{path}:{number}: expected at least 3 fields (id, lang, label[, alias...]), "
                              f"got {len(fields)}: {text!r}")
            ident, lang, *names = fields
            for value, what in ((ident, "id"), (lang, "language"), (names[0], "label")):
                if not value:
                    raise KBError(f"{path}:{number}: empty {what}")
            for i, name in enumerate(names):
                if not name:
                    raise KBError(f"{path}:{number}: empty alias in field {i + 3}")
                add(ident, lang, name, preferred=i == 0)
        declared.add(ident)
    return declared


NAME_KEYS = {"entity": ("id", "type", "labels", "aliases"), "relation": ("id", "labels", "aliases")}


def _mapping(item: dict, key: str, path: Path, number: int) -> dict:
    value = item.get(key) or {}
    if not isinstance(value, dict):
        raise KBError(f"{path}:{number}: '{key}' must map language codes to names, got {type(value).__name__}")
    return value


def _name_value(value: Any, path: Path, number: int) -> str:
    if isinstance(value, dict):
        value = value.get("value")
    if not isinstance(value, str) or not value.strip():
        raise KBError(f"{path}:{number}: a name must be a non-empty string, got {value!r}")
    return value


def _find(folder: Path, stem: str) -> Optional[Path]:
    for suffix in (".tsv", ".txt", ".jsonl", ".json"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def read_openke(folder: str | Path, name: Optional[str] = None) -> GraphKB:
    """Read the OpenKE layout: ``entity2id.txt`` / ``relation2id.txt`` (a count line, then
    ``name<TAB>id``) and ``train2id.txt`` [+ ``valid2id.txt``, ``test2id.txt``] (a count line,
    then ``head_id tail_id relation_id``: note OpenKE's head-tail-relation order)."""
    folder = Path(folder)
    kb = GraphKB(name or folder.name)
    entities = _read_openke_ids(folder / "entity2id.txt")
    relations = _read_openke_ids(folder / "relation2id.txt")
    for e in entities:
        kb.add_entity(e)
    for r in relations:
        kb.add_relation(r)
    for split in SPLITS:
        path = folder / f"{split}2id.txt"
        if split != "train" and not path.exists():
            continue
        triples = []
        for number, fields in _read_counted(path, 3):
            try:
                h, t, r = (int(f) for f in fields)
            except ValueError:
                raise KBError(f"{path}:{number}: expected three integer ids, got {fields}") from None
            for value, table, what in ((h, entities, "entity"), (t, entities, "entity"), (r, relations, "relation")):
                if not 0 <= value < len(table):
                    raise KBError(f"{path}:{number}: {what} id {value} is out of range "
                                  f"(0..{len(table) - 1} from {what}2id.txt)")
            triples.append(Triple(entities[h], relations[r], entities[t]))
        kb.splits[split] = triples
        for triple in triples:
            kb.add_triple(*triple)
    return kb


def _read_counted(path: Path, width: int) -> list[tuple[int, list[str]]]:
    if not path.exists():
        raise KBError(f"{path}: missing (OpenKE layout needs entity2id.txt, relation2id.txt and train2id.txt)")
    rows = list(_lines(path, width, f"a line of {path.name}", whitespace=True))
    if not rows:
        raise KBError(f"{path}: empty file; expected a count line first")
    number, first = rows[0]
    try:
        count = int(first.strip())
    except ValueError:
        raise KBError(f"{path}:{number}: expected the number of lines, got {first!r}") from None
    body = []
    for number, text in rows[1:]:
        fields = text.split("\t") if "\t" in text else text.split()
        if len(fields) != width:
            raise KBError(f"{path}:{number}: expected {width} fields, got {len(fields)}: {text!r}")
        body.append((number, [f.strip() for f in fields]))
    if len(body) != count:
        raise KBError(f"{path}: the first line says {count} lines, but {len(body)} follow")
    return body


def _read_openke_ids(path: Path) -> list[str]:
    rows = _read_counted(path, 2)
    table: list[Optional[str]] = [None] * len(rows)
    for number, (name, ident) in rows:
        if not name:
            raise KBError(f"{path}:{number}: empty name")
        try:
            index = int(ident)
        except ValueError:
            raise KBError(f"{path}:{number}: expected an integer id, got {ident!r}") from None
        if not 0 <= index < len(rows) or table[index] is not None:
            raise KBError(f"{path}:{number}: id {index} is out of range or repeated (ids must be 0..{len(rows) - 1})")
        table[index] = name
    return table  # type: ignore[return-value]


def read_kb(path: str | Path, on_unknown: str = "error", name: Optional[str] = None) -> GraphKB:
    """Read a knowledge base from a triples file or a folder in any layout named in the module
    docstring."""
    path = Path(path)
    if path.is_file():
        return GraphKB.from_files(path, on_unknown=on_unknown, name=name)
    from .dbp5l import is_dbp5l, is_dbp5l_graph, read_dbp5l

    if is_dbp5l_graph(path):  # ROOT/LANG: one graph of a DBP-5L folder
        return read_dbp5l(path.parent, path.name, name)
    from .id_graphs import is_id_graph, read_id_graph

    if is_id_graph(path):  # ROOT/1, ROOT/2: a graph of an entity-alignment folder (DBP15K)
        return read_id_graph(path.parent, path.name, name)
    if not path.is_dir():
        raise KBError(f"{path}: no such file or folder")
    if is_dbp5l(path):
        raise KBError(f"{path}: a DBP-5L folder holds several graphs: name one as {path}/LANG (LANG one of "
                      f"{', '.join(sorted(p.name.split('-')[0] for p in (path / 'kg').glob('*-train.tsv')))})")
    if (path / "entity2id.txt").exists():
        return read_openke(path, name)
    from .text_kg import is_text_kg, read_text_kg

    if is_text_kg(path):
        return read_text_kg(path, name)
    if (path / "train.txt").exists() and ((path / "relations").is_dir() or (path / "entity2types.json").exists()):
        from .codex import read_codex

        return read_codex(path, name=name)
    entities, relations = _find(path, "entities"), _find(path, "relations")
    single = _find(path, "triples")
    if single is not None:
        return GraphKB.from_files(single, entities, relations, on_unknown, name or path.name)
    split_files = {s: _find(path, s) for s in SPLITS}
    if split_files["train"] is None:
        raise KBError(f"{path}: no triples.{{tsv,txt,jsonl}}, train.*, OpenKE entity2id.txt or CoDEx layout found")
    kb = GraphKB(name or path.name)
    declared_e = read_names(entities, kb, "entity") if entities else None
    declared_r = read_names(relations, kb, "relation") if relations else None
    for split, file in split_files.items():
        if file is not None:
            kb.splits[split] = read_triples(file, kb, declared_e, declared_r, on_unknown)
            for t in kb.splits[split]:
                kb.add_triple(*t)
    return kb
