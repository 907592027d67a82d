"""Pre-training on a graph's facts reads its training triples only: the valid and test triples
that its link prediction is judged on stay held out unless a recipe asks for every triple."""

from __future__ import annotations

import pytest

from babelzoo.datasets.sources import parse_source
from babelzoo.errors import ConfigError
from babelzoo.knowledge.kb_sources import _shared_kb, shared_kb, split_kb
from babelzoo.knowledge.text_kg import read_text_kg
from babelzoo.typed import Where

TRAIN = [("01", "_hypernym", "02"), ("02", "_part_of", "03")]
DEV = [("03", "_hypernym", "04")]
TEST = [("04", "_part_of", "01")]


@pytest.fixture
def graph(tmp_path):
    folder = tmp_path / "graph"
    folder.mkdir()
    names = {"01": "oak", "02": "tree", "03": "forest", "04": "wood"}
    (folder / "entity2text.txt").write_text("".join(f"{k}\t{v}\n" for k, v in names.items()), encoding="utf-8")
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n_part_of\tpart of\n", encoding="utf-8")
    for name, rows in (("train.tsv", TRAIN), ("dev.tsv", DEV), ("test.tsv", TEST)):
        (folder / name).write_text("".join("\t".join(t) + "\n" for t in rows), encoding="utf-8")
    _shared_kb.cache_clear()
    yield folder
    _shared_kb.cache_clear()


def fact_triples(graph, **options) -> set[tuple[str, str, str]]:
    source = parse_source({"kind": "kb_facts", "kb": str(graph), "langs": ["en"], "exclude_heldout": False,
                           **options}, Where("data.entity_mlm[0]"))
    return {(f.head, f.relation, f.tail) for f in source.facts()}


def test_fact_sources_read_the_training_triples_unless_asked_for_more(graph):
    assert fact_triples(graph) == set(TRAIN)
    assert fact_triples(graph, split="all") == set(TRAIN + DEV + TEST)
    assert fact_triples(graph, split="test") == set(TEST)
    with pytest.raises(ConfigError, match="has the splits train, valid, test, not 'dev'"):
        fact_triples(graph, split="dev")


def test_a_split_view_keeps_every_entity_and_name_and_only_that_splits_triples(graph):
    kb = read_text_kg(graph)
    view = split_kb(kb, "train")
    assert set(view.triples()) == set(TRAIN) and len(kb.triples()) == 4  # the graph itself is untouched
    assert view.triples(head="03") == [] and kb.triples(head="03") != []
    assert view.entity_text("04") == "wood" and view.relation_label("_part_of") == "part of"
    assert split_kb(kb, "all") is kb


def test_k_bert_trees_hang_training_facts_only(graph):
    from babelzoo.knowledge.kbert import KBertInjector

    words = {w: i for i, w in enumerate("oak tree forest wood hypernym part of".split(), 10)}

    def encode(text: str) -> list[int]:
        return [words.get(w, 1) for w in text.split()]

    hung = {}
    for split in ("train", "all"):
        injector = KBertInjector(shared_kb(str(graph), split), encode, lang="en", max_branches=4, max_length=64,
                                 cls_id=2, sep_id=3, pad_id=0)
        hung[split] = sum(injector.tree("wood".split()).is_branch)
    assert hung["train"] == 0 and hung["all"] > 0  # wood's only facts are held out (valid and test)
