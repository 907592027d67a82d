"""FLOPs per token: the analytic count equals torch's FLOP counter on real forward passes; the
measured matmul peak and MFU are consistent."""

import pytest
import torch

import babelzoo
from babelzoo.train.flops import count_flops, measure_matmul_peak, mfu, model_flops_per_token


@pytest.mark.parametrize("name", ["xlmr_tiny", "albert_tiny", "nezha_tiny", "t5rel_prenorm_tiny"])
def test_analytic_flops_match_the_counter(name):
    model = babelzoo.create_model(name, vocab_size=500, pooler=False, dropout=0.0, attention_dropout=0.0)
    batch, length = 2, 16
    ids = torch.randint(5, 500, (batch, length))
    predicted = torch.zeros(batch, length, dtype=torch.bool)
    predicted[:, ::4] = True

    def forward():
        out = model(ids, attention_mask=torch.ones_like(ids))
        return model.mlm_logits(out.last_hidden, predicted)

    expected = model_flops_per_token(model, length, predicted_fraction=0.25, training=False) * batch * length
    assert count_flops(forward) == expected  # every matmul, attention included, counted exactly once
    trained = count_flops(lambda: forward().sum().backward())
    assert trained == pytest.approx(3 * expected, rel=0.015)  # backward ≈ 2 × forward


def test_hand_count_for_one_layer():
    config = babelzoo.model_config("xlmr_tiny", vocab_size=100, hidden_size=8, num_heads=2, intermediate_size=16,
                                   num_layers=1, mlm_head=False)
    # per token: QKV 2·8·24 + out 2·8·8 + FFN 2·2·8·16 + attention 4·L·8 with L = 10
    assert model_flops_per_token(config, 10, training=False) == 384 + 128 + 512 + 320
    assert model_flops_per_token(config, 10) == 3 * (384 + 128 + 512 + 320)


def test_peak_and_mfu():
    peak = measure_matmul_peak("cpu", torch.float32, size=256, repeats=3)
    assert 1e8 < peak < 1e14
    assert measure_matmul_peak("cpu", torch.float32, size=256) == peak  # cached
    assert mfu(1000.0, 2e6, 4e9) == pytest.approx(0.5)
