"""The plug-in API and the file formats of the graph backend, on knowledge bases written here."""

from __future__ import annotations

import sys

import pytest

from babelzoo.knowledge import (KBError, KnowledgeBase, GraphKB, list_kbs, load_kb, read_kb, register_kb)
from babelzoo.knowledge.base import KNOWLEDGE_BASES
from babelzoo.registry import PlugInError
from babelzoo.registry import RegistryError

TRIPLES = """# head\trelation\ttail
Q17\tcurrency\tQ8146
Q17\tofficial_language\tQ5287
Q183\tcurrency\tQ4916
Q183\tshares_border_with\tQ142
Q142\tcurrency\tQ4916
"""

ENTITIES = """Q17\ten\tJapan\tNippon
Q17\tde\tJapan
Q17\tja\t日本\tにっぽん
Q8146\ten\tJapanese yen\tyen
Q5287\ten\tJapanese
Q183\ten\tGermany
Q183\tde\tDeutschland
Q4916\ten\teuro
Q142\ten\tFrance
Q142\tde\tFrankreich
Q4916\tde\tEuro
Q999\ten\tGeorgia
Q1428\ten\tGeorgia
"""


@pytest.fixture
def kb_dir(tmp_path):
    (tmp_path / "triples.tsv").write_text(TRIPLES, encoding="utf-8")
    (tmp_path / "entities.tsv").write_text(ENTITIES, encoding="utf-8")
    (tmp_path / "relations.tsv").write_text("currency\ten\tcurrency\nofficial_language\ten\tofficial language\n"
                                            "shares_border_with\ten\tshares border with\n", encoding="utf-8")
    return tmp_path


def test_user_tsv_kb_through_the_api(kb_dir):
    kb = load_kb(kb_dir)
    assert isinstance(kb, KnowledgeBase)
    assert kb.entities()[:3] == ["Q17", "Q8146", "Q5287"]  # declaration order of entities.tsv
    assert len(kb.entities()) == 8 and kb.relations() == ["currency", "official_language", "shares_border_with"]
    assert sorted(kb.triples(head="Q17")) == [("Q17", "currency", "Q8146"), ("Q17", "official_language", "Q5287")]
    assert sorted(t.head for t in kb.triples(relation="currency", tail="Q4916")) == ["Q142", "Q183"]
    assert kb.labels("Q17", "ja") == ["日本", "にっぽん"]
    assert kb.labels("Q17", "en") == ["Japan", "Nippon"]
    assert kb.label("Q142", "fr") == "France"  # falls back to English
    assert kb.relation_label("official_language", "en") == "official language"
    assert kb.neighbors("Q183") == {"Q4916", "Q142"}
    assert kb.neighbors("Q183", hops=2) == {"Q4916", "Q142"}
    assert kb.neighbors("Q17", hops=2) == {"Q8146", "Q5287"}
    assert kb.neighbors("Q8146", hops=2) == {"Q17", "Q5287"}
    aliases = kb.aliases("de")
    assert aliases == {"Japan": ["Q17"], "Deutschland": ["Q183"], "Frankreich": ["Q142"], "Euro": ["Q4916"]}


def test_duplicate_aliases_are_kept_as_candidates(kb_dir):
    kb = load_kb(kb_dir)
    assert kb.aliases("en")["Georgia"] == ["Q999", "Q1428"]
    assert kb.aliases(None)["Japan"] == ["Q17"]  # same entity in two languages: one candidate


def test_jsonl_formats_and_single_file(tmp_path):
    (tmp_path / "triples.jsonl").write_text('{"head": "a", "relation": "r", "tail": "b"}\n["b", "s", "c"]\n',
                                            encoding="utf-8")
    (tmp_path / "entities.jsonl").write_text(
        '{"id": "a", "type": "city", "labels": {"en": {"value": "Alpha"}}, "aliases": {"en": ["A."]}}\n'
        '{"id": "b", "labels": {"en": "Beta"}}\n{"id": "c", "labels": {"de": "Gamma"}}\n', encoding="utf-8")
    kb = read_kb(tmp_path)
    assert kb.labels("a", "en") == ["Alpha", "A."] and kb.entity_type("a") == "city"
    assert kb.triples(head="b") == [("b", "s", "c")]
    only = read_kb(tmp_path / "triples.jsonl")
    assert only.entities() == ["a", "b", "c"] and only.labels("a") == []


