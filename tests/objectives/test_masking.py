"""Masking statistics over >= 100k tokens, whole words, spans, dynamic re-masking."""

from __future__ import annotations

import pytest
import torch

from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import Masker, MaskingConfig, span_length_distribution, word_starts_from_pieces
from babelzoo.objectives.batching import IGNORE, pad

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=500, languages={"en": 0})


def random_batch(rows: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """[CLS] random ids [SEP] + padding, lengths between length/2 and length."""
    out = []
    for _ in range(rows):
        n = int(torch.randint(length // 2, length - 1, (1,), generator=generator))
        out.append([1, *torch.randint(5, 500, (n,), generator=generator).tolist(), 2])
    return pad(out, 0)


def test_token_masking_rates_over_100k_tokens():
    g = torch.Generator().manual_seed(0)
    ids = random_batch(1600, 128, g)
    maskable = ~torch.isin(ids, torch.tensor([0, 1, 2, 3, 4]))
    assert int(maskable.sum()) >= 100_000
    out, labels = Masker(SPECIALS)(ids, generator=g)
    chosen = labels.ne(IGNORE)
    assert not bool((chosen & ~maskable).any()), "special tokens and padding are never chosen"
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(out[~chosen], ids[~chosen])
    rate = chosen.sum() / maskable.sum()
    assert abs(float(rate) - 0.15) < 0.003
    n = int(chosen.sum())
    masked = out[chosen].eq(4).sum() / n
    kept = out[chosen].eq(ids[chosen]).sum() / n
    randomised = 1 - masked - kept
    replacements = 495  # non-special ids a random replacement is drawn from
    assert abs(float(masked) - 0.8) < 0.012
    # A random draw equal to the original token looks "kept": 0.1/495 moves from random to kept.
    assert abs(float(randomised) - 0.1 * (1 - 1 / replacements)) < 0.008
    assert abs(float(kept) - (0.1 + 0.1 / replacements)) < 0.008
    random_ids = out[chosen & out.ne(4) & out.ne(ids)]
    assert bool((random_ids >= 5).all()), "random replacements are ordinary tokens"


def test_budget_is_randomised_rounding_of_p_times_n():
    g = torch.Generator().manual_seed(1)
    ids = pad([[1, 10, 11, 12, 2]] * 20_000, 0)  # 3 maskable tokens: E[chosen] = 0.45 per row
    labels = Masker(SPECIALS).select(ids, Masker(SPECIALS).maskable(ids), g)[0]
    per_row = labels.sum(1).float()
    assert set(per_row.unique().tolist()) <= {0.0, 1.0}
    assert abs(float(per_row.mean()) - 0.45) < 0.01


def test_dynamic_masking_differs_between_calls_and_repeats_with_the_seed():
    ids = random_batch(64, 40, torch.Generator().manual_seed(2))
    masker = Masker(SPECIALS)
    first = masker(ids, generator=torch.Generator().manual_seed(3))
    again = masker(ids, generator=torch.Generator().manual_seed(3))
    other = masker(ids, generator=torch.Generator().manual_seed(4))
    assert torch.equal(first.labels, again.labels) and torch.equal(first.input_ids, again.input_ids)
    assert not torch.equal(first.labels, other.labels)


def word_spans(ids: list[int], starts: torch.Tensor, maskable: list[bool]) -> list[tuple[int, int]]:
    spans = []
    for t, tok in enumerate(ids):
        if not maskable[t]:
            continue
        if bool(starts[tok]) or not spans or spans[-1][1] != t:
            spans.append((t, t + 1))
        else:
            spans[-1] = (spans[-1][0], t + 1)
    return spans


def real_batch(parallel, copies: int, per_row: int = 1) -> torch.Tensor:
    """Real sentences, ``per_row`` of them concatenated into each [CLS] ... [SEP] row."""
    sentences = [p.src for p in parallel] + [p.tgt for p in parallel]
    rows = [[1, *[t for s in sentences[i: i + per_row] for t in s], 2] for i in range(0, len(sentences), per_row)]
    return pad(rows * copies, 0)


def test_whole_word_masking_takes_complete_words(parallel, specials, word_starts):
    ids = real_batch(parallel, 5, per_row=8)
    masker = Masker(specials, {"unit": "word"}, word_starts)
    maskable = masker.maskable(ids)
    assert int(maskable.sum()) >= 100_000
    out, labels = masker(ids, generator=torch.Generator().manual_seed(5))
    chosen = labels.ne(IGNORE)
    for row in range(0, ids.shape[0], 3):
        for start, end in word_spans(ids[row].tolist(), word_starts, maskable[row].tolist()):
            picked = chosen[row, start:end]
            assert bool(picked.all()) or not bool(picked.any()), "a word is masked completely or not at all"
    rate = float(chosen.sum() / maskable.sum())
    assert 0.14 < rate <= 0.1501  # words that would overshoot the budget are skipped, as in BERT
    assert abs(float(out[chosen].eq(specials.mask).float().mean()) - 0.8) < 0.015


def test_whole_word_masking_needs_a_word_table():
    with pytest.raises(ValueError, match="word_starts"):
        Masker(SPECIALS, {"unit": "word"})


def test_span_lengths_follow_spanbert():
    probs = span_length_distribution(0.2, 10)
    assert probs.shape == (10,) and abs(float(probs.sum()) - 1) < 1e-12
    assert abs(float((probs * torch.arange(1, 11)).sum()) - 3.8) < 0.01  # SpanBERT: mean span 3.8 words
    assert float(probs[1] / probs[0]) == pytest.approx(0.8)


def test_span_masking_rate_whole_words_and_one_decision_per_span(parallel, specials, word_starts):
    ids = real_batch(parallel, 5, per_row=8)
    masker = Masker(specials, {"unit": "span"}, word_starts)
    maskable = masker.maskable(ids)
    g = torch.Generator().manual_seed(6)
    chosen, units = masker.select(ids, maskable, g)
    rate = float(chosen.sum() / maskable.sum())
    assert abs(rate - 0.15) < 0.006
    out, labels = masker(ids, generator=torch.Generator().manual_seed(6))
    assert torch.equal(labels.ne(IGNORE), chosen)
    # Within a span, every token gets the same treatment ([MASK], random or kept).
    mixed = 0
    for row in range(0, ids.shape[0], 5):
        for unit in units[row][chosen[row]].unique().tolist():
            where = chosen[row] & units[row].eq(unit)
            as_mask = out[row][where].eq(specials.mask)
            mixed += int(as_mask.any() and not as_mask.all())
    assert mixed == 0
    # Span lengths (in tokens) are longer than single pieces on average.
    lengths = [int((units[r][chosen[r]] == u).sum()) for r in range(0, 300) for u in units[r][chosen[r]].unique()]
    assert sum(lengths) / len(lengths) > 2.0


def test_word_starts_from_pieces_conventions():
    assert word_starts_from_pieces(["<pad>", "\u2581the", "re", "\u2581a"]).tolist() == [False, True, False, True]
    assert word_starts_from_pieces(["[PAD]", "the", "##re", "a"]).tolist() == [True, True, False, True]


@pytest.mark.parametrize("bad", [{"probability": 0.0}, {"mask_token": 0.9, "random_token": 0.2},
                                 {"unit": "sentence"}, {"span_max": 0}, {"nonsense": 1}])
def test_masking_config_errors_name_the_field(bad):
    with pytest.raises(ValueError, match="MaskingConfig"):
        MaskingConfig.coerce(bad)
