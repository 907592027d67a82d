"""Link prediction helped by another graph through aligned entities: the combined score is the
main ranker's z-score plus the weighted z-score of the counterpart's answer, moved onto the
asking graph's entities; the weight is chosen on valid."""

from __future__ import annotations

import numpy as np
import torch

from babelzoo.knowledge import LinkPredictionData
from babelzoo.knowledge.kge import create_kge
from babelzoo.knowledge.multilingual import AlignedEnsemble, Counterpart, fit_aligned_ensemble


def graph(prefix: str, n: int, train, valid=(), test=()) -> LinkPredictionData:
    rows = lambda triples: torch.tensor(triples, dtype=torch.long).reshape(-1, 3)  # noqa: E731
    return LinkPredictionData([f"{prefix}{i}" for i in range(n)], ["r", "s"], rows(train), rows(valid), rows(test))


def distmult(n: int, seed: int):
    torch.manual_seed(seed)
    model = create_kge("distmult", n, 2, 4)
    with torch.no_grad():
        model.entity.weight.normal_()
        model.relation.weight.normal_()
    return model.eval()


def z(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)


def test_the_counterparts_answer_moves_onto_the_aligned_entities():
    mine, theirs = graph("a", 4, [(0, 0, 1)]), graph("b", 5, [(0, 0, 1)])
    main, other = distmult(4, 0), distmult(5, 1)
    # a0 ↔ b2, a1 ↔ b0, a2 ↔ b4; a3 has no counterpart
    counterpart = Counterpart(other, mine, theirs, [("a0", "b2"), ("a1", "b0"), ("a2", "b4")], "b")
    ensemble = AlignedEnsemble(main, mine, [counterpart], weight=0.5)
    h, r = torch.tensor([0, 3]), torch.tensor([1, 0])
    with torch.no_grad():
        got = ensemble.score_tails(h, r).numpy()
        own = z(main.score_tails(h, r).numpy())
        asked = z(other.score_tails(torch.tensor([2]), torch.tensor([1])).numpy())[0]  # a0's question, asked as b2's
    expected = own.copy()
    expected[0, [0, 1, 2]] += 0.5 * asked[[2, 0, 4]]  # a3 has no counterpart: nothing added for it
    assert np.allclose(got, expected, atol=1e-5)  # the second question (a3) cannot be asked of b: its own z only
    with torch.no_grad():
        heads = ensemble.score_heads(torch.tensor([0]), torch.tensor([1])).numpy()
        asked = z(other.score_heads(torch.tensor([0]), torch.tensor([0])).numpy())[0]  # (?, r, a1) as (?, r, b0)
        expected = z(main.score_heads(torch.tensor([0]), torch.tensor([1])).numpy())
    expected[0, [0, 1, 2]] += 0.5 * asked[[2, 0, 4]]
    assert np.allclose(heads, expected, atol=1e-5)


def test_the_weight_is_chosen_on_valid_and_a_useful_counterpart_wins():
    # the answer of (a_i, r, ?) is a_{i+1}; graph b knows it for every i, graph a's model knows nothing
    n = 12
    facts = [(i, 0, (i + 1) % n) for i in range(n)]
    theirs = graph("b", n, facts)
    mine = graph("a", n, facts[:2], valid=facts[2:7], test=facts[7:])
    shift = torch.roll(torch.eye(n), 1, dims=1)

    class Shifted:  # a perfect ranker of graph b: score(h, r, t) = [t = h + 1]
        def score_tails(self, h, r):
            return shift[h]

        def score_heads(self, r, t):
            return shift.T[t]

    counterpart = Counterpart(Shifted(), mine, theirs, [(f"a{i}", f"b{i}") for i in range(n)], "b")
    ensemble, weight, tried = fit_aligned_ensemble(distmult(n, 3), mine, [counterpart])
    assert weight > 0 and dict(tried)[weight] > dict(tried)[0.0]
    from babelzoo.knowledge import evaluate

    assert evaluate(ensemble, mine, "test")["hits@1"] > evaluate(distmult(n, 3), mine, "test")["hits@1"]
