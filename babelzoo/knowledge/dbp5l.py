"""DBP-5L (Chen et al., Findings of EMNLP 2020, "Multilingual Knowledge Graph Completion via
Ensemble Knowledge Transfer"): five DBpedia graphs, Greek, English, Spanish, French and
Japanese, over one shared vocabulary of relations, with seed alignments between every pair.

The layout KEnS publishes (``data/`` of its repository):

- ``entity/LANG.tsv``: line *i* is entity *i*'s DBpedia resource URI;
- ``relations.txt``: line *i* is relation *i*'s URI (shared by the five graphs);
- ``kg/LANG-{train,val,test}.tsv``: ``head<TAB>relation<TAB>tail`` as those indices;
- ``seed_alignlinks/L1-L2.tsv``: ``index in L1<TAB>index in L2`` (written as floats, ``12.0``).

One graph is named by the folder and its language, ``…/dbp5l/el``, wherever a knowledge base is
read (``load_kb``, ``babelzoo kb ... --kg``, a recipe's ``kg.path``). Entity ids are the indices
(``"4742"``: a few URIs occur on two lines, and the triples name lines); an entity's text is its
resource name made readable, in the graph's language (``1._ΦΚ_Μαγδεβούργο`` → ``1. ΦΚ
Μαγδεβούργο``); relation ids are the URIs, their words the URI's last part with camelCase split
(``…/ontology/birthPlace`` → ``birth place``). A malformed row, an index past the end of its file
or a missing file is refused by file and line.

:func:`download_dbp5l` fetches the files from the KEnS repository at a pinned commit, checking
every file's sha256.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional
from urllib.parse import unquote

from .base import KBError, Triple
from .graph import GraphKB
from .graph_files import _lines

LANGUAGES = ("el", "en", "es", "fr", "ja")
SPLIT_FILES = {"train": "train", "valid": "val", "test": "test"}

KENS_COMMIT = "36de8a5fb64bf6d239dc7c878f33ef9dff5c4644"
DBP5L_UPSTREAM = f"https://raw.githubusercontent.com/stasl0217/KEnS/{KENS_COMMIT}/data"
# local path -> sha256 of the files at KENS_COMMIT
DBP5L_FILES = {
    "entity/de.tsv": "dc8b2e6b6119deb14430ec28a5e0856e152845ab1efca8c4728c2e2aa3082d95",
    "entity/el.tsv": "d9db5a9a1faae6d3acb2c811130a1a7a8c8e325c636695f613a76117e3878013",
    "entity/en.tsv": "37560dfa953f0a485f56b1f085b29a95c63ce153d073e7e651fc71cec0733aa5",
    "entity/es.tsv": "b0fda6cbf9c58b1e1637740aa266ca9dbc2162a3dd52a170bf2dc848b8f80b50",
    "entity/fr.tsv": "0ed055479431f6c15db29b98142ba95c846b37cdfd5f449b8b64020c30919ecb",
    "entity/ja.tsv": "c2a69c58d8c0aaaa4394ea693d36738e5c3d83486a86b418dda29ccf9b2868f4",
    "kg/el-test.tsv": "5a92d7bf13cf757fea735cf6f1627dc2c3b3d7a9dca4d0193849d74355151da2",
    "kg/el-train.tsv": "5d3da01697b17adbf7e52ab9f7c69de86e26354f6563d6538f9e7a9a1a660a57",
    "kg/el-val.tsv": "3d17aaf605f382ba6ec35e06242f65304262aaf60da26cdea8754b7bbf319e4d",
    "kg/en-test.tsv": "7041e57ab44cae2d4554c5aad2888ca7c9f28e8111c925430d6cf12a9981257c",
    "kg/en-train.tsv": "6743c64b7522e12c9e8e9a96d27114e1dee81c5cc35bb2ede9bb6095ad70a4de",
    "kg/en-val.tsv": "9079d8e43e6b09c2ebf83a678a73b1de65332198a283f440ec8d332eeecb5cbf",
    "kg/es-test.tsv": "ca4d17f24556935d566f3f4fc6f51a25aef78239a67c65d1df6f826c8088a42e",
    "kg/es-train.tsv": "4d6439b9776b7f2d9d8e774c84acc8333c492a3380d97cf9cbf708694893e619",
    "kg/es-val.tsv": "fa84460c562107ada7485c12030ddf7c57cbc30ab319e3362dbfdd9c1e2e3f9b",
    "kg/fr-test.tsv": "f39b32d4222f5a903fa07d4f687a2e92e0a054a2aaf8fce2e16151af7b9781b9",
    "kg/fr-train.tsv": "26b587ef18c8ae8190dec97fdacf0aad3500564715c84f4d0178125563c3b4c2",
    "kg/fr-val.tsv": "839140da5b0f7cba17d9ea856be2094a91618a3b389433eed814b6a79bedb2d4",
    "kg/ja-test.tsv": "6efc4c20fc343ac4c5813d28e850d8ca46b2da8f452cc25e39c3d57cef312e28",
    "kg/ja-train.tsv": "bbc337115cd5ef6db3f98b316fe8d171f3d20bbfc7b70076758e585c34766c1c",
    "kg/ja-val.tsv": "eff9a10e9300d222444433ac6a930882b5905bb6caad1484425914ea6921ad63",
    "relations.txt": "2b16826c685ac784792c735e789ea3b19d40a10cbdee9fffe04915d3abb588a8",
    "seed_alignlinks/el-en.tsv": "523370fba7580bb10b8e9dd5f3788d73664fe191def69b7add0695525cbebcb8",
    "seed_alignlinks/el-es.tsv": "00c744cf498a5d34f31598f1a76c9d36120591f80d2dba8b927901fbd6dc9f0e",
    "seed_alignlinks/el-fr.tsv": "f2214d7f7978c8c454f16b6b8a76c1c0b86255dcc98e098bedba538ed7b1339a",
    "seed_alignlinks/el-ja.tsv": "103baf3cc4896af82d03e9d65fe2278a63e0d67145af2b78b16919461585e43e",
    "seed_alignlinks/en-fr.tsv": "1970e21b82e09a50b944eb6fa5d691fac102563fc6177b5e6491931920afe6c1",
    "seed_alignlinks/es-en.tsv": "e92ad7d75818e851f8d1860bd6ec5d5c7f3491a27c49a8fc8045ed7eb000202c",
    "seed_alignlinks/es-fr.tsv": "c1f892d7c015fdf7ae41207c50e6e6fff0c1144411e810bd9ed221bf8309dd75",
    "seed_alignlinks/ja-en.tsv": "04a009f51f6f9e372dbd98bb1f5af6978db32df1575cd84be9107ed97341bd53",
    "seed_alignlinks/ja-es.tsv": "3e84cf0f4540bf2e7b60854ba644c7c61fce8e6395a2c9f0fee9b942fd86b252",
    "seed_alignlinks/ja-fr.tsv": "c032f15074aede29ef9bee0276e51eb412272d64e54991df17241351ce8527f4",
}


def is_dbp5l(folder: str | Path) -> bool:
    """True when ``folder`` is a DBP-5L root (``entity/``, ``kg/``, ``relations.txt``)."""
    folder = Path(folder)
    return (folder / "relations.txt").is_file() and (folder / "entity").is_dir() and (folder / "kg").is_dir()


def is_dbp5l_graph(path: str | Path) -> bool:
    """True when ``path`` names one graph of a DBP-5L root: ``ROOT/LANG``."""
    path = Path(path)
    return not path.exists() and is_dbp5l(path.parent)


def readable(uri: str) -> str:
    """A DBpedia resource URI's name as text: percent-decoded, underscores as spaces."""
    name = uri.split("/resource/", 1)[1] if "/resource/" in uri else uri.rstrip("/").rsplit("/", 1)[-1]
    return unquote(name).replace("_", " ").strip()


