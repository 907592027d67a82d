"""benchmarks/kg_multilingual.py: every trained arm is the shipped recipe on one DBP-5L graph with
named overrides, KEnS's protocol is tail prediction filtered by the training triples only, and the
table renders every arm, protocol and alignment pair."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from babelzoo.knowledge import LinkPredictionData
from babelzoo.knowledge.kge import create_kge
from babelzoo.knowledge.text_kge import read_link_recipe
from babelzoo.train.config import recipe_path
from benchmarks import kg_multilingual as M


def test_each_arm_is_the_shipped_recipe_on_one_graph(tmp_path):
    shipped = dataclasses.asdict(read_link_recipe(recipe_path("kgc_e5_small")))
    for arm in M.TRAINED:
        got = dataclasses.asdict(read_link_recipe(recipe_path("kgc_e5_small"),
                                                  M.overrides_for(arm, "ja", tmp_path, tmp_path / "dbp5l", 8, 60)))
        assert got["kg"] == {"path": str(tmp_path / "dbp5l" / "ja"), "lang": "ja", "graphs": [], "valid_limit": None}
        assert (got["train"]["max_seconds"], got["train"]["epochs"]) == (480.0, 60)
        assert got["output_dir"] == str(tmp_path / f"{arm}_ja") and got["cache_dir"] == str(tmp_path / "cache_ja")
        assert got["encoder"] == shipped["encoder"]


def test_kens_protocol_ranks_tails_filtered_by_training_triples_only():
    rows = lambda t: torch.tensor(t, dtype=torch.long).reshape(-1, 3)  # noqa: E731
    # (0, r, ?) has answers 1 (train), 2 (valid) and 3 (test)
    graph = LinkPredictionData(["e0", "e1", "e2", "e3", "e4"], ["r"], rows([(0, 0, 1)]), rows([(0, 0, 2)]),
                               rows([(0, 0, 3)]))
    model = create_kge("distmult", 5, 1, 5, reciprocal=False)
    with torch.no_grad():  # score(0, r, t): e1 (4) > e2 (3) > e3 (2) > e4 (1) > e0 (-70)
        model.entity.weight.copy_(torch.eye(5))
        model.entity.weight[0] = torch.tensor([1.0, 4.0, 3.0, 2.0, 1.0])
        model.relation.weight.copy_(torch.tensor([[-100.0, 1.0, 1.0, 1.0, 1.0]]))
    got = M.both_protocols(model.eval(), graph)
    assert got["kens"]["mrr"] == pytest.approx(1 / 2)  # e1 filtered (train), e2 not (valid): rank 2
    assert got["kens"]["hits@1"] == 0.0 and got["kens"]["hits@10"] == 1.0


def test_the_table_renders_every_arm_protocol_and_pair():
    metrics = {"hits@1": 0.25, "hits@10": 0.5, "mrr": 0.3}
    lp = {lang: {arm: {"test": {"kens": metrics, "babelzoo": metrics}, "train_cpu_seconds": 60.0} for arm in M.TRAINED}
          for lang in M.LANGS}
    for lang in M.LANGS:
        lp[lang]["together"] = {"weight": 0.25, "test": {"kens": metrics, "babelzoo": metrics}}
    report = {"budget_cpu_minutes": {"text_structure": 8, "structure": 4, "text_only": 4}, "epochs": 60, "machine": {"cpus": 2}, "link_prediction": lp,
              "alignment": {"el-en": {"seeds": 687, "test_pairs": 1603, "cpu_seconds": 50.0, "settings": {"weight": 0.2,
                                      "rounds": 2}, "test": {**metrics, "assigned_hits@1": 0.9}}},
              "secondary": {"SS-AGA": {"hits@1": {"el": 30.8}, "source": "x"}}}
    text = M.markdown(report)
    cells = " | ".join(["25.0 / 50.0 / 30.0"] * 5)
    for arm in ("structure only: ComplEx", "all five together through the seed alignments"):
        assert f"| {arm} | kens | {cells} |" in text and f"| {arm} | babelzoo | {cells} |" in text
    assert len([line for line in text.splitlines() if line.startswith("| ") and " | kens | " in line]) == 4
    assert "| el-en | 687 | 1603 | 25.0 | 50.0 | 30.0 | 90.0 | 0.2, 2 | 50 |" in text
    assert "Training budgets per graph in CPU minutes: text_structure 8, structure 4, text_only 4" in text
    assert "Ensemble weights (valid): el 0.25" in text and "| *SS-AGA* (secondary source, unverified: x) | Hits@1 | 30.8 |" in text
