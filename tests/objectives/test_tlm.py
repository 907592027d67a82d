"""TLM layout on a hand-built batch: tokens, positions restarting at 0, language ids per
side, segments, masking across both sides, and what reaches the model."""

from __future__ import annotations

import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import TLM, Pair
from babelzoo.objectives.batching import IGNORE, encoder_inputs

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1, "fr": 2})


def original(batch):
    labels = batch["labels"]
    return torch.where(labels.ne(IGNORE), labels, batch["input_ids"])


def test_tlm_layout_exactly_as_xlm():
    batch = TLM(S).prepare([Pair([10, 11, 12], [20, 21], "en", "de"), Pair([30], [40, 41], "fr", "en")])
    assert original(batch).tolist() == [[1, 10, 11, 12, 2, 1, 20, 21, 2],
                                        [1, 30, 2, 1, 40, 41, 2, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 3],
                                              [0, 1, 2, 0, 1, 2, 3, 0, 0]]
    assert batch["language_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 1],
                                              [2, 2, 2, 0, 0, 0, 0, 0, 0]]
    assert batch["segment_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 1],
                                             [0, 0, 0, 1, 1, 1, 1, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1] * 9, [1] * 7 + [0, 0]]
    # Only word tokens are ever masked, never [CLS]/[SEP]/padding.
    specials = torch.isin(original(batch), torch.tensor([0, 1, 2]))
    assert not bool(batch["labels"].ne(IGNORE)[specials].any())


def test_tlm_masks_both_sides_in_proportion():
    tlm = TLM(S)
    pair = Pair(list(range(10, 30)), list(range(30, 50)), "en", "de")
    batch = tlm.prepare([pair] * 2000)
    chosen = batch["labels"].ne(IGNORE)
    second = batch["language_ids"].eq(1)
    left, right = int((chosen & ~second).sum()), int((chosen & second).sum())
    assert abs(left / 40_000 - 0.15) < 0.01 and abs(right / 40_000 - 0.15) < 0.01


def test_tlm_truncates_the_longer_side_and_reports_it():
    batch = TLM(S, max_length=12).prepare([Pair(list(range(10, 20)), [30, 31], "en", "de")])
    assert original(batch).tolist() == [[1, 10, 11, 12, 13, 14, 15, 2, 1, 30, 31, 2]]
    assert int(batch["truncated"]) == 4


def test_tlm_reaches_the_model_with_reset_positions_and_offsets():
    """XLM gets positions and language ids as prepared; XLM-R (offset 2, one segment) gets the
    same positions, which its embeddings shift by the offset once, and no segment ids; mBERT gets
    segments, no languages."""
    batch = TLM(S).prepare([Pair([10, 11], [20], "en", "de")])
    xlm = babelzoo.create_model("xlm_tiny", vocab_size=64)
    xlmr = babelzoo.create_model("xlmr_tiny", vocab_size=64, pad_token_id=0)
    mbert = babelzoo.create_model("mbert_tiny", vocab_size=64)
    kx, kr, kb = encoder_inputs(xlm, batch), encoder_inputs(xlmr, batch), encoder_inputs(mbert, batch)
    assert kx["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]] and "segment_ids" not in kx
    assert kx["language_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    assert kr["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]] and "segment_ids" not in kr
    assert "language_ids" not in kr and "language_ids" not in kb
    assert kb["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    # The loss uses exactly these inputs: recompute it by hand on XLM.
    xlm.eval()
    loss = TLM(S)(xlm, batch)
    hidden = xlm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                 position_ids=batch["position_ids"], language_ids=batch["language_ids"]).last_hidden
    where = batch["labels"].ne(IGNORE)
    expected = torch.nn.functional.cross_entropy(xlm.mlm_logits(hidden)[where], batch["labels"][where])
    assert torch.allclose(loss.value, expected, atol=1e-6)


def test_counting_positions_from_zero_reproduces_the_default_positions_of_an_offset_model():
    """XLM-R's embeddings shift explicit position ids by its offset (2): ids 0..L-1 from a batch
    must give the output of the model's own default positions, not positions shifted twice."""
    xlmr = babelzoo.create_model("xlmr_tiny", vocab_size=64).eval()
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "position_ids": torch.arange(5)[None]}
    with torch.no_grad():
        default = xlmr(input_ids=ids, attention_mask=batch["attention_mask"]).last_hidden
        through_batch = xlmr(**encoder_inputs(xlmr, batch)).last_hidden
    torch.testing.assert_close(through_batch, default, rtol=0, atol=0)
