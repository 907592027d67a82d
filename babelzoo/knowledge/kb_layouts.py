"""A knowledge base from a file or a folder, in any layout :func:`read_kb` recognises.

- **A triples file** in a format of :mod:`babelzoo.knowledge.graph_files`.
- **A folder** holds ``triples.{tsv,txt,jsonl}`` or split files ``train/valid/test.{tsv,txt,jsonl}``,
  with optional ``entities.*`` and ``relations.*`` beside them. The OpenKE layout
  (``entity2id.txt``, ``relation2id.txt``, ``train2id.txt`` [+ ``valid2id.txt``,
  ``test2id.txt``], :mod:`babelzoo.knowledge.openke`), the CoDEx layout
  (:mod:`babelzoo.knowledge.codex`) and the text layout of KG-BERT, StAR and SimKGC
  (``entity2text.txt``, :mod:`babelzoo.knowledge.text_kg`) are recognised too, and one graph of
  a DBP-5L folder, named ``ROOT/LANG`` (:mod:`babelzoo.knowledge.dbp5l`), or of an
  entity-alignment folder in the DBP15K layout, ``ROOT/1`` or ``ROOT/2``
  (:mod:`babelzoo.knowledge.id_graphs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .base import KBError
from .codex import read_codex
from .dbp5l import is_dbp5l, is_dbp5l_graph, read_dbp5l
from .graph import SPLITS, GraphKB
from .graph_files import read_names, read_triples
from .id_graphs import is_id_graph, read_id_graph
from .openke import read_openke
from .text_kg import is_text_kg, read_text_kg


def _find(folder: Path, stem: str) -> Optional[Path]:
    for suffix in (".tsv", ".txt", ".jsonl", ".json"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def read_kb(path: str | Path, on_unknown: str = "error", name: Optional[str] = None) -> GraphKB:
    """Read a knowledge base from a triples file or a folder in any layout named in the module
    docstring."""
    path = Path(path)
    if path.is_file():
        return GraphKB.from_files(path, on_unknown=on_unknown, name=name)
    if is_dbp5l_graph(path):  # ROOT/LANG: one graph of a DBP-5L folder
        return read_dbp5l(path.parent, path.name, name)
    if is_id_graph(path):  # ROOT/1, ROOT/2: a graph of an entity-alignment folder (DBP15K)
        return read_id_graph(path.parent, path.name, name)
    if not path.is_dir():
        raise KBError(f"{path}: no such file or folder")
    if is_dbp5l(path):
        raise KBError(f"{path}: a DBP-5L folder holds several graphs: name one as {path}/LANG (LANG one of "
                      f"{', '.join(sorted(p.name.split('-')[0] for p in (path / 'kg').glob('*-train.tsv')))})")
    if (path / "entity2id.txt").exists():
        return read_openke(path, name)
    if is_text_kg(path):
        return read_text_kg(path, name)
    if (path / "train.txt").exists() and ((path / "relations").is_dir() or (path / "entity2types.json").exists()):
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
