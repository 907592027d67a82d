"""The noising functions of the seq2seq objectives, without a model: BART's Poisson spans (rate
and length histogram over 100k tokens), infilling and sentence permutation, T5's span counts,
segmentation and sentinel layout, MASS's fragment."""

import math
from collections import Counter
from itertools import permutations

import pytest
import torch

from babelzoo.errors import InputError
from babelzoo.objectives.noising import (
    corrupt_spans,
    draw_span_lengths,
    group_words,
    infill,
    mass_fragment,
    noise_budget,
    permute_sentences,
    place_spans,
    poisson_span_lengths,
    random_segmentation,
    t5_noise_counts,
    t5_noise_mask,
)

M = 4  # the mask id


def within(count: float, n: int, p: float, sigmas: float = 4.0) -> bool:
    """``count`` of ``n`` Bernoulli(p) trials lies within ``sigmas`` standard deviations."""
    return abs(count - n * p) < sigmas * math.sqrt(n * p * (1 - p))


def test_poisson_lengths_from_zero_are_the_poisson_pmf():
    probs = poisson_span_lengths(3.0, 40, min_length=0)
    by_hand = [3 ** k * math.exp(-3) / math.factorial(k) for k in range(41)]
    torch.testing.assert_close(probs, torch.tensor(by_hand, dtype=torch.float64) / sum(by_hand))
    assert abs(float(probs[0]) - math.exp(-3)) < 1e-12  # P(0) = e^{−3}: the clip past 40 removes ~1e-30


def test_noise_budget_is_randomised_rounding():
    generator = torch.Generator().manual_seed(0)
    budgets = [noise_budget(97, 0.3, generator) for _ in range(4000)]
    assert set(budgets) == {29, 30}  # ⌊29.1 + u⌋
    assert within(budgets.count(30), 4000, 0.1)
    assert noise_budget(5, 0.0, generator) == 0 and noise_budget(5, 1.0, generator) == 5


def test_infill_layout_by_hand():
    ids = [10, 11, 12, 13, 14, 15, 16, 17]
    # x2 x3 → one mask; a 0-length span before x6 inserts a mask; x7 x8 → one mask
    assert infill(ids, [(1, 3), (5, 5), (6, 8)], M) == [10, M, 13, 14, M, 15, M]
    assert infill(ids, [(0, 8)], M) == [M]
    assert infill(ids, [], M) == ids
    with pytest.raises(InputError, match=r"span \(2, 4\)"):
        infill(ids, [(1, 3), (2, 4)], M)


def test_words_are_grouped_by_their_start_flags_and_infilled_whole():
    starts = [True] * 64
    starts[11] = starts[12] = starts[15] = False
    words = group_words([10, 11, 12, 13, 14, 15], starts)
    assert words == [[10, 11, 12], [13], [14, 15]]
    assert group_words([11, 13], starts) == [[11], [13]]  # the first id begins a word whatever its flag
    # the first word → one mask, a mask inserted before the third word
    assert [t for w in infill(words, [(0, 1), (2, 2)], [M]) for t in w] == [M, 13, M, 14, 15]


def test_span_lengths_are_poisson_3_over_100k_tokens():
    generator = torch.Generator().manual_seed(0)
    probs = poisson_span_lengths(3.0, 40, min_length=0)
    lengths = draw_span_lengths(100_000, probs, 0, generator)
    assert sum(lengths) == 100_000  # the last span is cut to the budget exactly
    drawn = lengths[:-1]
    counts = Counter(drawn)
    for k in range(9):  # P(ℓ = 0..8) within 4σ; ℓ = 0 are the inserted masks
        assert within(counts[k], len(drawn), float(probs[k])), (k, counts[k], len(drawn) * float(probs[k]))
    assert abs(sum(drawn) / len(drawn) - 3.0) < 4 * math.sqrt(3.0 / len(drawn))  # E[ℓ] = Var[ℓ] = λ


def test_infilling_masks_30_percent_over_100k_tokens_one_mask_per_span():
    generator = torch.Generator().manual_seed(0)
    probs = poisson_span_lengths(3.0, 40, min_length=0)
    n, rows, removed = 97, 1100, 0  # 106,700 tokens
    ids = list(range(10, 10 + n))
    for _ in range(rows):
        budget = noise_budget(n, 0.3, generator)
        lengths = draw_span_lengths(budget, probs, 0, generator)
        spans = place_spans(n, lengths, generator)
        assert sorted(e - s for s, e in spans) == sorted(lengths)
        assert all(0 <= s <= e <= n for s, e in spans)
        assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))  # in order, never overlapping
        out = infill(ids, spans, M)
        assert out.count(M) == len(spans) and len(out) == n - budget + len(spans)
        # each mask stands for its span: putting the spans back gives the text
        back, pieces = [], iter(spans)
        for token in out:
            if token == M:
                s, e = next(pieces)
                back += ids[s:e]
            else:
                back.append(token)
        assert back == ids
        removed += budget
    # Σ budgets: each row 29 or 30 tokens, 30 with probability 0.1 (variance 0.09 a row)
    assert abs(removed - 0.3 * n * rows) < 4 * math.sqrt(0.09 * rows)


