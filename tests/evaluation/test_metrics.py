import numpy as np
import pytest

from babelzoo.evaluation.metrics import accuracy_at_1, bli_precision_at_1, csls_matrix, paired_recall_at_k, recall_at_k


def test_accuracy_at_1_on_a_known_matrix():
    queries = np.eye(4)
    keys = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1.0]])  # 1 and 2 swapped
    assert accuracy_at_1(queries, keys) == 0.5
    assert accuracy_at_1(queries * 3.0, keys) == 0.5  # cosine: scale-free


def test_recall_at_k_by_hand():
    sim = np.array([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8], [0.4, 0.6, 0.1]])
    gold = [[0], [1], [2]]
    # query 0: rank 1; query 1: order 2,1,0 -> gold at rank 2; query 2: order 1,0,2 -> rank 3
    assert recall_at_k(sim, gold, ks=(1, 2, 3)) == {1: 1 / 3, 2: 2 / 3, 3: 1.0}


def test_csls_on_a_tiny_example():
    src = np.array([[1.0, 0.0], [0.8, 0.6], [0.9, 0.436]])
    src = src / np.linalg.norm(src, axis=1, keepdims=True)
    tgt = np.array([[1.0, 0.0], [0.0, 1.0]])
    cos = src @ tgt.T
    r_t = np.sort(cos, axis=1)[:, -2:].mean(axis=1)  # k = 2 nearest targets of each source
    r_s = np.sort(cos, axis=0)[-2:, :].mean(axis=0)  # k = 2 nearest sources of each target
    expected = 2 * cos - r_t[:, None] - r_s[None, :]
    np.testing.assert_allclose(csls_matrix(src, tgt, k=2), expected, atol=1e-6)
    # Target 0 is a hub: nearest neighbour sends source 1 to it; CSLS sends it to target 1.
    gold = [[0], [1], [0]]
    assert bli_precision_at_1(src, tgt, gold, "nn") == pytest.approx(2 / 3)
    assert bli_precision_at_1(src, tgt, gold, "csls", k=2) == 1.0


def test_unknown_bli_method():
    with pytest.raises(ValueError, match="unknown BLI retrieval method 'knn'"):
        bli_precision_at_1(np.eye(2), np.eye(2), [[0], [1]], "knn")


def test_paired_recall_breaks_ties_at_random_in_expectation():
    sim = np.array([[0.9, 0.1, 0.5, 0.2],   # gold first: rank 1
                    [0.8, 0.3, 0.8, 0.1],   # two above gold: rank 3
                    [0.4, 0.6, 0.6, 0.6],   # tied with two others, none above: rank 1, 2 or 3
                    [0.5, 0.5, 0.5, 0.5]])  # all four tied: rank 1..4
    got = paired_recall_at_k(sim, ks=(1, 2, 3))
    assert got["R@1"] == pytest.approx((1 + 0 + 1 / 3 + 1 / 4) / 4)
    assert got["R@2"] == pytest.approx((1 + 0 + 2 / 3 + 2 / 4) / 4)
    assert got["R@3"] == pytest.approx((1 + 1 + 1 + 3 / 4) / 4)
