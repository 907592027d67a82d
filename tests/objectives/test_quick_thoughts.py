"""Quick-thoughts: context targets of hand-built documents (never across documents, never the
sentence itself), the loss against a softmax computed by hand, the two encoders f and g;
learning on real text is in tests/objectives/test_objectives_learn.py."""

import math

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import ExampleError, build_objective, context_loss, context_targets

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=60, languages={"en": 0, "de": 1})


def test_context_targets_stay_inside_each_document():
    T, F = True, False
    assert context_targets([3, 1, 2]).tolist() == [
        [F, T, F, F, F, F],  # document 0: 0 ↔ 1 ↔ 2
        [T, F, T, F, F, F],
        [F, T, F, F, F, F],
        [F, F, F, F, F, F],  # document 1: a lone sentence has no context (it is only a candidate)
        [F, F, F, F, F, T],  # document 2: 4 ↔ 5, not 3 ↔ 4 across the document edge
        [F, F, F, F, T, F],
    ]


def test_prepare_lays_out_every_sentence_in_order():
    model = babelzoo.create_model("bigru_tiny", vocab_size=60)
    objective = build_objective("quick_thoughts", SPECIALS, model.config)
    batch = objective.prepare([[[10], [11, 11]], [[20, 20, 20]], [[30], [31]]])
    assert batch["input_ids"].tolist() == [[1, 10, 2, 0, 0], [1, 11, 11, 2, 0], [1, 20, 20, 20, 2],
                                           [1, 30, 2, 0, 0], [1, 31, 2, 0, 0]]
    assert batch["targets"].equal(context_targets([2, 1, 2]))
    with pytest.raises(ExampleError, match=r"no sentence of this batch has a neighbour.*\[1, 1\]"):
        objective.prepare([[[10]], [[20]]])


def test_context_loss_by_hand():
    f = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    g = torch.tensor([[1.0, 2.0], [0.0, 1.0], [2.0, 0.0]])
    targets = context_targets([3])  # 0 ↔ 1 ↔ 2
    loss, accuracy = context_loss(f, g, targets)
    e = math.exp
    # scores f_i·g_j without j = i: row 0 → (g1: 0, g2: 2); row 1 → (g0: 2, g2: 0); row 2 → (g0: 3, g1: 1)
    row0 = -math.log(e(0) / (e(0) + e(2)))
    row1 = -math.log(e(2) / (e(2) + e(0))) - math.log(e(0) / (e(2) + e(0)))
    row2 = -math.log(e(1) / (e(3) + e(1)))
    assert loss.item() == pytest.approx((row0 + row1 + row2) / 3, rel=1e-6)
    # the best candidates: row 0 → 2 (wrong), row 1 → 0 (a context), row 2 → 0 (wrong)
    assert accuracy.item() == pytest.approx(1 / 3)
    # rows without a context are left out of the mean (and their sentence stays a candidate)
    lone = context_targets([1, 2])
    loss, _ = context_loss(f, g, lone)
    row1 = -math.log(e(0) / (e(2) + e(0)))  # 1's only context is 2; candidates 0 and 2
    row2 = -math.log(e(1) / (e(3) + e(1)))
    assert loss.item() == pytest.approx((row1 + row2) / 2, rel=1e-6)


def test_f_is_the_model_and_g_a_second_encoder_on_the_shared_embeddings():
    torch.manual_seed(0)
    model = babelzoo.create_model("bigru_tiny", vocab_size=60, dropout=0.0).eval()
    objective = build_objective("quick_thoughts", SPECIALS, model.config)
    docs = [[[10, 11], [12], [13, 14]], [[20], [21, 22]]]
    batch = objective.prepare(docs)
    f, g = objective.encode(model, batch)
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    torch.testing.assert_close(f, model.sentence_embedding(out.last_hidden, out.mask, "final"))
    hidden, _ = objective.context_encoder(model.embeddings(batch["input_ids"]), batch["attention_mask"])
    torch.testing.assert_close(g, model.sentence_embedding(hidden, out.mask, "final"))
    assert not torch.allclose(f, g)
    loss = objective(model, batch)
    torch.testing.assert_close(loss.value, context_loss(f, g, batch["targets"])[0])
    loss.value.backward()
    for module in (model.encoder, objective.context_encoder, model.embeddings):
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters() if p.requires_grad
                   and p.dim() > 1)
    assert objective.sentence_vectors(model, batch).shape == (5, 2 * model.config.text.hidden_size)
    shared = build_objective("quick_thoughts", SPECIALS, model.config, share_encoder=True)
    assert shared.context_encoder is None and not list(shared.parameters())
    f, g = shared.encode(model, batch)
    assert f is g and shared.sentence_vectors(model, batch).shape == (5, model.config.text.hidden_size)
