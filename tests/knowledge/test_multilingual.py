"""Link prediction helped by another graph through aligned entities: the combined score is the
main ranker's z-score plus the weighted z-score of the counterpart's answer, moved onto the
asking graph's entities; the weight is chosen on valid."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from babelzoo.knowledge import LinkPredictionData
from babelzoo.knowledge.base import KBError
from babelzoo.knowledge.kge import TextComplEx, create_kge
from babelzoo.knowledge.multilingual import (AlignedEnsemble, Counterpart, JointGraphs, alignment_clusters,
                                             fit_aligned_ensemble)


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


# One model over several graphs


def two_graphs():
    """Graph a (3 entities, relations r, s) and graph b (4 entities, relations s, t); a1 ↔ b3, a2 ↔ b0."""
    rows = lambda triples: torch.tensor(triples, dtype=torch.long).reshape(-1, 3)  # noqa: E731
    a = LinkPredictionData(["x", "y", "z"], ["r", "s"], rows([(0, 0, 1), (1, 1, 2)]), rows([(0, 1, 2)]),
                           rows([(2, 0, 0)]))
    b = LinkPredictionData(["p", "q", "u", "v"], ["s", "t"], rows([(0, 1, 3), (2, 0, 1)]), rows([(3, 0, 0)]),
                           rows([(1, 1, 2)]))
    return JointGraphs.build({"a": a, "b": b}, {("a", "b"): [("y", "v"), ("z", "p")]})


def aligned_model(joint, seed=0):
    torch.manual_seed(seed)
    model = create_kge("aligned_text_complex", joint.data.num_entities, joint.data.num_relations, 3, text_dim=5,
                       dropout=0.0, graph_sizes=joint.graph_sizes, num_clusters=joint.num_clusters)
    model.set_entity_text(torch.randn(joint.data.num_entities, 5))
    model.set_alignment(joint.cluster)
    with torch.no_grad():
        model.entity.weight.normal_()
    return model.eval()


def test_joint_graphs_number_entities_graph_after_graph_and_share_relations_and_clusters():
    joint = two_graphs()
    assert joint.data.entities == ["a:x", "a:y", "a:z", "b:p", "b:q", "b:u", "b:v"]
    assert joint.data.relations == ["r", "s", "t"]
    assert joint.relation_maps[1].tolist() == [1, 2]  # b's s and t are the joint relations 1 and 2
    assert joint.data.train.tolist() == [[0, 0, 1], [1, 1, 2], [3, 2, 6], [5, 1, 4]]
    assert joint.data.test.tolist() == [[2, 0, 0], [4, 2, 5]]
    # a:y ↔ b:v and a:z ↔ b:p share a cluster; the others are alone
    assert joint.cluster.tolist() == [0, 1, 2, 2, 3, 4, 1]
    assert joint.cluster[1] == joint.cluster[6] and joint.cluster[2] == joint.cluster[3]
    assert joint.num_clusters == 5 and len(set(joint.cluster.tolist())) == 5


def test_alignment_clusters_are_connected_components():
    cluster, count = alignment_clusters(6, [(0, 3), (3, 5), (1, 2)])
    assert count == 3 and cluster.tolist() == [0, 1, 1, 0, 2, 0]


def test_an_aligned_entity_shares_its_structure_vector_and_keeps_its_own_text():
    joint = two_graphs()
    model = aligned_model(joint)
    vectors = model.entity_vectors()
    text = model.projection(model.entity_text)
    assert torch.allclose(vectors - text, model.entity.weight[joint.cluster])
    assert torch.allclose((vectors - text)[1], (vectors - text)[6])  # a:y and b:v: one structure vector
    assert not torch.allclose(vectors[1], vectors[6])  # ... and their own names


def test_questions_are_answered_among_their_own_graphs_entities():
    joint = two_graphs()
    model = aligned_model(joint)
    h, r = torch.tensor([0, 5]), torch.tensor([1, 2])
    with torch.no_grad():
        scores = model.score_tails(h, r)
        everyone = TextComplEx.score_tails(model, h, r)  # the same model scoring every entity
    assert torch.isinf(scores[0, 3:]).all() and torch.isinf(scores[1, :3]).all()
    assert torch.allclose(scores[0, :3], everyone[0, :3], atol=1e-6)
    assert torch.allclose(scores[1, 3:], everyone[1, 3:], atol=1e-6)
    # the loss: cross-entropy against the question's own graph only
    answers = torch.tensor([2, 4])
    expected = (torch.nn.functional.cross_entropy(everyone[0:1, :3], torch.tensor([2]))
                + torch.nn.functional.cross_entropy(everyone[1:2, 3:], torch.tensor([1]))) / 2
    with torch.no_grad():
        assert torch.allclose(model.one_vs_all_loss(h, r, answers), expected, atol=1e-6)


def test_a_view_ranks_a_graph_in_its_own_indices_as_the_joint_model_does():
    from babelzoo.knowledge import evaluate
    from babelzoo.knowledge.link_prediction import KnownTriples

    joint = two_graphs()
    model = aligned_model(joint)
    view = joint.view(model, "b")
    with torch.no_grad():
        # b's question (q, t, ?) is the joint (b:q, t, ?): joint relation 2
        assert torch.allclose(view.score_tails(torch.tensor([1]), torch.tensor([1])),
                              model.score_tails(torch.tensor([4]), torch.tensor([2]))[:, 3:], atol=1e-6)
        assert torch.allclose(view.score_heads(torch.tensor([0]), torch.tensor([1])),
                              model.score_heads(torch.tensor([1]), torch.tensor([4]))[:, 3:], atol=1e-6)
    # per-graph metrics pooled over the graphs are the joint data's metrics
    pooled = [evaluate(joint.view(model, n), g, "test", filters=KnownTriples(g)) for n, g in zip(joint.names,
                                                                                                 joint.graphs)]
    together = evaluate(model, joint.data, "test")
    assert abs(together["mrr"] - (pooled[0]["mrr"] + pooled[1]["mrr"]) / 2) < 1e-6  # one test triple each
    with pytest.raises(KBError, match="no graph 'c'"):
        joint.view(model, "c")


def test_a_fact_one_graph_knows_is_learnt_by_the_other_through_the_shared_vectors():
    """Graph b knows (b_i, r, b_{i+1}) for every i; graph a knows it for half its entities. The
    joint model answers most of a's other questions; a model of graph a alone answers almost none."""
    from babelzoo.knowledge import evaluate
    from babelzoo.knowledge.link_prediction import KGETrainConfig, KnownTriples, train_kge

    n = 16
    rows = lambda triples: torch.tensor(triples, dtype=torch.long).reshape(-1, 3)  # noqa: E731
    chain = [(i, 0, i + 1) for i in range(n - 1)]
    a = LinkPredictionData([f"a{i}" for i in range(n)], ["r"], rows(chain[:8]), rows(chain[8:11]), rows(chain[11:]))
    b = LinkPredictionData([f"b{i}" for i in range(n)], ["r"], rows(chain), rows(chain[:1]), rows(chain[:1]))
    config = KGETrainConfig(loss="1vsall", lr=0.05, batch_size=64, epochs=150, eval_every=50, patience=10)

    def trained(joint):
        torch.manual_seed(0)
        model = create_kge("aligned_text_complex", joint.data.num_entities, 1, 8, text_dim=4, dropout=0.0,
                           graph_sizes=joint.graph_sizes, num_clusters=joint.num_clusters)
        model.set_entity_text(torch.randn(joint.data.num_entities, 4))  # names that say nothing
        model.set_alignment(joint.cluster)
        train_kge(model, joint.data, config)
        return evaluate(joint.view(model, "a"), a, "test", filters=KnownTriples(a))["tail_hits@1"]

    together = trained(JointGraphs.build({"a": a, "b": b}, {("a", "b"): [(f"a{i}", f"b{i}") for i in range(n)]}))
    alone = trained(JointGraphs.build({"a": a}, {}))
    assert together >= 0.75 and alone <= 0.25  # measured: 0.75 and 0.0
