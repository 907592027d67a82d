"""KG embeddings: scoring identities of every registered model, filtered ranking by hand,
training on small graphs, and the CoDEx loader."""

from __future__ import annotations

import pytest
import torch

from babelzoo.knowledge import GraphKB, KGE_MODELS, LinkPredictionData, create_kge, evaluate, train_kge
from babelzoo.knowledge.codex import read_codex
from babelzoo.knowledge.link_prediction import KGETrainConfig, filtered_ranks, negative_sampling_loss

A, B, C, D, E = range(5)


class TableScorer:
    """A fixed score table T[h, t] for one relation: the hand-made graph's 'model'."""

    def __init__(self, table):
        self.table = torch.tensor(table, dtype=torch.float)

    def score_tails(self, h, r):
        return self.table[h]

    def score_heads(self, r, t):
        return self.table[:, t].T


def test_filtered_mrr_on_a_hand_made_five_entity_graph():
    data = LinkPredictionData(entities=list("abcde"), relations=["r"],
                              train=torch.tensor([[A, 0, B], [A, 0, C], [B, 0, C], [D, 0, E]]),
                              valid=torch.zeros(0, 3, dtype=torch.long),
                              test=torch.tensor([[A, 0, D], [C, 0, E]]))
    #         tails: a  b  c  d  e
    table = [[0, 5, 4, 3, 1],   # a
             [2, 0, 6, 1, 9],   # b
             [1, 1, 0, 2, 9],   # c
             [3, 2, 1, 0, 9],   # d
             [1, 1, 1, 7, 0]]   # e
    metrics = evaluate(TableScorer(table), data, "test")
    # (a, r, d) tails: b (5) and c (4) score higher but are known answers → filtered rank 1.
    # (c, r, e) tails: e is the best → 1.
    # (a, r, d) heads, column d: e (7) > a (3), e is not a known head of d → rank 2.
    # (c, r, e) heads, column e: b, c and d score 9; d is known (d, r, e) and filtered; b ties → 1.5.
    assert metrics["tail_mrr"] == pytest.approx(1.0)
    assert metrics["head_mrr"] == pytest.approx((1 / 2 + 1 / 1.5) / 2)
    assert metrics["mrr"] == pytest.approx((1 + 1 + 1 / 2 + 1 / 1.5) / 4)
    assert metrics["hits@1"] == pytest.approx(0.5) and metrics["head_hits@1"] == 0.0
    assert metrics["hits@3"] == 1.0 and metrics["tail_hits@1"] == 1.0


def test_filtered_ranks_match_a_naive_loop():
    g = torch.Generator().manual_seed(1)
    scores = torch.randint(0, 6, (20, 15), generator=g).float()  # many ties
    targets = torch.randint(0, 15, (20,), generator=g)
    known = torch.rand(20, 15, generator=g) < 0.3
    ranks = filtered_ranks(scores, targets, known)
    for i in range(20):
        s, t = scores[i].tolist(), int(targets[i])
        others = [j for j in range(15) if j != t and not known[i, j]]
        expected = 1 + sum(s[j] > s[t] for j in others) + 0.5 * sum(s[j] == s[t] for j in others)
        assert float(ranks[i]) == expected


@pytest.mark.parametrize("name", KGE_MODELS.list())
@pytest.mark.parametrize("reciprocal", [False, True])
def test_all_entity_scoring_agrees_with_triple_scoring(name, reciprocal):
    model = create_kge(name, 7, 3, 8, reciprocal=reciprocal)
    with torch.no_grad():  # move off the initial scale so that every term matters
        model.entity.weight.normal_()
        model.relation.weight.normal_()
    h, r, t = torch.tensor([0, 3, 6, 2]), torch.tensor([0, 2, 1, 1]), torch.tensor([5, 3, 0, 4])
    direct = model.score(h, r, t)
    assert torch.allclose(model.score_tails(h, r)[torch.arange(4), t], direct, atol=1e-4)
    candidates = torch.tensor([[5, 1], [3, 0], [0, 0], [4, 6]])
    assert torch.allclose(model.score_tails(h, r, candidates)[:, 0], direct, atol=1e-4)
    heads = model.score_heads(r, t)[torch.arange(4), h]
    expected = model.score(t, model.inverse(r), h) if reciprocal else direct
    assert torch.allclose(heads, expected, atol=1e-4)
    assert torch.allclose(model.score_heads(r, t, torch.stack([h, h], 1))[:, 1], expected, atol=1e-4)


def test_known_score_values():
    transe = create_kge("transe", 3, 1, 2, p=1, gamma=1.0)
    rotate = create_kge("rotate", 2, 1, 1, gamma=2.0)
    with torch.no_grad():
        transe.entity.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 1.0], [3.0, 0.0]]))
        transe.relation.weight.copy_(torch.tensor([[1.0, 0.0]]))
        rotate.entity.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # 1 and i
        rotate.relation.weight.fill_(rotate.range / 2)  # phase π/2: multiplication by i
    # ‖(0,0) + (1,0) − (1,1)‖₁ = 1 → 1 − 1 = 0;  ‖(1,0) − (3,0)‖₁ = 2 → −1
    assert transe.score(torch.tensor([0, 0]), torch.tensor([0, 0]), torch.tensor([1, 2])).tolist() == [0.0, -1.0]
    # rotating 1 by π/2 gives i exactly: distance 0, score γ
    with torch.no_grad():
        assert float(rotate.score(torch.tensor([0]), torch.tensor([0]), torch.tensor([1]))) == pytest.approx(2.0, abs=1e-3)


