"""Language sampling q_i ∝ p_i^α (Lample & Conneau 2019): hand-computed values and statistics."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from babelzoo.datasets.sampling import LanguageSampler, cyclic_take, resample, sampling_probabilities


def test_hand_computed_square_root_smoothing():
    # p = (1000, 10)/1010; p^0.5 ∝ (√1000, √10) = √10·(10, 1) → q = (10/11, 1/11)
    q = sampling_probabilities({"en": 1000, "sw": 10}, alpha=0.5)
    assert q["en"] == pytest.approx(10 / 11, abs=1e-12) and q["sw"] == pytest.approx(1 / 11, abs=1e-12)


def test_three_languages_against_the_formula_written_out():
    counts = {"en": 900, "de": 90, "sw": 10}
    q = sampling_probabilities(counts, alpha=0.3)
    total = 1000
    powered = {k: (n / total) ** 0.3 for k, n in counts.items()}
    norm = sum(powered.values())
    assert q == pytest.approx({k: v / norm for k, v in powered.items()}, abs=1e-12)
    assert q["sw"] == pytest.approx(0.2512 / (0.9689 + 0.4856 + 0.2512), abs=1e-3)  # 0.147 vs 0.01 raw


def test_alpha_one_follows_data_alpha_zero_is_uniform():
    counts = {"en": 6, "de": 3, "fr": 1, "xx": 0}
    assert sampling_probabilities(counts, 1.0) == pytest.approx({"en": 0.6, "de": 0.3, "fr": 0.1, "xx": 0.0})
    # α=0 is uniform over languages that have data; an empty one never gets mass (0^0 would be 1)
    assert sampling_probabilities(counts, 0.0) == pytest.approx({"en": 1 / 3, "de": 1 / 3, "fr": 1 / 3, "xx": 0.0})


def test_smaller_alpha_raises_low_resource_share_monotonically():
    counts = {"en": 10_000, "fr": 1_000, "sw": 10}
    shares = [sampling_probabilities(counts, a)["sw"] for a in (1.0, 0.7, 0.5, 0.3, 0.0)]
    assert shares == sorted(shares) and shares[-1] == pytest.approx(1 / 3)


def test_language_pairs_as_keys():
    q = sampling_probabilities({("de", "en"): 29000, ("cs", "en"): 1000}, alpha=0.5)
    ratio = math.sqrt(29)
    assert q[("de", "en")] == pytest.approx(ratio / (ratio + 1))


@pytest.mark.parametrize("counts,alpha,message", [
    ({"en": -1, "de": 2}, 0.5, r"count for 'en' is -1"),
    ({"en": float("nan")}, 0.5, r"count for 'en' is nan"),
    ({"en": 1}, -0.5, r"alpha=-0.5"),
    ({}, 0.5, r"counts is empty"),
    ({"en": 0, "de": 0}, 0.5, r"every count is zero"),
])
def test_bad_arguments(counts, alpha, message):
    with pytest.raises(ValueError, match=message):
        sampling_probabilities(counts, alpha)


def test_sampler_deterministic_given_seed():
    counts = {"en": 900, "de": 90, "sw": 10}
    a = LanguageSampler(counts, 0.5, seed=7).sample(500)
    b = LanguageSampler(counts, 0.5, seed=7).sample(500)
    c = LanguageSampler(counts, 0.5, seed=8).sample(500)
    assert a == b and a != c
    assert set(a) == {"en", "de", "sw"}


def test_sampler_frequencies_match_probabilities():
    counts = {"en": 900, "de": 90, "sw": 10}
    sampler = LanguageSampler(counts, 0.5, seed=0)
    n = 200_000
    freq = Counter(sampler.sample(n))
    for lang, q in sampler.probabilities.items():
        sigma = math.sqrt(q * (1 - q) / n)
        assert abs(freq[lang] / n - q) < 4 * sigma, lang
    allocation = sampler.allocate(10_000)
    assert sum(allocation.values()) == 10_000 and allocation["sw"] > 10_000 * 0.01 * 5


def test_cyclic_take_never_repeats_before_exhaustion():
    rng = np.random.default_rng(0)
    drawn = cyclic_take(rng, 7, 23)
    assert sorted(drawn[:7]) == list(range(7)) and sorted(drawn[7:14]) == list(range(7))
    assert sorted(Counter(drawn.tolist()).values()) == [3, 3, 3, 3, 3, 4, 4]
    assert len(set(cyclic_take(rng, 100, 40).tolist())) == 40  # down-sampling: no duplicates
    with pytest.raises(ValueError, match="empty collection"):
        cyclic_take(rng, 0, 1)


def test_resample_for_tokenizer_training():
    corpora = {"en": [f"en{i}" for i in range(1000)], "sw": [f"sw{i}" for i in range(5)]}
    picked = resample(corpora, alpha=0.5, total=600, seed=3)
    assert picked == resample(corpora, alpha=0.5, total=600, seed=3)
    assert sum(map(len, picked.values())) == 600
    # q_sw = √5/(√1000+√5) ≈ 0.066 → ~40 of 600 (3 at α=1): the 5 sentences repeat evenly
    assert 20 < len(picked["sw"]) < 60
    counts = Counter(picked["sw"])
    assert set(counts) == set(corpora["sw"]) and max(counts.values()) - min(counts.values()) <= 1
    assert len(set(picked["en"])) == len(picked["en"])  # the large corpus is not repeated
