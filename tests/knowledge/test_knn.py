"""kNN-augmented attention (Memorizing Transformers) and kNN-LM interpolation."""

from __future__ import annotations

import math

import pytest
import torch

import babelzoo
from babelzoo.knowledge.knn import KNNLM, KNNAttention
from babelzoo.knowledge.memory import RetrievalMemory
from babelzoo.errors import InputError
from babelzoo.zoo.layers import Packing, SelfAttention


def test_knn_attention_matches_dense_attention_over_memory():
    torch.manual_seed(0)
    local = SelfAttention(16, 2)
    layer = KNNAttention(16, 2, top_k=64)
    layer.load_state_dict({**local.state_dict(), "gate": torch.zeros(2)})
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


def test_knn_attention_runs_on_every_position_of_the_padded_batch_only():
    layer = KNNAttention(8, 1)
    x = torch.randn(1, 3, 8)
    for mode, args in (("at_rows", (torch.tensor([[0]]),)), ("packed", (Packing(torch.ones(1, 3)),)),
                       ("cached", (None,))):
        with pytest.raises(InputError, match="kNN attention"):
            getattr(layer, mode)(x, *args)
    with pytest.raises(InputError, match="kNN attention takes no NEZHA or rotary positions"):
        layer(x, relative=torch.zeros(3, 3, 8))
    assert layer.memory_size() == 0


def test_knn_attention_retrieves_the_top_k_by_inner_product():
    """With top_k=1 each query reads the value of its best key, q·k largest over the memory."""
    torch.manual_seed(2)
    layer = KNNAttention(8, 1, top_k=1, memorize=False)
    keys, values = torch.randn(1, 6, 8), torch.randn(1, 6, 8)
    layer.memory_keys, layer.memory_values = keys, values
    q = torch.randn(1, 1, 4, 8)
    best = (q[0, 0] @ keys[0].T).argmax(-1)
    torch.testing.assert_close(layer.retrieve(q)[0, 0], values[0, best])


def test_knn_attention_gradients_padding_and_memory_limit():
    torch.manual_seed(1)
    layer = KNNAttention(16, 4, top_k=4, capacity=10)
    mask = torch.tensor([[True, True, True, False]])[:, None, None, :]
    first = torch.randn(1, 4, 16)
    layer(first, mask)
    assert layer.memory_size() == 3  # the padding position is not remembered
    second = torch.randn(2, 4, 16)
    out = layer(second)
    assert layer.memory_size() == 10  # 3 + 8, the oldest one dropped
    k_second = layer.qkv(second).view(2, 4, 3, 4, 4)[:, :, 1].permute(2, 0, 1, 3).reshape(4, 8, 4)
    torch.testing.assert_close(layer.memory_keys[:, 2:], k_second.detach())
    out.sum().backward()
    assert layer.gate.grad is not None and layer.gate.grad.abs().sum() > 0
    assert layer.qkv.weight.grad.abs().sum() > 0


def test_memory_layers_are_chosen_by_the_config_and_fill_as_the_model_reads():
    model = babelzoo.create_model("mbert_tiny", vocab_size=64, memory_layers=[1], memory_top_k=4).eval()
    assert isinstance(model.encoder.layers[1].attention, KNNAttention)
    assert type(model.encoder.layers[0].attention) is SelfAttention
    assert "encoder.layers.1.attention.gate" in model.state_dict()
    ids = torch.randint(5, 64, (2, 6))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    with torch.no_grad():
        first = model(ids, attention_mask=mask).last_hidden
        assert model.encoder.layers[1].attention.memory_size() == 10
        second = model(ids, attention_mask=mask).last_hidden  # now the memory holds this very batch
    assert not torch.allclose(first, second)
    model.encoder.reset_memory()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, attention_mask=mask).last_hidden, first)
    with pytest.raises(ValueError, match="memory_layers=\\(5,\\) must hold layer indices below num_layers=2"):
        babelzoo.create_model("mbert_tiny", memory_layers=[5])


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
    from babelzoo.zoo.model_config import ModelConfig
    from babelzoo.zoo.families.transformer.config import TransformerConfig
    from babelzoo.zoo.model import BabelModel

    model = BabelModel(ModelConfig(text=TransformerConfig(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2,
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
