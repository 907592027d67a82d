"""ERNIE 1.0 entity-level masking: whole mentions, the masking budget, and 80/10/10 over many draws."""

from __future__ import annotations

import torch

from babelzoo.knowledge.entity_masking import IGNORE, entity_mask

MASK, VOCAB, CLS, SEP = 4, 1000, 1, 2


def test_mentions_are_masked_whole_and_specials_never():
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([[CLS, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, SEP]] * 400)
    spans = [[(2, 5), (10, 12)]] * 400  # two mentions: 3 and 2 tokens
    masked, labels = entity_mask(ids, spans, MASK, VOCAB, special_ids=(CLS, SEP), probability=0.15, generator=g)
    chosen = labels != IGNORE
    assert not chosen[:, 0].any() and not chosen[:, -1].any()
    for start, end in ((2, 5), (10, 12)):
        block = chosen[:, start:end]
        assert (block.all(1) | ~block.any(1)).all()  # all or nothing
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(masked[~chosen], ids[~chosen])
    # budget: round(0.15 * 18 maskable) = 3 tokens; a mention may be the first (and only) unit
    counts = chosen.sum(1)
    assert counts.min() >= 1 and counts.max() <= 3
    # the 3-token mention fits only as the first of the 15 units drawn: probability 1/15 ≈ 0.067
    assert 0.03 < float(chosen[:, 2:5].all(1).float().mean()) < 0.11


def test_replacement_statistics():
    g = torch.Generator().manual_seed(1)
    ids = torch.arange(100, 200).repeat(300, 1)
    masked, labels = entity_mask(ids, [[(i, i + 2) for i in range(0, 100, 2)]] * 300, MASK, VOCAB,
                                 probability=0.2, generator=g)
    chosen = labels != IGNORE
    assert chosen.sum(1).eq(20).all()  # 2-token units fill the 20-token budget exactly
    pairs = chosen.view(300, 50, 2)
    assert torch.equal(pairs[..., 0], pairs[..., 1])
    as_mask = (masked[chosen] == MASK).float().mean()
    kept = (masked[chosen] == ids[chosen]).float().mean()
    assert abs(float(as_mask) - 0.8) < 0.02 and abs(float(kept) - 0.1 - 0.1 / VOCAB) < 0.02