def relation_words(uri: str) -> str:
    """A relation URI's last part as words: ``…/ontology/birthPlace`` → ``birth place``."""
    name = unquote(uri.rstrip("/").rsplit("/", 1)[-1]).replace("_", " ")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower().strip()


def _uris(path: Path) -> list[str]:
    """The URIs of a one-URI-a-line file, in order; a line with a tab or a blank line in the
    middle (which would shift every index after it) is refused by line."""
    if not path.is_file():
        raise KBError(f"{path}: no such file (a DBP-5L folder holds entity/LANG.tsv, relations.txt, kg/LANG-*.tsv)")
    uris = []
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, 1):
        uri = line.rstrip("\r").removeprefix("\ufeff") if number == 1 else line.rstrip("\r")
        if not uri.strip() or "\t" in uri:
            raise KBError(f"{path}:{number}: expected one URI a line (the line number is the index), got {line!r}")
        uris.append(uri.strip())
    return uris


def _index(value: str, size: int, path: Path, number: int, what: str) -> int:
    try:
        number_value = float(value)
    except ValueError:
        raise KBError(f"{path}:{number}: {what} {value!r} is not an index") from None
    if not number_value.is_integer() or not 0 <= number_value < size:
        raise KBError(f"{path}:{number}: {what} {value!r} is not an index of the {size:,} lines of its file")
    return int(number_value)


