"""CLWR: the trilinear attention and recovered vectors against a hand computation; the encoder
sees the recovered sequence and predicts the original source tokens."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import CLWR, Pair
from babelzoo.objectives.batching import IGNORE

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})


def test_recovered_vectors_equal_hand_computation():
    torch.manual_seed(0)
    e = 6
    clwr = CLWR(S, babelzoo.model_config("xlm_tiny", embedding_size=e, hidden_size=8, num_heads=2)).double()
    with torch.no_grad():
        clwr.attention.weight.normal_()
    x = torch.randn(2, 3, e, dtype=torch.float64)
    y = torch.randn(2, 4, e, dtype=torch.float64)
    y_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    got = clwr.recover(x, y, y_mask)
    w = clwr.attention.weight[0].tolist()
    for b in range(2):
        n = int(y_mask[b].sum())
        for i in range(3):
            xi = x[b, i].tolist()
            scores = []
            for j in range(n):
                yj = y[b, j].tolist()
                feature = xi + yj + [a * c for a, c in zip(xi, yj)]  # [x_i; y_j; x_i ⊙ y_j]
                scores.append(sum(wk * fk for wk, fk in zip(w, feature)))
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            expected = [sum(weights[j] / total * y[b, j, d].item() for j in range(n)) for d in range(e)]
            assert torch.allclose(got[b, i], torch.tensor(expected, dtype=torch.float64), atol=1e-12)


def test_clwr_batch_predicts_every_source_token():
    batch = CLWR(S, babelzoo.model_config("xlm_tiny")).prepare([Pair([10, 11, 12], [20, 21], "en", "de"),
                                                                Pair([13], [22, 23, 24], "de", "en")])
    assert batch["input_ids"].tolist() == [[1, 10, 11, 12, 2], [1, 13, 2, 0, 0]]
    assert batch["labels"].tolist() == [[IGNORE, 10, 11, 12, IGNORE], [IGNORE, 13, IGNORE, IGNORE, IGNORE]]
    assert batch["target_ids"].tolist() == [[20, 21, 0], [22, 23, 24]]
    assert batch["target_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch["language_ids"].tolist() == [[0, 0, 0, 0, 0], [1, 1, 1, 0, 0]]


def test_clwr_loss_runs_the_encoder_on_recovered_embeddings():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    clwr = CLWR(S, model.config)
    batch = clwr.prepare([Pair([10, 11, 12], [20, 21], "en", "de"), Pair([13, 14], [22, 23, 24], "de", "en")])
    loss = clwr(model, batch)
    x = model.embeddings.word(batch["input_ids"])
    y = model.embeddings.word(batch["target_ids"])
    words = batch["labels"].ne(IGNORE)
    inputs = torch.where(words[..., None], clwr.recover(x, y, batch["target_mask"]), x)
    hidden = model(inputs_embeds=inputs, attention_mask=batch["attention_mask"],
                   language_ids=batch["language_ids"]).last_hidden
    expected = F.cross_entropy(model.mlm_logits(hidden)[words], batch["labels"][words])
    assert torch.allclose(loss.value, expected, atol=1e-6)
    # [CLS]/[SEP] keep their own embeddings; word positions are mixtures of target embeddings.
    assert torch.equal(inputs[:, 0], x[:, 0])
    assert not torch.allclose(inputs[0, 1], x[0, 1])
