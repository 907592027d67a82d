"""kNN-augmented attention (Memorizing Transformers) and kNN-LM interpolation."""

from __future__ import annotations

import math

import pytest
import torch

from babelzoo.knowledge.knn import KNNLM, KNNAttention
from babelzoo.knowledge.memory import RetrievalMemory
from babelzoo.zoo.layers import SelfAttention


def test_knn_attention_matches_dense_attention_over_memory():
    torch.manual_seed(0)
    local = SelfAttention(16, 2)
    layer = KNNAttention.from_attention(local, top_k=64)
    x1, x2 = torch.randn(1, 5, 16), torch.randn(1, 3, 16)
    assert torch.equal(layer(x1), local(x1))  # empty memory: plain attention
    assert layer.memory_size() == 5
    with torch.no_grad():
        layer.gate.fill_(0.7)
    out = layer(x2)
    # by hand: per head, softmax over all 5 remembered keys (top_k ≥ memory), mixed by σ(0.7)
    q1, k1, v1 = local.qkv(x1).view(1, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
    q2, k2, v2 = local.qkv(x2).view(1, 3, 3, 2, 8).permute(2, 0, 3, 1, 4)
    memory = torch.softmax(q2 @ k1.transpose(-1, -2) / math.sqrt(8), -1) @ v1
    current = torch.softmax(q2 @ k2.transpose(-1, -2) / math.sqrt(8), -1) @ v2
    g = torch.sigmoid(torch.tensor(0.7))
    expected = local.out((g * memory + (1 - g) * current).transpose(1, 2).reshape(1, 3, 16))
    assert torch.allclose(out, expected, atol=1e-5)
    assert layer.memory_size() == 8


def test_knn_attention_gradients_padding_and_memory_limit():
    torch.manual_seed(1)
    layer = KNNAttention(16, 4, top_k=4, max_memory=10)
    mask = torch.tensor([[True, True, True, False]])[:, None, None, :]
    layer(torch.randn(1, 4, 16), mask)
    assert layer.memory_size() == 3  # the padding position is not remembered
    out = layer(torch.randn(2, 4, 16))
    assert layer.memory_size() == 10
    assert sorted(layer.memories[0].ids().tolist()) == list(range(1, 11))  # the oldest entry went first
    out.sum().backward()
    assert layer.gate.grad is not None and layer.gate.grad.abs().sum() > 0
    assert layer.qkv.weight.grad.abs().sum() > 0


def test_knn_lm_interpolation():
    vocab = 6
    memory = RetrievalMemory(4, "Flat", metric="l2")
    knn = KNNLM(memory, vocab, k=2, lam=0.5, temperature=1.0)
    keys = torch.tensor([[0.0, 0, 0, 0], [1, 0, 0, 0], [5, 5, 5, 5]])
    knn.add(keys, torch.tensor([2, 3, 3]))
    query = torch.tensor([[0.0, 0, 0, 0]])
    p = knn.knn_probs(query)
    # neighbours: token 2 at squared distance 0, token 3 at 1 → weights ∝ e^0, e^-1
    w = torch.softmax(torch.tensor([0.0, -1.0]), 0)
    assert torch.allclose(p[0], torch.tensor([0, 0, w[0], w[1], 0, 0]), atol=1e-6)
    logits = torch.randn(1, vocab)
    mixed = knn.log_probs(logits, query).exp()
    assert torch.allclose(mixed, 0.5 * p + 0.5 * torch.softmax(logits, -1), atol=1e-6)
    assert float(mixed.sum()) == pytest.approx(1.0, abs=1e-6)
    knn.lam = 0.0
    assert torch.allclose(knn.log_probs(logits, query), torch.log_softmax(logits, -1), atol=1e-6)


def test_knn_lm_datastore_from_a_model():
    from babelzoo.zoo.config import ModelConfig, TextConfig
    from babelzoo.zoo.model import BabelModel

    model = BabelModel(ModelConfig(text=TextConfig(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2,
                                                   intermediate_size=32, max_positions=16))).eval()
    ids = torch.randint(5, 20, (3, 6))
    labels = torch.full_like(ids, -100)
    labels[:, 2] = ids[:, 2]
    masked = ids.clone()
    masked[:, 2] = 4
    knn = KNNLM(RetrievalMemory(16, "Flat", metric="l2"), 20, k=1, lam=1.0)
    assert knn.build(model, [{"input_ids": masked, "labels": labels}]) == 3
    hidden = model(masked).last_hidden[:, 2]
    predicted = knn.log_probs(model.mlm_logits(hidden), hidden).argmax(-1)
    assert torch.equal(predicted, ids[:, 2])  # each masked context retrieves its own token