def test_self_adversarial_weights_hard_negatives():
    positive = torch.tensor([2.0])
    negative = torch.tensor([[3.0, -5.0]])
    uniform = negative_sampling_loss(positive, negative, "uniform")
    adversarial = negative_sampling_loss(positive, negative, "self_adversarial", temperature=1.0)
    softplus = torch.nn.functional.softplus
    p = torch.softmax(negative[0], 0)
    assert float(uniform) == pytest.approx(float(softplus(-positive) + (softplus(negative[0])).mean()))
    assert float(adversarial) == pytest.approx(float(softplus(-positive) + (p * softplus(negative[0])).sum()))
    assert float(adversarial) > float(uniform)  # the hard negative (3.0) dominates


def _chain(n: int = 12) -> LinkPredictionData:
    kb = GraphKB("chain")
    for i in range(n - 1):
        kb.add_triple(f"e{i}", "next", f"e{i + 1}")
        kb.add_triple(f"e{i + 1}", "prev", f"e{i}")
    data = LinkPredictionData.from_kb(kb)
    data.valid = data.test = data.train
    return data


@pytest.mark.parametrize("name, loss, kwargs, lr", [
    ("transe", "self_adversarial", {"gamma": 4.0}, 0.05),
    ("complex", "1vsall", {"reciprocal": True}, 0.1),
    ("rotate", "self_adversarial", {"gamma": 4.0}, 0.05),
    ("distmult", "1vsall", {}, 0.1),
])
def test_training_learns_a_chain(name, loss, kwargs, lr):
    data = _chain()
    model = create_kge(name, data.num_entities, data.num_relations, 16, **kwargs)
    before = evaluate(model, data, "train")["mrr"]
    summary = train_kge(model, data, KGETrainConfig(epochs=80, batch_size=11, lr=lr, loss=loss, negatives=8,
                                                    eval_every=20, patience=10))
    after = evaluate(model, data, "train")
    assert summary["valid"]["mrr"] == pytest.approx(after["mrr"])  # the best weights are restored
    if name == "distmult":  # symmetric: cannot tell next from prev, so both neighbours tie
        assert after["hits@3"] > 0.9
    else:
        assert after["mrr"] > 0.9 and before < 0.6


def test_codex_loader(shared_data):
    kb = read_codex(shared_data / "codex-s")
    assert len(kb.entities()) == 2034 and len(kb.relations()) == 42
    assert [len(kb.splits[s]) for s in ("train", "valid", "test")] == [32888, 1827, 1828]
    assert len(kb.negatives["valid"]) == 1827 and len(kb.negatives["test"]) == 1828
    assert kb.relation_label("P17", "en") == "country" and kb.relation_label("P17", "de") == "Staat"
    assert ("Q7604", "P1412", "Q188") in kb.triples(head="Q7604", relation="P1412")  # first line of train.txt
    assert kb.graph.nodes["Q7604"]["types"]
    data = LinkPredictionData.from_kb(kb)
    assert data.train.shape == (32888, 3) and int(data.train.max()) < 2034


def test_codex_download_verifies_checksums(shared_data, tmp_path, monkeypatch):
    import shutil

    from babelzoo.datasets.download import DownloadError
    from babelzoo.knowledge.codex import CODEX_S_FILES, download_codex_s, load_codex

    upstream = tmp_path / "upstream"  # the upstream repository's layout, served by file:// URLs
    for local, (remote, _) in CODEX_S_FILES.items():
        (upstream / remote).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data / "codex-s" / local, upstream / remote)
    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("babelzoo.knowledge.codex.UPSTREAM", upstream.as_uri())
    kb = load_codex("s")
    assert (tmp_path / "cache" / "knowledge" / "codex-s" / "relations" / "de.json").is_file()
    assert len(kb.splits["test"]) == 1828 and kb.relation_label("P17", "es")
    with open(upstream / "triples/codex-s/test.txt", "a", encoding="utf-8") as handle:
        handle.write("Q1\tP17\tQ2\n")
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        download_codex_s(upstream.as_uri(), tmp_path / "again")


def test_a_kge_run_has_the_shape_of_every_run(tmp_path):
    from babelzoo.knowledge.link_prediction import build_kge_run
    from babelzoo.train.run import Run

    data = _chain()  # 22 training triples
    run = build_kge_run(create_kge("transe", data.num_entities, data.num_relations, 8), data,
                        KGETrainConfig(epochs=6, batch_size=8, eval_every=2, lr=0.05), tmp_path / "kge")
    assert isinstance(run, Run) and run.tokenizer is None and run.evaluator.metric == "mrr"
    # 3 steps an epoch (⌈22 / 8⌉): 18 steps, evaluated every 6
    assert (run.config.max_steps, run.config.eval_every, run.config.output_dir) == (18, 6, str(tmp_path / "kge"))
    summary = run.trainer().fit()
    assert [e["step"] for e in summary["evaluations"]] == [6, 12, 18]
