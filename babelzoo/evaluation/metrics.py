"""Retrieval metrics, written as the formulas of their protocols.

All functions take L2-normalised embedding matrices (numpy or torch) so that a dot product is
the cosine similarity."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..zoo.config import ConfigError


def _np(x) -> np.ndarray:
    return x.detach().cpu().float().numpy() if hasattr(x, "detach") else np.asarray(x, dtype=np.float32)


def l2_normalise(x) -> np.ndarray:
    """Rows of ``x`` (a tensor or an array) divided by their L2 norm, as float32 numpy."""
    from ..zoo.sentences import l2_normalised

    return l2_normalised(_np(x))


def cosine_matrix(queries, keys) -> np.ndarray:
    return l2_normalise(queries) @ l2_normalise(keys).T


def accuracy_at_1(queries, keys) -> float:
    """XTREME/LASER Tatoeba: query i's translation is key i; accuracy@1 = mean_i [argmax_j cos(q_i, k_j) = i]."""
    sim = cosine_matrix(queries, keys)
    return float(np.mean(sim.argmax(axis=1) == np.arange(len(sim))))


def recall_at_k(sim: np.ndarray, gold: Sequence[Sequence[int]], ks: Sequence[int] = (1, 5, 10)) -> dict[int, float]:
    """R@k = fraction of queries with at least one gold key among the k most similar keys."""
    order = np.argsort(-sim, axis=1, kind="stable")
    out = {}
    for k in ks:
        top = order[:, :k]
        out[k] = float(np.mean([bool(set(top[i]).intersection(g)) for i, g in enumerate(gold)]))
    return out


def csls_matrix(src, tgt, k: int = 10) -> np.ndarray:
    """Cross-domain similarity local scaling (Conneau et al. 2018, "Word Translation Without
    Parallel Data"): CSLS(x, y) = 2 cos(x, y) − r_T(x) − r_S(y), where r_T(x) is the mean cosine
    of x to its k nearest targets and r_S(y) that of y to its k nearest sources."""
    sim = cosine_matrix(src, tgt)
    k_t, k_s = min(k, sim.shape[1]), min(k, sim.shape[0])
    r_t = np.sort(sim, axis=1)[:, -k_t:].mean(axis=1)
    r_s = np.sort(sim, axis=0)[-k_s:, :].mean(axis=0)
    return 2 * sim - r_t[:, None] - r_s[None, :]


def bli_precision_at_1(src, tgt, gold: Sequence[Sequence[int]], method: str = "nn", k: int = 10) -> float:
    """Bilingual lexicon induction P@1: the nearest target word (by cosine, or by CSLS) is one of
    the source word's gold translations."""
    if method == "nn":
        sim = cosine_matrix(src, tgt)
    elif method == "csls":
        sim = csls_matrix(src, tgt, k)
    else:
        raise ConfigError(f"unknown BLI retrieval method {method!r}; use 'nn' or 'csls'")
    best = sim.argmax(axis=1)
    return float(np.mean([best[i] in set(g) for i, g in enumerate(gold)]))


def paired_recall_at_k(sim: np.ndarray, ks: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
    """R@K for paired retrieval: query i's gold key is key i. Ties are broken at random, in
    expectation: with g keys scored above the gold one and t tied with it,
    P(gold in the top K) = clip(K − g, 0, t + 1) / (t + 1). (A baseline that gives many keys one
    score would otherwise be credited with every tie.)"""
    sim = np.asarray(sim)
    n = len(sim)
    gold = sim[np.arange(n), np.arange(n)]
    above = (sim > gold[:, None]).sum(axis=1)
    ties = (sim == gold[:, None]).sum(axis=1) - 1
    return {f"R@{k}": float((np.clip(k - above, 0, ties + 1) / (ties + 1)).mean()) for k in ks}
