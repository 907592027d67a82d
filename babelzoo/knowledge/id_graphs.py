"""Pairs of graphs in the layout of the entity-alignment benchmarks (DBP15K, as JAPE, GCN-Align
and their successors ship it): one folder, two graphs numbered 1 and 2.

- ``ent_ids_1``, ``ent_ids_2``: ``id<TAB>URI`` of every entity of each graph;
- ``triples_1``, ``triples_2``: ``head<TAB>relation<TAB>tail`` ids;
- optionally ``rel_ids_1``, ``rel_ids_2``: ``id<TAB>URI`` of the relations;
- ``ref_ent_ids``: the gold pairs, ``id in 1<TAB>id in 2`` (``sup_ent_ids`` / ``ill_ent_ids`` in
  some releases).

One graph is named ``ROOT/1`` or ``ROOT/2`` wherever a knowledge base is read (``load_kb``,
``babelzoo kb align --kb``). Entity ids are the files' ids; an entity's text is its URI's
resource name made readable (:func:`babelzoo.knowledge.dbp5l.readable`); relation words the
URI's last part (:func:`~babelzoo.knowledge.dbp5l.relation_words`), else the id. A malformed row
or a triple naming an entity the id file lacks is refused by file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .base import KBError
from .dbp5l import readable, relation_words
from .graph import GraphKB
from .graph_files import _lines


def is_id_graph(path: str | Path) -> bool:
    """True when ``path`` names graph 1 or 2 of a folder in this layout: ``ROOT/1``."""
    path = Path(path)
    return (not path.exists() and path.name in ("1", "2") and (path.parent / f"ent_ids_{path.name}").is_file()
            and (path.parent / f"triples_{path.name}").is_file())


def _id_file(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, text in _lines(path):
        fields = text.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise KBError(f"{path}:{number}: expected 'id<TAB>URI' with both non-empty, got {text!r}")
        ident = fields[0].strip()
        if ident in out:
            raise KBError(f"{path}:{number}: id {ident!r} given twice")
        out[ident] = fields[1].strip()
    return out


def read_id_graph(root: str | Path, side: str, name: Optional[str] = None) -> GraphKB:
    """Graph ``side`` (``"1"`` or ``"2"``) of the folder ``root`` as a :class:`GraphKB` (module
    docstring); ``kb.uris`` maps entity ids to URIs."""
    root = Path(root)
    entities = _id_file(root / f"ent_ids_{side}")
    relations = _id_file(root / f"rel_ids_{side}") if (root / f"rel_ids_{side}").is_file() else {}
    kb = GraphKB(name or f"{root.name}-{side}")
    kb.uris = entities
    for ident, uri in entities.items():
        kb.add_label(ident, "und", readable(uri) or uri, preferred=True)
        kb.graph.nodes[ident]["text"] = readable(uri) or uri
    for ident, uri in relations.items():
        kb.add_relation_label(ident, "en", relation_words(uri) or ident, preferred=True)
    path = root / f"triples_{side}"
    for number, text in _lines(path):
        fields = [f.strip() for f in text.split("\t")]
        if len(fields) != 3 or not all(fields):
            raise KBError(f"{path}:{number}: expected 'head<TAB>relation<TAB>tail' ids, got {text!r}")
        h, r, t = fields
        for value, what in ((h, "head"), (t, "tail")):
            if value not in entities:
                raise KBError(f"{path}:{number}: {what} {value!r} is not in ent_ids_{side}")
        if relations and r not in relations:
            raise KBError(f"{path}:{number}: relation {r!r} is not in rel_ids_{side}")
        kb.add_triple(h, r, t)
    return kb
