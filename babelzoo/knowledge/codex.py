"""CoDEx knowledge-graph completion benchmarks (Safavi & Koutra, "CoDEx: A Comprehensive
Knowledge Graph Completion Benchmark", EMNLP 2020): Wikidata triples with fixed
train/valid/test splits, hard negatives, relation names in six languages and entity types.

Two folder layouts are read:

- flat: ``train.txt valid.txt test.txt`` (``head<TAB>relation<TAB>tail``), ``valid_negatives.txt``,
  ``test_negatives.txt``, ``relations/LANG.json``, ``entities/LANG.json`` (optional),
  ``entity2types.json``;
- upstream repository: ``triples/codex-s/*.txt``, ``relations/LANG/relations.json``,
  ``entities/LANG/entities.json``, ``types/entity2types.json`` under its ``data/`` folder.

``load_codex("s")`` uses ``root`` if given, else ``$BABELZOO_DATA_DIR/codex-s``, else downloads
CoDEx-S from the upstream repository into the cache, verifying every file's sha256.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from .._files import read_json_object
from .base import KBError
from .graph import SPLITS, GraphKB
from .graph_files import read_triples

UPSTREAM = "https://raw.githubusercontent.com/tsafavi/codex/master/data"
LANGUAGES = ("ar", "de", "en", "es", "ru", "zh")
# sha256 of the CoDEx-S release files: local name -> (upstream path, digest)
CODEX_S_FILES = {
    "train.txt": ("triples/codex-s/train.txt", "64f93b7f314f3936a6f65739721429db3f6a7c8f5a1e1104ec3bb544f7434f59"),
    "valid.txt": ("triples/codex-s/valid.txt", "3831c0e57daef03c3a18cdd1a72e370b496f696c5218883d35c7d2ab8a6a772c"),
    "test.txt": ("triples/codex-s/test.txt", "27127fcb34688c4778e88a39ef3c9b540807da846021e9d9685660ac1838aca1"),
    "valid_negatives.txt": ("triples/codex-s/valid_negatives.txt",
                            "c1d84860d6ee786419f1f118d0e9479c6614283b3e267afc158734389036901f"),
    "test_negatives.txt": ("triples/codex-s/test_negatives.txt",
                           "d3fb32c41f3be26d09484ace571965806f1ade0ca712551b0de684c283cdbb22"),
    "entity2types.json": ("types/entity2types.json", "9c3797961498fc312a6d62c798b250c3ad501578a8ac07c0829a2862c627a878"),
    "relations/ar.json": ("relations/ar/relations.json", "06467134556da679127638470c71a412ab4fc910db02d47037fe59188d8210bd"),
    "relations/de.json": ("relations/de/relations.json", "eb6283fc99282830b1c7b3f2889209b06c4899dee526b557ff95b416329c638c"),
    "relations/en.json": ("relations/en/relations.json", "2b467fab26430a0500e5fe82cdb9b3c4fbcfda01827ff3bfa833dc5470ad92f7"),
    "relations/es.json": ("relations/es/relations.json", "b38824e4f59eb6f56c60b7720a520a2408b70661cc794ba50dafe3d688a6c76c"),
    "relations/ru.json": ("relations/ru/relations.json", "d71b5d2e704ffb9a06abfd3491481ca02e72f527a45870a28f0bf83cd0c75d49"),
    "relations/zh.json": ("relations/zh/relations.json", "c7c831507737973bf4a443c9db19d5b8ce2d774f9fe5a12953658b491d1adc3d"),
}


def _first(*candidates: Path) -> Optional[Path]:
    return next((p for p in candidates if p.is_file()), None)


def _read_json(path: Path) -> dict:
    return read_json_object(path, KBError, "a JSON object mapping ids to records")


def read_codex(folder: str | Path, name: Optional[str] = None, size: Optional[str] = None,
               languages: Iterable[str] = LANGUAGES) -> GraphKB:
    """Read a CoDEx folder (either layout above) into a :class:`GraphKB` with ``kb.splits``
    (train/valid/test) and ``kb.negatives`` (valid/test hard negatives, not added as facts)."""
    folder = Path(folder)
    triples_dir = folder / "triples" / f"codex-{size}" if size and (folder / "triples").is_dir() else folder
    kb = GraphKB(name or folder.name)
    for split in SPLITS:
        path = triples_dir / f"{split}.txt"
        if not path.is_file():
            raise KBError(f"{path}: missing (a CoDEx folder has train.txt, valid.txt and test.txt)")
        kb.splits[split] = read_triples(path)
        for triple in kb.splits[split]:
            kb.add_triple(*triple)
    for split in ("valid", "test"):
        path = triples_dir / f"{split}_negatives.txt"
        if path.is_file():
            kb.negatives[split] = read_triples(path)
    for lang in languages:
        path = _first(folder / "relations" / f"{lang}.json", folder / "relations" / lang / "relations.json")
        if path is not None:
            for relation, record in _read_json(path).items():
                if relation in kb._relations and isinstance(record, dict) and record.get("label"):
                    kb.add_relation_label(relation, lang, record["label"], preferred=True)
        path = _first(folder / "entities" / f"{lang}.json", folder / "entities" / lang / "entities.json")
        if path is not None:
            for entity, record in _read_json(path).items():
                if entity in kb and isinstance(record, dict) and record.get("label"):
                    kb.add_label(entity, lang, record["label"], preferred=True)
    types = _first(folder / "entity2types.json", folder / "types" / "entity2types.json")
    if types is not None:
        for entity, kinds in _read_json(types).items():
            if entity in kb:
                kb.graph.nodes[entity]["types"] = list(kinds)
    return kb


def load_codex(size: str = "s", root: str | Path | None = None, download: bool = True) -> GraphKB:
    """CoDEx-``size`` as a :class:`GraphKB`. ``root`` (or ``$BABELZOO_DATA_DIR/codex-SIZE``) is
    read when present; otherwise CoDEx-S is downloaded with checksums (CoDEx-M and -L need
    ``root``)."""
    if size not in ("s", "m", "l"):
        raise KBError(f"CoDEx size {size!r} must be 's', 'm' or 'l'")
    if root is None and os.environ.get("BABELZOO_DATA_DIR"):
        candidate = Path(os.environ["BABELZOO_DATA_DIR"]) / f"codex-{size}"
        root = candidate if candidate.is_dir() else None
    if root is None:
        if size != "s" or not download:
            raise KBError(f"CoDEx-{size.upper()} not found: pass root= (a folder with train.txt, valid.txt, test.txt)")
        root = download_codex_s()
    return read_codex(root, name=f"codex-{size}", size=size)


def download_codex_s(base_url: Optional[str] = None, directory: str | Path | None = None) -> Path:
    """Fetch CoDEx-S from ``base_url`` (default: the upstream repository's data folder) into
    ``directory`` (default: the cache) in the flat layout, checking every file's sha256."""
    from ..datasets.download import cache_dir, download

    base_url = base_url or UPSTREAM
    target = Path(directory) if directory is not None else cache_dir() / "knowledge" / "codex-s"
    for local, (remote, digest) in CODEX_S_FILES.items():
        dest = target / local
        download(f"{base_url.rstrip('/')}/{remote}", digest, directory=dest.parent, filename=dest.name)
    return target

