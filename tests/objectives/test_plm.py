"""XLNet's permutation LM on hand-built batches: the factorisation order each batch encodes is a
permutation that its visibility follows exactly (checked against a mask built by looping over
the order), partial prediction picks the last m = min(⌈n/K⌉, T − 1) tokens of the order, spans
are the last tokens too, padding is never visible nor a target, and the loss is the
cross-entropy of the query stream through the tied LM head."""

import math

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import ExampleError, build_objective
from babelzoo.objectives.batching import IGNORE
from babelzoo.zoo.config import ConfigError

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64)


def xlnet():
    torch.manual_seed(0)
    return babelzoo.create_model("xlnet_tiny", vocab_size=64, hidden_size=32, num_heads=2, intermediate_size=48)


def sentences(*lengths):
    return [[10 + (i + j) % 50 for j in range(n)] for i, n in enumerate(lengths)]


def ranks(batch):
    """z⁻¹ per real position: a token sees exactly the tokens before it in the order."""
    return batch["visible"].sum(-1)


def brute_force_visible(rank, real):
    length = len(real)
    visible = torch.zeros(length, length, dtype=torch.bool)
    order = sorted((int(rank[i]), i) for i in range(length) if real[i])
    for t, (_, i) in enumerate(order):
        for _, j in order[:t]:
            visible[i, j] = True
    return visible


def targets_of(batch):
    return batch["target_mapping"].sum(1).bool()


@pytest.mark.parametrize("span", [False, True])
def test_the_visibility_is_a_factorisation_order_followed_exactly(span):
    torch.manual_seed(3)
    plm = build_objective("plm", SPECIALS, xlnet().config, span=span)
    batch = plm.prepare(sentences(13, 3, 7, 20))
    real = batch["attention_mask"].bool()
    rank = ranks(batch)
    for row in range(4):
        total = int(real[row].sum())
        assert sorted(rank[row, :total].tolist()) == list(range(total))  # a permutation of the real tokens
        assert set(rank[row, [0, total - 1]].tolist()) == {0, 1}  # [CLS] and [SEP] come first
        assert torch.equal(batch["visible"][row], brute_force_visible(rank[row], real[row]))
    assert not batch["visible"][~real].any() and not batch["visible"].transpose(1, 2)[~real].any()


@pytest.mark.parametrize("k, lengths, expected", [
    (6, (13, 3, 6, 7, 0), [3, 1, 1, 2, 0]),      # ⌈13/6⌉, ⌈3/6⌉, ⌈6/6⌉, ⌈7/6⌉; nothing to predict in []
    (2, (5, 1, 4), [3, 1, 2]),
    (1, (3, 1), [3, 1]),                          # K = 1: every token, T − 1 = n + 1 never binds with [CLS] [SEP]
])
def test_partial_prediction_picks_the_last_tokens_of_the_order(k, lengths, expected):
    torch.manual_seed(0)
    plm = build_objective("plm", SPECIALS, xlnet().config, k=k)
    batch = plm.prepare(sentences(*lengths))
    real = batch["attention_mask"].bool()
    rank, targets = ranks(batch), targets_of(batch)
    assert targets.sum(1).tolist() == expected
    assert expected == [math.ceil(n / k) for n in lengths]
    for row, m in enumerate(expected):
        total = int(real[row].sum())
        assert torch.equal(targets[row], real[row] & (rank[row] >= total - m))
    assert not targets[~real].any()
    assert not targets[:, 0].any()  # [CLS] is never a target
    # labels: the true token at each target, in position order; padding rows ignored
    picked = batch["target_mapping"].argmax(-1)
    valid = batch["target_mapping"].sum(-1).bool()
    assert torch.equal(batch["labels"][valid], batch["input_ids"].gather(1, picked)[valid])
    assert (batch["labels"][~valid] == IGNORE).all()


def test_span_targets_are_runs_within_budget_at_the_end_of_the_order():
    torch.manual_seed(1)
    plm = build_objective("plm", SPECIALS, xlnet().config, span=True, k=3, max_span=3)
    for _ in range(5):
        batch = plm.prepare(sentences(30, 12, 2))
        real, rank, targets = batch["attention_mask"].bool(), ranks(batch), targets_of(batch)
        for row, n in enumerate((30, 12, 2)):
            count, total = int(targets[row].sum()), int(real[row].sum())
            assert 1 <= count <= math.ceil(n / 3)
            assert torch.equal(targets[row], real[row] & (rank[row] >= total - count))
            positions = targets[row].nonzero().flatten().tolist()
            runs = sum(1 for a, b in zip([None] + positions, positions) if a is None or b != a + 1)
            assert runs <= count and all(0 < p < total - 1 for p in positions)


def test_the_loss_is_the_query_streams_cross_entropy_through_the_tied_head():
    model = xlnet().eval()
    plm = build_objective("plm", SPECIALS, model.config)
    torch.manual_seed(0)
    batch = plm.prepare(sentences(9, 4))
    loss = plm(model, batch)
    with torch.no_grad():
        x = model.embeddings(batch["input_ids"])
        _, g = model.encoder.two_stream(x, batch["visible"], batch["target_mapping"], batch["attention_mask"])
        logits = g @ model.embeddings.word.weight.T + model.lm_head.bias  # e(x)ᵀ g + b
        valid = batch["labels"] != IGNORE
        expected = F.cross_entropy(logits[valid], batch["labels"][valid])
    torch.testing.assert_close(loss.value.detach(), expected, atol=1e-6, rtol=0)
    assert loss.metrics["predicted"] == 3.0  # ⌈9/6⌉ + ⌈4/6⌉


def test_gradients_reach_the_encoder_the_mask_embedding_and_the_lm_head():
    model = xlnet()
    plm = build_objective("plm", SPECIALS, model.config)
    plm(model, plm.prepare(sentences(9, 12, 5))).value.backward()
    without = [n for n, p in model.named_parameters() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
    # no segment ids in a sentence batch: the segment term is not computed
    assert sorted({n.rsplit(".", 1)[-1] for n in without}) == ["segment_bias", "segment_embed"]
    assert model.encoder.mask_embedding.grad.abs().sum() > 0


def test_a_model_without_two_stream_attention_is_refused():
    with pytest.raises(ConfigError, match="two-stream attention .family 'xlnet'.*family 'transformer'"):
        build_objective("plm", SPECIALS, babelzoo.model_config("xlm_tiny"))
    with pytest.raises(ConfigError, match="k=0 must be an integer >= 1"):
        build_objective("plm", SPECIALS, xlnet().config, k=0)


def test_a_batch_with_nothing_to_predict_is_an_error():
    plm = build_objective("plm", SPECIALS, xlnet().config)
    with pytest.raises(ExampleError, match="no example of the batch has a token to predict"):
        plm.prepare([[], []])