def test_split_layout_and_openke(tmp_path):
    for split, rows in (("train", "a\tr\tb\nb\tr\tc\n"), ("valid", "a\tr\tc\n"), ("test", "c\tr\ta\n")):
        (tmp_path / f"{split}.tsv").write_text(rows, encoding="utf-8")
    kb = read_kb(tmp_path)
    assert [len(kb.splits[s]) for s in ("train", "valid", "test")] == [2, 1, 1] and len(kb.triples()) == 4

    ok = tmp_path / "openke"
    ok.mkdir()
    (ok / "entity2id.txt").write_text("3\n/m/a\t0\n/m/b\t1\n/m/c\t2\n", encoding="utf-8")
    (ok / "relation2id.txt").write_text("1\n/r\t0\n", encoding="utf-8")
    (ok / "train2id.txt").write_text("2\n0 1 0\n1 2 0\n", encoding="utf-8")  # head tail relation
    (ok / "test2id.txt").write_text("1\n2 0 0\n", encoding="utf-8")
    kb = load_kb(ok)
    assert kb.splits["train"] == [("/m/a", "/r", "/m/b"), ("/m/b", "/r", "/m/c")]
    assert kb.splits["test"] == [("/m/c", "/r", "/m/a")]
    (ok / "train2id.txt").write_text("2\n0 1 0\n1 7 0\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"train2id.txt:3: entity id 7 is out of range"):
        load_kb(ok)
    (ok / "train2id.txt").write_text("3\n0 1 0\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"train2id.txt: the first line says 3 lines, but 1 follow"):
        load_kb(ok)


@pytest.mark.parametrize("text, message", [
    ("a\tr\tb\nc\tr\n", r"triples.tsv:2: expected 3 fields"),
    ("a\tr\tb\n\n# fine\na\tr\tb\tx\n", r"triples.tsv:4: expected 3 fields .* got 4"),
    ("a\tr\tb\n\tr\tb\n", r"triples.tsv:2: empty or non-string head id"),
    ("a\t \tb\n", r"triples.tsv:1: empty or non-string relation id"),
])
def test_malformed_triples_name_file_and_line(tmp_path, text, message):
    (tmp_path / "triples.tsv").write_text(text, encoding="utf-8")
    with pytest.raises(KBError, match=message):
        load_kb(tmp_path / "triples.tsv")


def test_malformed_names_and_json(tmp_path):
    (tmp_path / "triples.tsv").write_text("a\tr\tb\n", encoding="utf-8")
    (tmp_path / "entities.tsv").write_text("a\ten\tAlpha\nb\ten\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"entities.tsv:2: expected at least 3 fields"):
        read_kb(tmp_path)
    (tmp_path / "entities.tsv").write_text("a\ten\tAlpha\n\ten\tBeta\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"entities.tsv:2: empty id"):
        read_kb(tmp_path)
    (tmp_path / "entities.tsv").unlink()
    (tmp_path / "triples.tsv").unlink()
    (tmp_path / "triples.jsonl").write_text('{"head": "a", "relation": "r", "tail": "b"}\n{"head": "a"\n',
                                            encoding="utf-8")
    with pytest.raises(KBError, match=r"triples.jsonl:2: invalid JSON"):
        read_kb(tmp_path)
    (tmp_path / "triples.jsonl").write_text('{"head": "a", "tail": "b"}\n', encoding="utf-8")
    with pytest.raises(KBError, match=r"triples.jsonl:1: triple object lacks relation"):
        read_kb(tmp_path)


def test_unknown_entity_policy(kb_dir):
    with open(kb_dir / "triples.tsv", "a", encoding="utf-8") as handle:
        handle.write("Q17\tcurrency\tQ404\n")
    with pytest.raises(KBError, match=r"triples.tsv:7: unknown entity 'Q404'"):
        load_kb(kb_dir)
    kb = load_kb(kb_dir, on_unknown="add")
    assert "Q404" in kb and kb.labels("Q404") == [] and ("Q17", "currency", "Q404") in kb.triples()
    (kb_dir / "triples.tsv").write_text("Q17\tcapital\tQ183\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"triples.tsv:1: unknown relation 'capital'"):
        load_kb(kb_dir)


def test_duplicate_triples_are_one_fact_and_counted(tmp_path):
    (tmp_path / "t.tsv").write_text("a\tr\tb\na\tr\tb\na\ts\tb\n", encoding="utf-8")
    kb = load_kb(tmp_path / "t.tsv")
    assert len(kb.triples()) == 2 and kb.stats["duplicate_triples"] == 1


def test_an_installed_backend_is_found_through_its_entry_point_as_every_plug_in_is(tmp_path, monkeypatch):
    # a third-party package declaring backends in the babelzoo.knowledge_bases group
    package = tmp_path / "toy_kb_plugin.py"
    package.write_text("from babelzoo.knowledge import GraphKB\n"
                       "def build(size=2):\n"
                       "    kb = GraphKB('toy')\n"
                       "    for i in range(size):\n"
                       "        kb.add_triple(f'e{i}', 'next', f'e{i + 1}')\n"
                       "    return kb\n", encoding="utf-8")
    dist = tmp_path / "toy_kb_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-kb-plugin\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[babelzoo.knowledge_bases]\ntoy-chain = toy_kb_plugin:build\n"
                                           "toy-broken = toy_kb_missing:build\n"
                                           "cldr = toy_kb_plugin:build\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = dict(KNOWLEDGE_BASES._entries), set(KNOWLEDGE_BASES._loaded), KNOWLEDGE_BASES._listed
    KNOWLEDGE_BASES._listed = False
    try:
        assert "toy_kb_plugin" not in sys.modules  # nothing is imported before a name is asked for
        kb = load_kb("toy-chain", size=3)
        assert [t.head for t in kb.triples()] == ["e0", "e1", "e2"]
        assert "toy_kb_plugin" in sys.modules and "toy-chain" in KNOWLEDGE_BASES
        with pytest.raises(PlugInError, match=r"entry point toy-broken = toy_kb_missing:build \(group "
                                              r"babelzoo.knowledge_bases\) failed to load: ModuleNotFoundError"):
            load_kb("toy-broken")
        with pytest.raises(PlugInError, match="entry point toy-broken"):  # a listing imports every one
            list_kbs("toy*")
        assert KNOWLEDGE_BASES.get("cldr").__module__ == "babelzoo.knowledge.base"  # a built-in keeps its name
    finally:
        monkeypatch.undo()  # the plug-in leaves sys.path before the registry is put back
        KNOWLEDGE_BASES._entries, KNOWLEDGE_BASES._loaded, KNOWLEDGE_BASES._listed = saved
        sys.modules.pop("toy_kb_plugin", None)
    assert "toy-chain" not in list_kbs()


def test_register_in_code_and_unknown_name(tmp_path):
    @register_kb("tiny-test-kb", replace=True)
    def tiny():
        kb = GraphKB("tiny")
        kb.add_label("x", "en", "Ex", preferred=True)
        return kb

    try:
        assert load_kb("tiny-test-kb").labels("x", "en") == ["Ex"]
        with pytest.raises(RegistryError, match=r"unknown knowledge base 'tiny-tst-kb'; did you mean 'tiny-test-kb'"):
            load_kb("tiny-tst-kb")
    finally:
        KNOWLEDGE_BASES._entries.pop("tiny-test-kb", None)
    assert {"cldr", "codex-s"} <= set(list_kbs())


def test_json_round_trip(kb_dir):
    kb = load_kb(kb_dir)
    copy = GraphKB.from_dict(kb.to_dict())
    assert copy.to_dict() == kb.to_dict()
    assert copy.aliases(None) == kb.aliases(None)