def read_dbp5l(root: str | Path, lang: str, name: Optional[str] = None) -> GraphKB:
    """The ``lang`` graph of the DBP-5L folder ``root`` as a :class:`GraphKB` with ``kb.splits``
    (train, valid, test): entity ids are indices, texts readable names in ``lang`` (module
    docstring); ``kb.uris`` lists the entities' URIs."""
    root = Path(root)
    if not is_dbp5l(root):
        raise KBError(f"{root}: not a DBP-5L folder (entity/, kg/, relations.txt)")
    missing = [f"kg/{lang}-{file}.tsv" for file in SPLIT_FILES.values() if not (root / "kg" / f"{lang}-{file}.tsv").is_file()]
    if missing or not (root / "entity" / f"{lang}.tsv").is_file():
        graphs = sorted(p.name.split("-")[0] for p in (root / "kg").glob("*-train.tsv"))
        raise KBError(f"{root}: no graph {lang!r} (missing {', '.join(missing) or f'entity/{lang}.tsv'}); its graphs: "
                      f"{', '.join(graphs)}")
    uris, relations = _uris(root / "entity" / f"{lang}.tsv"), _uris(root / "relations.txt")
    kb = GraphKB(name or f"dbp5l-{lang}")
    kb.uris = uris
    for index, uri in enumerate(uris):
        entity = str(index)
        text = readable(uri) or uri
        kb.add_label(entity, lang, text, preferred=True)
        kb.graph.nodes[entity]["text"] = text
    for uri in relations:
        kb.add_relation_label(uri, "en", relation_words(uri) or uri, preferred=True)
    for split, file in SPLIT_FILES.items():
        path = root / "kg" / f"{lang}-{file}.tsv"
        rows = []
        for number, text in _lines(path):
            fields = text.split("\t")
            if len(fields) != 3:
                raise KBError(f"{path}:{number}: expected 'head<TAB>relation<TAB>tail' indices, got {text!r}")
            h = _index(fields[0], len(uris), path, number, "head")
            r = _index(fields[1], len(relations), path, number, "relation")
            t = _index(fields[2], len(uris), path, number, "tail")
            rows.append((str(h), relations[r], str(t)))
        kb.splits[split] = [Triple(*row) for row in rows]
        for row in rows:
            kb.add_triple(*row)
    return kb


def read_alignment(path: str | Path, left: int, right: int) -> list[tuple[str, str]]:
    """The pairs of an alignment file (``index<TAB>index`` a line, floats allowed: ``12.0``) as
    entity ids of the two graphs, checked against their sizes ``left`` and ``right``."""
    path = Path(path)
    if not path.is_file():
        raise KBError(f"{path}: no such alignment file")
    pairs = []
    for number, text in _lines(path):
        fields = text.split("\t")
        if len(fields) != 2:
            raise KBError(f"{path}:{number}: expected 'entity<TAB>entity' indices, got {text!r}")
        pairs.append((str(_index(fields[0], left, path, number, "entity")),
                      str(_index(fields[1], right, path, number, "entity"))))
    return pairs


def dbp5l_seeds(root: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """The seed alignment between graphs ``a`` and ``b`` of a DBP-5L folder, as (id in a, id in
    b), whichever order the file is named in."""
    root = Path(root)
    for first, second in ((a, b), (b, a)):
        path = root / "seed_alignlinks" / f"{first}-{second}.tsv"
        if path.is_file():
            sizes = [len(_uris(root / "entity" / f"{lang}.tsv")) for lang in (first, second)]
            pairs = read_alignment(path, *sizes)
            return pairs if first == a else [(y, x) for x, y in pairs]
    raise KBError(f"{root}: no seed_alignlinks/{a}-{b}.tsv or {b}-{a}.tsv")


def load_dbp5l(lang: str, root: str | Path | None = None, download: bool = True) -> GraphKB:
    """The ``lang`` graph of DBP-5L: ``root`` (or ``$BABELZOO_DATA_DIR/dbp5l``) when present,
    else the files downloaded with checksums (:func:`download_dbp5l`)."""
    from .text_kg import standard_folder

    root = standard_folder(root, "dbp5l", download, download_dbp5l,
                           "entity/, kg/, relations.txt, seed_alignlinks/")
    return read_dbp5l(root, lang)


def download_dbp5l(base_url: Optional[str] = None, directory: str | Path | None = None) -> Path:
    """Fetch DBP-5L from ``base_url`` (default: KEnS's ``data/`` at commit :data:`KENS_COMMIT`)
    into ``directory`` (default: the cache), checking every file's sha256."""
    from ..datasets.download import cache_dir, download

    base_url = base_url or DBP5L_UPSTREAM
    target = Path(directory) if directory is not None else cache_dir() / "knowledge" / "dbp5l"
    for name, digest in DBP5L_FILES.items():
        local = target / name
        download(f"{base_url.rstrip('/')}/{name}", digest, directory=local.parent, filename=local.name)
    return target
