"""The OpenKE layout of a knowledge graph: ``entity2id.txt`` and ``relation2id.txt`` name the ids,
``train2id.txt`` [+ ``valid2id.txt``, ``test2id.txt``] hold the triples as ids."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .base import KBError, Triple
from .graph import SPLITS, GraphKB
from .graph_files import _lines


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
