"""DBP-5L: one graph of the folder read by ``load_kb("ROOT/LANG")`` with readable names in its
language, the seed alignments as entity ids, malformed rows named by file and line, and the
pinned download with checksums."""

from __future__ import annotations

import shutil

import pytest

from babelzoo.knowledge import KBError, LinkPredictionData, load_kb
from babelzoo.knowledge.dbp5l import DBP5L_FILES, dbp5l_seeds, load_dbp5l, readable, relation_words

EL = ["http://el.dbpedia.org/resource/1._ΦΚ_Μαγδεβούργο", "http://el.dbpedia.org/resource/Γερμανία",
      "http://el.dbpedia.org/resource/Μαγδεβούργο", "http://el.dbpedia.org/resource/Γερμανία"]  # a URI twice
EN = ["http://dbpedia.org/resource/Germany", "http://dbpedia.org/resource/1._FC_Magdeburg",
      "http://dbpedia.org/resource/Villarreal_CF_%22B%22"]
RELATIONS = ["http://dbpedia.org/ontology/ground", "http://dbpedia.org/property/country",
             "http://dbpedia.org/ontology/birthPlace"]


def write_dbp5l(root, **overrides):
    files = {"entity/el.tsv": "\n".join(EL) + "\n", "entity/en.tsv": "\n".join(EN) + "\n",
             "relations.txt": "\n".join(RELATIONS) + "\n",
             "kg/el-train.tsv": "0\t0\t2\n2\t1\t1\n", "kg/el-val.tsv": "0\t1\t3\n", "kg/el-test.tsv": "3\t2\t2\n",
             "kg/en-train.tsv": "1\t1\t0\n", "kg/en-val.tsv": "2\t1\t0\n", "kg/en-test.tsv": "1\t0\t0\n",
             "seed_alignlinks/el-en.tsv": "0.0\t1.0\n1.0\t0.0\n"}
    files.update(overrides)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_one_graph_is_read_by_its_folder_and_language_with_readable_names(tmp_path):
    root = write_dbp5l(tmp_path / "dbp5l")
    kb = load_kb(root / "el")
    assert kb.entities() == ["0", "1", "2", "3"]  # ids are line indices: a URI twice is two entities
    assert [kb.entity_text(e) for e in kb.entities()] == ["1. ΦΚ Μαγδεβούργο", "Γερμανία", "Μαγδεβούργο", "Γερμανία"]
    assert kb.label("2", "el") == "Μαγδεβούργο" and kb.uris[2] == EL[2]
    assert kb.relations() == RELATIONS and kb.relation_label(RELATIONS[2]) == "birth place"
    assert [tuple(t) for t in kb.splits["train"]] == [("0", RELATIONS[0], "2"), ("2", RELATIONS[1], "1")]
    assert {split: len(rows) for split, rows in kb.splits.items()} == {"train": 2, "valid": 1, "test": 1}
    data = LinkPredictionData.from_kb(kb)
    assert data.test.tolist() == [[3, 2, 2]]
    assert readable(EN[2]) == 'Villarreal CF "B"' and relation_words("http://x/property/recognisedLanguages") == \
        "recognised languages"


def test_seed_alignments_are_entity_ids_whichever_way_the_file_is_named(tmp_path):
    root = write_dbp5l(tmp_path / "dbp5l")
    assert dbp5l_seeds(root, "el", "en") == [("0", "1"), ("1", "0")]
    assert dbp5l_seeds(root, "en", "el") == [("1", "0"), ("0", "1")]
    el, en = load_kb(root / "el"), load_kb(root / "en")
    assert [(el.entity_text(a), en.entity_text(b)) for a, b in dbp5l_seeds(root, "el", "en")] == \
        [("1. ΦΚ Μαγδεβούργο", "1. FC Magdeburg"), ("Γερμανία", "Germany")]


@pytest.mark.parametrize("overrides, message", [
    ({"kg/el-train.tsv": "0\t0\t2\n2\t1\t4\n"}, r"kg/el-train.tsv:2: tail '4' is not an index of the 4 lines"),
    ({"kg/el-test.tsv": "3\t3\t2\n"}, r"kg/el-test.tsv:1: relation '3' is not an index of the 3 lines"),
    ({"kg/el-val.tsv": "0\t1\n"}, r"kg/el-val.tsv:1: expected 'head<TAB>relation<TAB>tail' indices"),
    ({"kg/el-val.tsv": "0\tone\t1\n"}, r"kg/el-val.tsv:1: relation 'one' is not an index"),
    ({"entity/el.tsv": EL[0] + "\n\n" + EL[1] + "\n"}, r"entity/el.tsv:2: expected one URI a line"),
])
def test_malformed_rows_are_named_by_file_and_line(tmp_path, overrides, message):
    root = write_dbp5l(tmp_path / "dbp5l", **overrides)
    with pytest.raises(KBError, match=message):
        load_kb(root / "el")


def test_a_seed_file_naming_no_entity_and_a_missing_graph_are_refused(tmp_path):
    root = write_dbp5l(tmp_path / "dbp5l", **{"seed_alignlinks/el-en.tsv": "0.0\t1.0\n2.5\t0.0\n"})
    with pytest.raises(KBError, match=r"el-en.tsv:2: entity '2.5' is not an index"):
        dbp5l_seeds(root, "el", "en")
    with pytest.raises(KBError, match=r"no graph 'ja' \(missing kg/ja-train.tsv.*its graphs: el, en"):
        load_kb(root / "ja")
    with pytest.raises(KBError, match=r"holds several graphs: name one as .*/LANG \(LANG one of el, en\)"):
        load_kb(root)
    with pytest.raises(KBError, match=r"no seed_alignlinks/en-ja.tsv or ja-en.tsv"):
        dbp5l_seeds(root, "en", "ja")


def test_the_shipped_graphs_have_the_published_sizes(shared_data):
    sizes = {lang: len(load_kb(shared_data / "dbp5l" / lang).splits["test"]) for lang in ("el", "en", "es", "fr", "ja")}
    assert sizes == {"el": 1017, "en": 7464, "es": 4810, "fr": 4171, "ja": 2162}
    assert load_kb("dbp5l-el", root=shared_data / "dbp5l").entity_text("1") == "1. ΦΚ Μαγδεβούργο"


def test_dbp5l_download_verifies_checksums(shared_data, tmp_path, monkeypatch):
    from babelzoo.datasets.download import DownloadError

    upstream = tmp_path / "upstream"  # KEnS's data/, served by file:// URLs
    for name in DBP5L_FILES:
        (upstream / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data / "dbp5l" / name, upstream / name)
    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("babelzoo.knowledge.dbp5l.DBP5L_UPSTREAM", upstream.as_uri())
    kb = load_dbp5l("ja")
    assert (tmp_path / "cache" / "knowledge" / "dbp5l" / "seed_alignlinks" / "ja-en.tsv").is_file()
    assert len(kb.splits["test"]) == 2162
    with open(upstream / "kg" / "el-test.tsv", "a", encoding="utf-8") as handle:
        handle.write("0\t0\t1\n")
    shutil.rmtree(tmp_path / "cache")
    with pytest.raises(DownloadError, match="sha256"):
        load_dbp5l("el")
