"""Knowledge graphs whose entities carry text, in the layout KG-BERT, StAR and SimKGC publish
for WN18RR and FB15k-237:

- ``train.tsv``, ``dev.tsv``, ``test.tsv``: ``head<TAB>relation<TAB>tail`` (``dev`` is read as
  the ``valid`` split);
- ``entity2text.txt``: ``id<TAB>text`` (WN18RR: ``lemma, gloss``; FB15k-237: the name), and
  optionally ``entity2textlong.txt`` (a longer description, appended to the text);
- ``relation2text.txt``: ``relation<TAB>words``;
- optionally ``entities.txt`` / ``relations.txt``: one id a line; every id they list needs a text.

Every entity a triple names must have a text (a text model ranks entities by it): a triple naming
one without is refused by file and line, and so is a malformed row. The entity's text is its
label in ``lang`` and the node attribute ``text`` (:meth:`GraphKB.entity_text`); relation words
are the relation's label. When every entity's text reads ``name, description`` (WN18RR's
``lemma, gloss``), the name is also an alias of the entity (after the text, which stays the
preferred label), so that an entity linker finds the entity in running text ("stool"), and its
node attribute ``name`` (:meth:`GraphKB.entity_name`, what a K-BERT branch calls it).

``load_wn18rr()`` reads ``root``, else ``$BABELZOO_DATA_DIR/wn18rr``, else downloads the files
from the KG-BERT repository at a pinned commit, verifying every file's sha256.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from .base import KBError
from .graph import GraphKB
from .graph_files import _lines, read_triples

ENTITY_TEXT, ENTITY_TEXT_LONG, RELATION_TEXT = "entity2text.txt", "entity2textlong.txt", "relation2text.txt"
SPLIT_FILES = {"train": "train.tsv", "valid": "dev.tsv", "test": "test.tsv"}

# KG-BERT's data/WN18RR/ at a fixed commit: local name -> sha256
KGBERT_COMMIT = "0b8f625108efcb9b43603b6840f2548ff3d3c973"
WN18RR_UPSTREAM = f"https://raw.githubusercontent.com/yao8839836/kg-bert/{KGBERT_COMMIT}/data/WN18RR"
WN18RR_FILES = {
    "train.tsv": "038612e783c215ee5f3ca9fbfca27b8d0739be1028fe4ee7c174aecf0b83d5df",
    "dev.tsv": "453ce7202afa58094a04d2b1560ee2b02660f1c260b32ce6651c8ccedd1028ab",
    "test.tsv": "0383bceaaa1096cf3c03ec021ed0048068e2355dbfc0239b292cefdac821cec5",
    "entity2text.txt": "8f5c6f11753dafa879917b9bdf73d398ceb3bd4bed8d5553177e1e0f2c37521f",
    "relation2text.txt": "91b1de5585d686ed31498d50f1c4eed44ba9486dffbbcc0c28927ac884184918",
    "entities.txt": "178f3020f4a4dd7a2b51a93d8f4e95b38f7b431b0eadb5d317a2ce2f0b3097f0",
    "relations.txt": "53e8790103375e198e418ba55fc52118789dab8ffe55a848a150dfb630cbd3ad",
}


def is_text_kg(folder: str | Path) -> bool:
    """True when ``folder`` is in this layout (it has ``entity2text.txt``)."""
    return (Path(folder) / ENTITY_TEXT).is_file()


def _texts(path: Path, what: str) -> dict[str, tuple[int, str]]:
    """``id -> (line, text)`` of an ``id<TAB>text`` file; a row without exactly two non-empty
    fields, or an id given twice, is refused by line."""
    out: dict[str, tuple[int, str]] = {}
    for number, text in _lines(path, 2, f"an {what} line (id, text)"):
        fields = text.split("\t")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise KBError(f"{path}:{number}: expected 'id<TAB>text' with both non-empty, got {text!r}")
        ident = fields[0].strip()
        if ident in out:
            raise KBError(f"{path}:{number}: {ident!r} already has a text (line {out[ident][0]})")
        out[ident] = (number, fields[1].strip())
    return out


def _names(entity_text: dict[str, tuple[int, str]]) -> dict[str, str]:
    """``id -> name`` when every text reads ``name, description`` (the text before the first
    ", "), else nothing: a text without a description (FB15k-237's names, some of which hold a
    comma: "Washington, D.C.") is a name whole."""
    parts = {ident: text.split(", ", 1) for ident, (_, text) in entity_text.items()}
    if not parts or any(len(p) < 2 or not p[0].strip() for p in parts.values()):
        return {}
    return {ident: p[0].strip() for ident, p in parts.items()}


def _ids(path: Path, known: dict[str, tuple[int, str]], text_file: str) -> None:
    """Check that every id listed in ``path`` (one a line) has a text in ``text_file``."""
    for number, text in _lines(path, 1):
        ident = text.strip()
        if "\t" in ident:
            raise KBError(f"{path}:{number}: expected one id a line, got {text!r}")
        if ident not in known:
            raise KBError(f"{path}:{number}: {ident!r} has no text in {text_file}")


def read_text_kg(folder: str | Path, name: Optional[str] = None, lang: str = "en") -> GraphKB:
    """Read a folder in the layout above into a :class:`GraphKB` with ``kb.splits`` (train,
    valid, test); the entity and relation texts are labels in ``lang``."""
    folder = Path(folder)
    missing = [f for f in (ENTITY_TEXT, RELATION_TEXT, SPLIT_FILES["train"]) if not (folder / f).is_file()]
    if missing:
        raise KBError(f"{folder}: missing {', '.join(missing)} (a text KG folder holds {ENTITY_TEXT}, "
                      f"{RELATION_TEXT} and train.tsv [+ dev.tsv, test.tsv])")
    kb = GraphKB(name or folder.name)
    entity_text = _texts(folder / ENTITY_TEXT, "entity text")
    relation_text = _texts(folder / RELATION_TEXT, "relation text")
    long_text = _texts(folder / ENTITY_TEXT_LONG, "entity description") if (folder / ENTITY_TEXT_LONG).is_file() else {}
    for listing, known, text_file in (("entities.txt", entity_text, ENTITY_TEXT),
                                      ("relations.txt", relation_text, RELATION_TEXT)):
        if (folder / listing).is_file():
            _ids(folder / listing, known, text_file)
    names = _names(entity_text)
    for entity, (_, text) in entity_text.items():
        kb.add_label(entity, lang, text, preferred=True)
        if entity in names:
            kb.add_label(entity, lang, names[entity])
            kb.graph.nodes[entity]["name"] = names[entity]
        extra = long_text.get(entity)
        kb.graph.nodes[entity]["text"] = f"{text}, {extra[1]}" if extra else text
    for relation, (_, words) in relation_text.items():
        kb.add_relation_label(relation, lang, words, preferred=True)
    declared_entities, declared_relations = set(entity_text), set(relation_text)
    for split, file in SPLIT_FILES.items():
        path = folder / file
        if not path.is_file():
            continue
        kb.splits[split] = read_triples(path, kb, declared_entities, declared_relations,
                                        declared_in={"entity": ENTITY_TEXT, "relation": RELATION_TEXT})
        for triple in kb.splits[split]:
            kb.add_triple(*triple)
    return kb


def standard_folder(root: str | Path | None, name: str, download: bool, fetch, holds: str) -> Path:
    """The folder of a standard graph: ``root``, else ``$BABELZOO_DATA_DIR/<name>`` when it is
    there, else ``fetch()`` (a download with checksums) unless ``download`` is False; ``holds``
    says what the folder holds, for the error."""
    if root is None and os.environ.get("BABELZOO_DATA_DIR"):
        candidate = Path(os.environ["BABELZOO_DATA_DIR"]) / name
        root = candidate if candidate.is_dir() else None
    if root is None:
        if not download:
            raise KBError(f"{name} not found: pass root= (a folder with {holds}) or set BABELZOO_DATA_DIR")
        root = fetch()
    return Path(root)


def load_wn18rr(root: str | Path | None = None, download: bool = True) -> GraphKB:
    """WN18RR with each entity's lemma and WordNet gloss. ``root`` (or
    ``$BABELZOO_DATA_DIR/wn18rr``) is read when present; otherwise the files are downloaded with
    checksums (:func:`download_wn18rr`)."""
    folder = standard_folder(root, "wn18rr", download, download_wn18rr,
                             "entity2text.txt, relation2text.txt, train.tsv, dev.tsv, test.tsv")
    return read_text_kg(folder, name="wn18rr")


def download_wn18rr(base_url: Optional[str] = None, directory: str | Path | None = None) -> Path:
    """Fetch WN18RR from ``base_url`` (default: KG-BERT's ``data/WN18RR`` at commit
    :data:`KGBERT_COMMIT`) into ``directory`` (default: the cache), checking every file's sha256."""
    from ..datasets.download import cache_dir, download

    base_url = base_url or WN18RR_UPSTREAM
    target = Path(directory) if directory is not None else cache_dir() / "knowledge" / "wn18rr"
    for name, digest in WN18RR_FILES.items():
        download(f"{base_url.rstrip('/')}/{name}", digest, directory=target, filename=name)
    return target
