"""Exponentially smoothed sampling over languages or language pairs (Lample & Conneau 2019).

XLM (Lample & Conneau, "Cross-lingual Language Model Pretraining", 2019, §3.1) samples
sentences of language *i* with probability

    p_i = n_i / Σ_k n_k,        q_i = p_i^α / Σ_j p_j^α

where ``n_i`` is the number of sentences (or tokens) in language *i*. α = 1 follows the data,
α = 0 is uniform over the languages that have data, and α in between raises low-resource
languages. The exponent is chosen separately for building the tokenizer's training text (XLM:
α = 0.5) and for drawing training batches (XLM: 0.7; XLM-R, Conneau et al. 2020: 0.3), so both
are parameters here, not constants. Keys are any hashable: language codes, or ``(src, tgt)``
tuples to sample translation directions for TLM-style objectives::

    sampling_probabilities({"en": 1000, "sw": 10}, alpha=0.5)
    # {'en': 0.909..., 'sw': 0.0909...}   (α=1 would give 0.990 / 0.0099)
    sampling_probabilities({("de", "en"): 29000, ("cs", "en"): 1000}, alpha=0.3)
"""

from __future__ import annotations

import math
from typing import Hashable, Mapping, Sequence, TypeVar

import numpy as np

from ..errors import ConfigError, InputError

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def sampling_probabilities(counts: Mapping[K, float], alpha: float) -> dict[K, float]:
    """``q_i = p_i^α / Σ_j p_j^α`` with ``p_i = n_i / Σ_k n_k`` (Lample & Conneau 2019, §3.1).

    A key with count 0 gets probability 0 for every α (it has nothing to sample). Raises
    ``ValueError`` naming the key for a negative or non-finite count, and for α < 0.
    """
    if not counts:
        raise InputError("no languages to sample from: counts is empty")
    if not math.isfinite(alpha) or alpha < 0:
        raise ConfigError(f"alpha={alpha}: expected a finite exponent >= 0 (1 = follow the data, 0 = uniform)")
    for key, n in counts.items():
        if not math.isfinite(n) or n < 0:
            raise InputError(f"count for {key!r} is {n}: expected a finite number >= 0")
    total = float(sum(counts.values()))
    if total == 0:
        raise InputError(f"every count is zero ({', '.join(map(repr, counts))}): nothing to sample")
    # q_i ∝ p_i^α over the keys with data (0^0 would otherwise give an empty language mass)
    weights = {k: (n / total) ** alpha if n > 0 else 0.0 for k, n in counts.items()}
    norm = sum(weights.values())
    return {k: w / norm for k, w in weights.items()}


def cyclic_take(rng: np.random.Generator, n: int, m: int) -> np.ndarray:
    """The first ``m`` items of a stream of fresh random permutations of ``range(n)``: every item
    is drawn once before any is drawn twice (up-sampling repeats whole passes, down-sampling
    draws without replacement)."""
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if n <= 0:
        raise InputError(f"cannot draw {m} items from an empty collection")
    passes = -(-m // n)
    return np.concatenate([rng.permutation(n) for _ in range(passes)])[:m].astype(np.int64)


class LanguageSampler:
    """A seeded categorical sampler over languages (or pairs) with ``q ∝ p^α``.

    Deterministic: the same ``counts``, ``alpha`` and ``seed`` give the same draws.

    >>> sampler = LanguageSampler({"en": 900, "de": 90, "sw": 10}, alpha=0.5, seed=0)
    >>> sampler.probabilities["sw"]              # ≈ 0.0741 (0.01 with α=1)
    >>> sampler.sample(4)                       # e.g. ['en', 'de', 'en', 'sw']
    """

    def __init__(self, counts: Mapping[K, float], alpha: float, seed: int = 0):
        self.alpha = alpha
        self.seed = seed
        self.probabilities: dict[K, float] = sampling_probabilities(counts, alpha)
        self.keys: list[K] = list(self.probabilities)
        self._q = np.array([self.probabilities[k] for k in self.keys])
        self._rng = np.random.default_rng(seed)

    def sample_indices(self, n: int) -> np.ndarray:
        """``n`` draws as indices into :attr:`keys`."""
        return self._rng.choice(len(self.keys), size=n, p=self._q)

    def sample(self, n: int) -> list[K]:
        """``n`` independent draws of a key."""
        return [self.keys[i] for i in self.sample_indices(n)]

    def __call__(self) -> K:
        return self.sample(1)[0]

    def allocate(self, total: int) -> dict[K, int]:
        """How many of ``total`` items each key gets: a multinomial draw with probabilities q."""
        return dict(zip(self.keys, (int(c) for c in self._rng.multinomial(total, self._q))))


def resample(corpora: Mapping[K, Sequence[T]], alpha: float, total: int, seed: int = 0) -> dict[K, list[T]]:
    """Draw ``total`` items across corpora with language probabilities ``q ∝ p^α`` (p from the
    corpus sizes), e.g. the sentences a multilingual tokenizer is trained on (XLM: α = 0.5).

    Within a corpus items are taken in random order without repetition until it is exhausted
    (then a new pass starts), so a small language is repeated only as much as α asks for.
    """
    sampler = LanguageSampler({k: len(v) for k, v in corpora.items()}, alpha, seed)
    rng = np.random.default_rng([seed, 1])
    chosen: dict[K, list[T]] = {}
    for key, m in sampler.allocate(total).items():
        items = corpora[key]
        chosen[key] = [items[i] for i in cyclic_take(rng, len(items), m)]
    return chosen
