"""Text link prediction: the memory ranks every entity exactly as a brute-force scan does, and
the one filtered evaluator gives the metrics of those ranks computed by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from babelzoo.cli import main

from babelzoo.knowledge import KBError, LinkPredictionData, evaluate
from babelzoo.knowledge.text_kg import read_text_kg
from babelzoo.knowledge.text_link import TextLinkPredictor

ENTITIES = {
    "01": "dog, a domesticated carnivorous mammal kept as a pet",
    "02": "canine, a mammal of the family Canidae",
    "03": "cat, a small domesticated feline",
    "04": "feline, a mammal of the cat family",
    "05": "mammal, a warm-blooded animal that feeds its young with milk",
    "06": "bark, the sound made by a dog",
    "07": "meow, the sound made by a cat",
    "08": "oak, a tree that bears acorns",
    "09": "tree, a tall perennial woody plant",
    "10": "plant, a living organism without the power of locomotion",
}
TRAIN = [("01", "_hypernym", "02"), ("03", "_hypernym", "04"), ("02", "_hypernym", "05"), ("04", "_hypernym", "05"),
         ("08", "_hypernym", "09"), ("06", "_derivationally_related_form", "01")]
TEST = [("09", "_hypernym", "10"), ("07", "_derivationally_related_form", "03"), ("01", "_hypernym", "05")]


@pytest.fixture
def kg(kg_dir):
    return read_text_kg(kg_dir)


@pytest.fixture
def kg_dir(tmp_path):
    folder = tmp_path / "kg"
    folder.mkdir()
    (folder / "entity2text.txt").write_text("".join(f"{k}\t{v}\n" for k, v in ENTITIES.items()), encoding="utf-8")
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n_derivationally_related_form\tderivationally "
                                              "related form\n", encoding="utf-8")
    for name, rows in (("train.tsv", TRAIN), ("test.tsv", TEST)):
        (folder / name).write_text("".join("\t".join(t) + "\n" for t in rows), encoding="utf-8")
    return folder


def brute_force_ranks(predictor, data, kb):
    """Filtered ranks by a plain scan: float64 cosines of every question with every entity."""
    entities = predictor.encode([predictor.text.entity(t) for t in predictor.entity_texts]).astype(np.float64)
    known = {tuple(t) for split in kb.splits.values() for t in split}
    ranks = []
    for inverse in (False, True):
        for h, r, t in data.test.tolist():
            asked, answer = (t, h) if inverse else (h, t)
            question = predictor.text.question(predictor.entity_texts[asked], predictor.relation_words[r], inverse)
            scores = entities @ predictor.encode([question])[0].astype(np.float64)
            def is_known(e):  # another true answer: filtered out
                triple = (data.entities[e], data.relations[r], data.entities[asked]) if inverse else \
                    (data.entities[asked], data.relations[r], data.entities[e])
                return triple in known

            others = [e for e in range(data.num_entities) if e != answer and not is_known(e)]
            higher = sum(scores[e] > scores[answer] + 1e-6 for e in others)
            ties = sum(abs(scores[e] - scores[answer]) <= 1e-6 for e in others)
            ranks.append(1 + higher + ties / 2)
    return np.array(ranks)


def test_memory_ranks_equal_a_brute_force_scan_and_the_evaluator_reads_them(kg, e5_small):
    data = LinkPredictionData.from_kb(kg)
    predictor = TextLinkPredictor(e5_small, kg, data)
    ranks = brute_force_ranks(predictor, data, kg)
    metrics = evaluate(predictor, data, "test")
    tails, heads = ranks[:len(TEST)], ranks[len(TEST):]
    assert metrics["tail_mrr"] == pytest.approx(np.mean(1 / tails), abs=1e-6)
    assert metrics["head_mrr"] == pytest.approx(np.mean(1 / heads), abs=1e-6)
    assert metrics["mrr"] == pytest.approx(np.mean(1 / ranks), abs=1e-6)
    assert metrics["hits@3"] == pytest.approx(np.mean(ranks <= 3), abs=1e-6)
    assert len(predictor.memory) == len(ENTITIES)


def test_predict_gives_the_best_entities_with_their_text(kg, e5_small):
    predictor = TextLinkPredictor(e5_small, kg, LinkPredictionData.from_kb(kg))
    best = predictor.predict("07", "_derivationally_related_form", k=3)
    assert len(best) == 3 and [s for _, _, s in best] == sorted((s for _, _, s in best), reverse=True)
    assert best[0][1] == ENTITIES[best[0][0]]
    with pytest.raises(KBError, match=r"unknown entity 'zz'"):
        predictor.predict("zz", "_hypernym")
    with pytest.raises(KBError, match=r"unknown relation '_part_of'; the graph's relations: _hypernym"):
        predictor.predict("07", "_part_of")


def test_kb_eval_prints_and_writes_the_evaluators_metrics(kg, kg_dir, e5_small, tmp_path, capsys):
    expected = evaluate(TextLinkPredictor(e5_small, kg, LinkPredictionData.from_kb(kg)), LinkPredictionData.from_kb(kg))
    out = tmp_path / "eval.json"
    assert main(["kb", "eval", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"filtered MRR {expected['mrr']:.4f}" in printed and f"Hits@10 {expected['hits@10']:.4f}" in printed
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["metrics"]["mrr"] == pytest.approx(expected["mrr"], abs=1e-5) and record["entities"] == 10
    assert record["text"]["query_prefix"] == "query: " and len(record["graph_sha256"]) == 64
    assert main(["kb", "eval", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--out", str(out)]) == 0
    mine = tmp_path / "mine.json"  # a file of the user's is never replaced
    mine.write_text("{}", encoding="utf-8")
    assert main(["kb", "eval", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--out", str(mine)]) == 2
    assert "a file babelzoo did not write; nothing was changed" in capsys.readouterr().err
    assert mine.read_text(encoding="utf-8") == "{}"


def test_kb_eval_writes_every_triples_ranks_which_give_its_metrics(kg, kg_dir, e5_small, tmp_path, capsys):
    data = LinkPredictionData.from_kb(kg)
    ranks = tmp_path / "ranks.tsv"
    assert main(["kb", "eval", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--ranks", str(ranks)]) == 0
    assert f"wrote {ranks}" in capsys.readouterr().out
    header, *rows = [line.split("\t") for line in ranks.read_text(encoding="utf-8").splitlines()]
    assert header == ["head", "relation", "tail", "tail_rank", "head_rank"]
    assert [tuple(r[:3]) for r in rows] == [(data.entities[h], data.relations[r], data.entities[t])
                                            for h, r, t in data.test.tolist()]
    # an independent evaluation: each tail's rank by brute force over the model's cosines, the
    # other true tails of (h, r) left out, ties at the mean rank
    predictor = TextLinkPredictor(e5_small, kg, data)
    known = {(h, r, t) for split in ("train", "valid", "test") for h, r, t in data.split(split).tolist()}
    for (h, r, t), row in zip(data.test.tolist(), rows):
        scores = predictor.score_tails(torch.tensor([h]), torch.tensor([r]))[0].tolist()
        others = [s for e, s in enumerate(scores) if e != t and (h, r, e) not in known]
        expected = 1 + sum(s > scores[t] for s in others) + sum(s == scores[t] for s in others) / 2
        assert float(row[3]) == expected
    tails = torch.tensor([float(r[3]) for r in rows])
    heads = torch.tensor([float(r[4]) for r in rows])
    mrr = float(torch.cat([1 / tails, 1 / heads]).mean())
    assert mrr == pytest.approx(evaluate(predictor, data)["mrr"], abs=1e-6)
    mine = tmp_path / "mine.tsv"  # a file of the user's is never replaced
    mine.write_text("mine\n", encoding="utf-8")
    assert main(["kb", "eval", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--ranks", str(mine)]) == 2
    assert "--ranks " in capsys.readouterr().err and mine.read_text(encoding="utf-8") == "mine\n"


def test_kb_predict_prints_the_best_entities_by_id_or_text(kg_dir, capsys):
    assert main(["kb", "predict", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "--k", "3",
                 ENTITIES["07"], "derivationally related form"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"(07, _derivationally_related_form, ?)  {ENTITIES['07']}" and len(lines) == 4
    assert all(line.split()[0] == str(rank) for rank, line in enumerate(lines[1:], 1))
    assert main(["kb", "predict", "--model", "multilingual_e5_small", "--kg", str(kg_dir), "zebra", "_hypernym"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["babelzoo kb: unknown entity 'zebra': no id or text of the graph matches it"]
