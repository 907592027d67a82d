"""XLCo (InfoNCE) and LaBSE translation ranking (additive margin, both directions) against hand
computations, on hand-made vectors and through a tiny model."""

from __future__ import annotations

import math

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import Pair, TranslationRanking, XLCo, additive_margin_loss, info_nce

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})
PAIRS = [Pair([10, 11, 12], [20, 21], "en", "de"), Pair([13], [22, 23, 24, 25], "en", "de"),
         Pair([14, 15], [26], "de", "en")]


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def cosine(a, b):
    return dot(a, b) / math.sqrt(dot(a, a) * dot(b, b))


def hand_info_nce(q, k, tau, offset):
    total = 0.0
    for i, qi in enumerate(q):
        logits = [dot(qi, kj) / tau for kj in k]
        total -= logits[offset + i] - math.log(sum(math.exp(v) for v in logits))
    return total / len(q)


def hand_margin(x, y, m, s, offset):
    total = 0.0
    for i, xi in enumerate(x):
        pos = math.exp(s * (cosine(xi, y[offset + i]) - m))
        neg = sum(math.exp(s * cosine(xi, yn)) for n, yn in enumerate(y) if n != offset + i)
        total -= math.log(pos / (pos + neg))
    return total / len(x)


def test_info_nce_equals_hand_computation():
    torch.manual_seed(0)
    q, k = torch.randn(3, 5, dtype=torch.float64), torch.randn(7, 5, dtype=torch.float64)
    loss, _ = info_nce(q, k, temperature=0.25, offset=2)
    assert float(loss) == pytest.approx(hand_info_nce(q.tolist(), k.tolist(), 0.25, 2), rel=1e-6)


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_additive_margin_equals_hand_computation(scale):
    torch.manual_seed(1)
    x, y = torch.randn(3, 4, dtype=torch.float64), torch.randn(6, 4, dtype=torch.float64)
    loss, _ = additive_margin_loss(x, y, margin=0.3, scale=scale, offset=1)
    assert float(loss) == pytest.approx(hand_margin(x.tolist(), y.tolist(), 0.3, scale, 1), rel=1e-6)


def test_dual_encoder_batch_stacks_sources_then_targets():
    batch = XLCo(S).prepare(PAIRS)
    assert batch["input_ids"].tolist() == [[1, 10, 11, 12, 2, 0], [1, 13, 2, 0, 0, 0], [1, 14, 15, 2, 0, 0],
                                           [1, 20, 21, 2, 0, 0], [1, 22, 23, 24, 25, 2], [1, 26, 2, 0, 0, 0]]
    assert batch["language_ids"][:, 0].tolist() == [0, 0, 1, 1, 1, 0]


def encode_separately(model, sentences, langs, layer=None):
    """[CLS] vectors of each sentence encoded alone (no padding)."""
    out = []
    for ids, lang in zip(sentences, langs):
        x = torch.tensor([[1, *ids, 2]])
        result = model(x, language_ids=torch.full_like(x, S.languages[lang]), output_hidden_states=True)
        out.append((result.last_hidden if layer is None else result.hidden_states[layer])[0, 0])
    return torch.stack(out)


def test_translation_ranking_is_bidirectional_margin_loss_on_cls_vectors():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    objective = TranslationRanking(S, margin=0.3, scale=5.0)
    loss = objective(model, objective.prepare(PAIRS))
    src = encode_separately(model, [p.src for p in PAIRS], [p.src_lang for p in PAIRS]).double()
    tgt = encode_separately(model, [p.tgt for p in PAIRS], [p.tgt_lang for p in PAIRS]).double()
    expected = (hand_margin(src.tolist(), tgt.tolist(), 0.3, 5.0, 0)
                + hand_margin(tgt.tolist(), src.tolist(), 0.3, 5.0, 0))
    assert float(loss.value.detach()) == pytest.approx(expected, rel=1e-4)


def test_xlco_uses_the_chosen_layer():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    objective = XLCo(S, layer=1, temperature=0.25)
    loss = objective(model, objective.prepare(PAIRS))
    src = encode_separately(model, [p.src for p in PAIRS], [p.src_lang for p in PAIRS], layer=1).double()
    tgt = encode_separately(model, [p.tgt for p in PAIRS], [p.tgt_lang for p in PAIRS], layer=1).double()
    assert float(loss.value.detach()) == pytest.approx(hand_info_nce(src.tolist(), tgt.tolist(), 0.25, 0), rel=1e-4)
    with pytest.raises(ValueError, match="layer=5"):
        XLCo(S, layer=5)(model, objective.prepare(PAIRS))


def test_both_sides_are_encoded_on_their_real_tokens_with_the_padded_pass_gradients(monkeypatch):
    """The dual encoder's one call runs unpadded: the embeddings see the 25 real tokens of the six
    rows ([1, 25], not [6, 6]), and loss and gradients equal those of a padded pass."""
    from babelzoo.zoo.model import BabelModel

    torch.manual_seed(0)
    model = babelzoo.create_model("xlm_tiny", vocab_size=64, dropout=0.0, attention_dropout=0.0).double()
    objective = TranslationRanking(S, margin=0.3, scale=5.0)
    batch = objective.prepare(PAIRS)
    shapes = []
    real_forward = type(model.embeddings).forward
    monkeypatch.setattr(type(model.embeddings), "forward",
                        lambda self, ids, *a, **k: shapes.append(tuple(ids.shape)) or real_forward(self, ids, *a, **k))
    runs = {}
    for unpad in (True, False):
        shapes.clear()
        model.zero_grad()
        if not unpad:  # the same objective on a model that ignores unpad=True
            padded_forward = BabelModel.forward
            monkeypatch.setattr(BabelModel, "forward", lambda self, *a, unpad=False, **k: padded_forward(self, *a, **k))
        loss = objective(model, batch).value
        loss.backward()
        runs[unpad] = (float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None},
                       list(shapes))
    assert runs[True][2] == [(1, 25)] and runs[False][2] == [(6, 6)]
    assert runs[True][0] == pytest.approx(runs[False][0], rel=1e-12)
    for name, grad in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][name], grad, rtol=0, atol=1e-10, msg=name)