def test_spans_are_placed_over_the_whole_text():
    generator = torch.Generator().manual_seed(0)
    n, rows = 20, 4000
    hit = torch.zeros(n)
    for _ in range(rows):
        for s, e in place_spans(n, [3, 3], generator):
            hit[s:e] += 1
    # every interleaving of the 2 spans and 14 kept tokens is equally likely: the first token is
    # masked when a span comes first, P = 2/16; by symmetry the last token as often
    assert within(float(hit[0]), rows, 2 / 16) and within(float(hit[-1]), rows, 2 / 16)
    assert float(hit.sum()) == 6 * rows
    with pytest.raises(InputError, match="do not fit"):
        place_spans(5, [3, 3])


def test_sentence_permutation_keeps_the_sentences_and_draws_every_order():
    generator = torch.Generator().manual_seed(0)
    sentences = [[10, 11], [20], [30, 31, 32]]
    orders = Counter()
    for _ in range(6000):
        out = permute_sentences(sentences, generator)
        assert sorted(map(tuple, out)) == sorted(map(tuple, sentences))  # the multiset of sentences
        orders[tuple(s[0] for s in out)] += 1
    assert set(orders) == set(permutations([10, 20, 30]))
    assert all(within(c, 6000, 1 / 6) for c in orders.values()), orders


def test_t5_span_counts_by_hand():
    # num_noise = round(L·0.15) in [1, L − 1], num_spans = max(1, round(num_noise / 3)), halves to even
    assert t5_noise_counts(100) == (15, 5)
    assert t5_noise_counts(512) == (77, 26)
    assert t5_noise_counts(30) == (4, 1)    # round(4.5) = 4, as np.round
    assert t5_noise_counts(10) == (2, 1)    # round(1.5) = 2
    assert t5_noise_counts(2) == (1, 1)     # at least one noise token
    assert t5_noise_counts(70) == (10, 3) and t5_noise_counts(7) == (1, 1)


def test_random_segmentation_is_uniform_over_compositions():
    generator = torch.Generator().manual_seed(0)
    counts = Counter(tuple(random_segmentation(5, 3, generator)) for _ in range(6000))
    # the C(4, 2) = 6 compositions of 5 into 3 positive parts, each 1/6
    assert set(counts) == {(1, 1, 3), (1, 3, 1), (3, 1, 1), (1, 2, 2), (2, 1, 2), (2, 2, 1)}
    assert all(within(c, 6000, 1 / 6) for c in counts.values()), counts
    with pytest.raises(InputError, match="cannot cut 2 items into 3"):
        random_segmentation(2, 3)


def runs(mask):
    """Lengths of the runs of equal values, and the value of the first run."""
    out, previous = [], None
    for value in mask:
        if value == previous:
            out[-1] += 1
        else:
            out.append(1)
        previous = value
    return out


def test_t5_noise_mask_rate_and_span_lengths_over_100k_tokens():
    generator = torch.Generator().manual_seed(0)
    length, rows = 100, 1000
    noise_spans, noisy = [], 0
    for _ in range(rows):
        mask = t5_noise_mask(length, 0.15, 3.0, generator)
        assert len(mask) == length and not mask[0] and mask[-1]  # kept first, noise last
        lengths = runs(mask)
        assert len(lengths) == 10  # 5 kept and 5 noise segments, interleaved
        noise_spans += lengths[1::2]
        noisy += sum(mask)
    assert noisy == 15 * rows  # exactly round(100·0.15) a row
    assert sum(noise_spans) / len(noise_spans) == 3.0
    # a part of a uniform composition of 15 into 5: P(ℓ) = C(15 − ℓ − 1, 3) / C(14, 4)
    counts = Counter(noise_spans)
    for span in range(1, 9):
        p = math.comb(15 - span - 1, 3) / math.comb(14, 4)
        assert within(counts[span], len(noise_spans), p), (span, counts[span], p * len(noise_spans))


def test_sentinel_layout_of_the_papers_example():
    # "Thank you for inviting me to your party last week ." with for inviting / last dropped
    ids = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
    noise = [False, False, True, True, False, False, False, False, True, False, False]
    X, Y, Z = 100, 101, 102
    inputs, target = corrupt_spans(ids, noise, [X, Y, Z, 103])
    assert inputs == [10, 11, X, 14, 15, 16, 17, Y, 19, 20]
    assert target == [X, 12, 13, Y, 18, Z]
    # T5's own masks end in noise: the final sentinel follows the last span
    assert corrupt_spans([10, 11, 12], [False, True, True], [X, Y]) == ([10, X], [X, 11, 12, Y])
    with pytest.raises(InputError, match="2 noise spans need 3 sentinels; the vocabulary has 2"):
        corrupt_spans(ids, noise, [X, Y])


def test_mass_fragment_is_half_the_sentence_at_a_uniform_start():
    generator = torch.Generator().manual_seed(0)
    starts, masked = Counter(), 0
    for _ in range(10_000):
        start, end = mass_fragment(10, 0.5, generator)
        assert end - start == 5
        starts[start] += 1
    assert set(starts) == set(range(6)) and all(within(c, 10_000, 1 / 6) for c in starts.values())
    for _ in range(15_000):  # 105k tokens: fragments of 3 or 4 of 7, 3.5 on average
        start, end = mass_fragment(7, 0.5, generator)
        assert 0 <= start and end <= 7 and end - start in (3, 4)
        masked += end - start
    assert within(masked - 3 * 15_000, 15_000, 0.5)  # the extra token is a fair coin
    assert mass_fragment(1, 0.5, generator) == (0, 1)
