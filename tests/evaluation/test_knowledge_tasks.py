"""The knowledge leaderboard tasks on hand-made inputs with hand-computed metrics: cross-lingual
entity linking (cldr_linking) and zero-shot filtered link prediction (codex_link_prediction)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from babelzoo.evaluation.metrics import l2_normalise
from babelzoo.evaluation.tasks import TaskContext, TaskSkipped, load_tasks
from babelzoo.evaluation.tasks.knowledge import (codex_link_prediction, entity_description, evaluate_linking,
                                                 linking_set, text_link_prediction)
from babelzoo.knowledge import GraphKB, LinkPredictionData, read_codex
from babelzoo.knowledge.facts import is_heldout_entity


class TableEncoder:
    """A sentence encoder given as a table: each text has a fixed vector (test input, so that the
    rankings, and hence the metrics, are known by hand)."""

    name = "table"
    protocol = {"pooling": "table"}

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.calls: list[tuple[str, ...]] = []

    def encode(self, sentences, lang=None):
        self.calls.append((lang, *sentences))
        missing = [s for s in sentences if s not in self.table]
        assert not missing, f"no vector for {missing}"
        return l2_normalise(np.array([self.table[s] for s in sentences], dtype=np.float32))


def _toy_kb() -> GraphKB:
    kb = GraphKB("toy")
    for entity, kind in (("territory:DE", "territory"), ("territory:GE", "territory"), ("territory:JP", "territory"),
                         ("currency:JPY", "currency"), ("subdivision:US-GA", "subdivision")):
        kb.add_entity(entity, kind)
    for entity, lang, name in (("territory:JP", "en", "Japan"), ("territory:JP", "fr", "Japon"),
                               ("territory:JP", "de", "Japan"), ("territory:DE", "en", "Germany"),
                               ("territory:DE", "fr", "Allemagne"), ("territory:DE", "de", "Deutschland"),
                               ("territory:GE", "en", "Georgia"), ("territory:GE", "fr", "Géorgie"),
                               ("currency:JPY", "en", "Japanese Yen"), ("currency:JPY", "fr", "yen japonais"),
                               ("subdivision:US-GA", "en", "Georgia"), ("subdivision:US-GA", "fr", "Géorgie")):
        kb.add_label(entity, lang, name)
    kb.add_triple("territory:JP", "uses_currency", "currency:JPY")
    return kb


def test_entity_descriptions_and_linking_sets():
    kb = _toy_kb()
    assert entity_description(kb, "territory:JP") == "Japan, a territory; uses currency: Japanese Yen"
    assert entity_description(kb, "currency:JPY") == "Japanese Yen, a currency; uses currency of: Japan"
    assert entity_description(kb, "territory:DE") == "Germany, a territory"
    assert entity_description(kb, "territory:JP", facts=0) == "Japan, a territory"
    candidates, mentions, gold = linking_set(kb, "fr", "territory", heldout_only=False)
    assert candidates == ["territory:DE", "territory:GE", "territory:JP"]  # the subdivision Georgia is no candidate
    assert mentions == ["Allemagne", "Géorgie", "Japon"] and gold == [[0], [1], [2]]
    # German "Japan" is the English name: not a cross-lingual mention
    assert linking_set(kb, "de", "territory", heldout_only=False)[1:] == (["Deutschland"], [[0]])
    kb.add_label("territory:GE", "fr", "Japon")  # a name shared by two candidates: both are gold
    assert linking_set(kb, "fr", "territory", heldout_only=False)[2] == [[0], [1], [1, 2]]


def test_linking_accuracy_by_hand():
    kb = _toy_kb()
    encoder = TableEncoder({
        "Germany, a territory": [1, 0, 0], "Georgia, a territory": [0, 1, 0],
        "Japan, a territory; uses currency: Japanese Yen": [0, 0, 1],
        "Japanese Yen, a currency; uses currency of: Japan": [1, 1, 1],
        "Allemagne": [0.9, 0.1, 0], "Géorgie": [0, 0.2, 0.8], "Japon": [0, 0, 1],  # Géorgie → Japan: wrong
        "yen japonais": [1, 0, 0],  # the only currency: right whatever its vector
        "Deutschland": [0, 1, 0]})  # → Georgia: wrong
    lines = []
    results = evaluate_linking(encoder, kb, [("fr", "fr"), ("de", "de")], kinds=("territory", "currency"),
                               heldout_only=False, log=lines.append)
    fr, de = results
    assert lines == ["  cldr_linking fr: acc@1 0.750 over 4 mentions (territory 0.667 of 3, currency 1.000 of 1)",
                     "  cldr_linking de: acc@1 0.000 over 1 mention (territory 0.000 of 1)"]
    assert fr.metric == "acc@1 fr" and fr.value == pytest.approx(0.75)  # 3 of 4 mentions
    assert fr.protocol["per_type"] == {"territory": pytest.approx(2 / 3, abs=1e-4), "currency": 1.0}
    assert fr.protocol["sizes"]["territory"] == {"mentions": 3, "candidates": 3}
    assert fr.protocol["n"] == 4 and fr.family == "acc@1 X→entity"
    assert de.value == 0.0 and de.protocol["n"] == 1
    # mentions are encoded in their language, descriptions in English
    assert {call[0] for call in encoder.calls if "Japon" in call} == {"fr"}
    assert {call[0] for call in encoder.calls if "Germany, a territory" in call} == {"en"}
    limited = evaluate_linking(encoder, kb, [("fr", "fr")], kinds=("territory",), limit=1, seed=3,
                               heldout_only=False)
    assert limited[0].protocol["n"] == 1 and limited[0].value in (0.0, 1.0)


def test_cldr_linking_sets_on_the_embedded_kb():
    from babelzoo.knowledge import load_kb

    kb = load_kb("cldr")
    candidates, mentions, gold = linking_set(kb, "fr", "territory", heldout_only=False)
    _, heldout, heldout_gold = linking_set(kb, "fr", "territory")
    # The task's mentions name held-out entities only (never in the demo's training facts).
    assert 0.15 * len(mentions) < len(heldout) < 0.35 * len(mentions)
    assert all(any(is_heldout_entity(candidates[i]) for i in g) for g in heldout_gold)
    assert len(candidates) > 250 and "territory:JP" in candidates
    assert candidates[gold[mentions.index("Japon")][0]] == "territory:JP"
    assert "Japan" not in linking_set(kb, "de", "territory", heldout_only=False)[1]
    currencies, names, gold = linking_set(kb, "ja", "currency", heldout_only=False)
    assert currencies[gold[names.index("日本円")][0]] == "currency:JPY"
    text = entity_description(kb, "territory:JP")
    assert text.startswith("Japan, a territory; uses currency: Japanese Yen; official language: Japanese")
    assert "cldr_linking" in load_tasks() and "codex_link_prediction" in load_tasks()


def _codex_folder(tmp_path):
    """A 5-entity CoDEx-style folder: A..E, one relation."""
    folder = tmp_path / "codex-s"
    (folder / "relations").mkdir(parents=True)
    (folder / "entities").mkdir()
    (folder / "train.txt").write_text("A\tr\tB\nC\tr\tE\n", encoding="utf-8")
    (folder / "valid.txt").write_text("D\tr\tA\n", encoding="utf-8")
    (folder / "test.txt").write_text("A\tr\tC\nB\tr\tD\n", encoding="utf-8")
    (folder / "relations" / "en.json").write_text(json.dumps({"r": {"label": "likes"}}), encoding="utf-8")
    labels = {"A": "alpha", "B": "beta", "C": "gamma", "D": "delta", "E": "epsilon"}
    (folder / "entities" / "en.json").write_text(json.dumps({k: {"label": v} for k, v in labels.items()}),
                                                 encoding="utf-8")
    return folder, labels


def _link_encoder(labels):
    order = ["A", "B", "C", "D", "E"]
    table = {labels[e]: np.eye(5)[i].tolist() for i, e in enumerate(order)}  # score of e = query[index of e]
    table.update({
        # (A, r, C) tail: C 0.5 < B 0.9 (known (A, r, B): filtered) and D 0.7 → rank 2
        "alpha likes": [0.1, 0.9, 0.5, 0.7, 0.0],
        # (B, r, D) tail: D ties with C → rank 1.5
        "beta likes": [0.2, 0.3, 0.6, 0.6, 0.1],
        # (A, r, C) head: A 0.3 < E 0.5 → rank 2
        "gamma inverse likes": [0.3, 0.1, 0.0, 0.0, 0.5],
        # (B, r, D) head: B first; A above it would be filtered anyway ((?, r, D): only B)
        "delta inverse likes": [0.0, 0.9, 0.1, 0.2, 0.3]})
    return TableEncoder(table)


def test_text_link_prediction_filtered_mrr_by_hand(tmp_path):
    folder, labels = _codex_folder(tmp_path)
    kb = read_codex(folder, size="s")
    data = LinkPredictionData.from_kb(kb)
    metrics = text_link_prediction(_link_encoder(labels), kb, data, "test")
    # ranks: tails 2, 1.5; heads 2, 1
    assert metrics["tail_mrr"] == pytest.approx((1 / 2 + 1 / 1.5) / 2)
    assert metrics["head_mrr"] == pytest.approx((1 / 2 + 1) / 2)
    assert metrics["mrr"] == pytest.approx((1 / 2 + 1 / 1.5 + 1 / 2 + 1) / 4)
    assert metrics["hits@1"] == 0.25 and metrics["hits@3"] == 1.0 and metrics["tail_hits@1"] == 0.0


def test_codex_task_reports_and_skips(tmp_path):
    folder, labels = _codex_folder(tmp_path)
    rows = codex_link_prediction(_link_encoder(labels), TaskContext(data_dir=tmp_path, log=lambda s: None))
    assert [r.metric for r in rows] == ["MRR", "Hits@1", "Hits@10"]
    assert rows[0].value == pytest.approx(2.6666667 / 4) and rows[2].value == 1.0
    assert rows[0].protocol["n"] == 2 and rows[0].protocol["candidates"] == 5
    with pytest.raises(TaskSkipped, match="--data-dir with a codex-s/ folder"):
        codex_link_prediction(_link_encoder(labels), TaskContext(data_dir=None))
    (folder / "entities" / "en.json").unlink()
    with pytest.raises(TaskSkipped, match="English labels for 0% of its entities"):
        codex_link_prediction(_link_encoder(labels), TaskContext(data_dir=tmp_path))


def test_codex_task_on_the_standard_mirror_without_entity_names(shared_data):
    if (shared_data / "codex-s" / "entities").is_dir():
        pytest.skip("this mirror has CoDEx entity names")
    with pytest.raises(TaskSkipped, match="entities/en.json"):
        codex_link_prediction(TableEncoder({}), TaskContext(data_dir=shared_data))


def test_a_kg_embedding_model_on_the_leaderboard(tmp_path):
    import torch

    from babelzoo.evaluation.leaderboard import ModelSpec, run_matrix
    from babelzoo.knowledge.kge import create_kge, save_kge

    folder, _ = _codex_folder(tmp_path)
    data = LinkPredictionData.from_kb(read_codex(folder, size="s"))
    model = create_kge("distmult", 5, 1, 5)
    with torch.no_grad():  # score(h, r, t) = e_h · e_t: 1 for h = t, else 0
        model.entity.weight.copy_(torch.eye(5))
        model.relation.weight.fill_(1.0)
    save_kge(model, data.entities, data.relations, tmp_path / "distmult", data="toy")
    specs = [ModelSpec("distmult", "kge", str(tmp_path / "distmult"))]
    results, cells = run_matrix(specs, ["codex_link_prediction", "gettext_retrieval"],
                                TaskContext(data_dir=tmp_path, log=lambda s: None), log=lambda s: None)
    assert [c.status for c in cells] == ["ok", "skipped"]
    assert "does not encode text" in cells[1].detail
    # test triples (A, r, C), (B, r, D). Each query's own entity scores 1, every other 0; ties count half.
    # tail (A, r, ?): A above C; B filtered (train); D, E tie → 3. tail (B, r, ?): B above; A, C, E tie → 3.5.
    # head (?, r, C): C above; B, D, E tie → 3.5. head (?, r, D): D above; A, C, E tie → 3.5.
    mrr = next(r for r in results if r.metric == "MRR")
    assert mrr.value == pytest.approx((1 / 3 + 3 / 3.5) / 4)
    assert mrr.protocol["kge"] == "distmult" and mrr.protocol["tail_mrr"] == pytest.approx((1 / 3 + 1 / 3.5) / 2,
                                                                                          abs=1e-4)
    assert next(r for r in results if r.metric == "Hits@1").value == 0.0
    other = tmp_path / "codex-other"
    other.mkdir()
    save_kge(model, ["A", "B", "C", "D", "X"], data.relations, other, data="elsewhere")
    with pytest.raises(ValueError, match="trained on other entities than this CoDEx-S folder .* e.g. E, X"):
        from babelzoo.evaluation.encoders import KGEModelEncoder

        codex_link_prediction(KGEModelEncoder.load("other", other), TaskContext(data_dir=tmp_path))


def test_a_kge_row_with_a_recipe_trains_once_then_reuses_its_folder(tmp_path):
    from babelzoo.evaluation.leaderboard import ModelSpec, run_matrix
    from babelzoo.knowledge.kge import load_kge

    _codex_folder(tmp_path)
    spec = ModelSpec.from_dict({"name": "distmult", "kind": "kge", "source": str(tmp_path / "kge"),
                                "recipe": "distmult"})
    lines = []
    results, cells = run_matrix([spec], ["codex_link_prediction"], TaskContext(data_dir=tmp_path, log=lambda s: None),
                                log=lines.append)
    assert cells[0].status == "ok" and any("training distmult on" in line for line in lines)
    model, entities, _ = load_kge(tmp_path / "kge")
    assert sorted(entities) == ["A", "B", "C", "D", "E"] and model.dim == 256  # DistMult recipe: 256 dimensions
    first = [r.value for r in results]
    lines.clear()
    again, cells = run_matrix([spec], ["codex_link_prediction"], TaskContext(data_dir=tmp_path, log=lambda s: None),
                              log=lines.append)
    assert [r.value for r in again] == first and not any("training" in line for line in lines)
    missing = ModelSpec("other", "kge", str(tmp_path / "none"), recipe="transe")
    _, cells = run_matrix([missing], ["codex_link_prediction"], TaskContext(data_dir=None), log=lambda s: None)
    assert cells[0].status == "failed" and "needs --data-dir with a codex-s/ folder" in cells[0].detail
