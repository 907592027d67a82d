"""FLOPs per token: the analytic count equals torch's FLOP counter on real forward passes; the
measured matmul peak and MFU are consistent."""

import dataclasses

import pytest
import torch

import babelzoo
from babelzoo.zoo.family import FAMILIES, family_of
from babelzoo.train.flops import count_flops, measure_matmul_peak, mfu, model_flops_per_token


# Text families whose analytic count is not compared with torch's counter on a forward pass here,
# and why; every other family's *_tiny models are (a new family is compared the moment it is
# registered, or must be named here).
NOT_COMPARED = {
    "rnn": "torch's FLOP counter has no formula for the LSTM/GRU kernels (it counts their projections only)",
    "cove": "torch's FLOP counter has no formula for the LSTM kernels",
    "seq2seq": "an encoder-decoder's forward needs decoder inputs; the count is its encoder's",
    "transformer_xl": "the count is for a segment after a full memory of mem_len states, which a first segment "
                      "does not have",
    "xlnet": "its relative encodings are projected once per batch: test_xlnet_counts_its_relative_encodings_once",
}
COMPARED = [name for name in babelzoo.list_models("*_tiny") if babelzoo.model_config(name).fusion is None
            and family_of(babelzoo.model_config(name).text).name not in NOT_COMPARED]


def test_every_family_is_compared_or_named():
    assert set(NOT_COMPARED) <= set(FAMILIES.list())
    assert {family_of(babelzoo.model_config(name).text).name for name in COMPARED} == (
        set(FAMILIES.list()) - set(NOT_COMPARED))


@pytest.mark.parametrize("name", COMPARED)
def test_analytic_flops_match_the_counter(name):
    options = {"pooler": False} if "pooler" in dataclasses.asdict(babelzoo.model_config(name).text) else {}
    model = babelzoo.create_model(name, vocab_size=500, dropout=0.0, attention_dropout=0.0, **options)
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


@pytest.mark.parametrize("batch", [1, 4])
def test_xlnet_counts_its_relative_encodings_once(batch):
    """XLNet's per-token count plus W_r's projection of the 2L relative encodings, once per batch
    (2·2L·H² per layer), is torch's count of the content stream."""
    model = babelzoo.create_model("xlnet_tiny", vocab_size=500, dropout=0.0).eval()
    text, length = model.config.text, 16
    ids = torch.randint(5, 500, (batch, length))
    per_batch = text.num_layers * 2 * (2 * length) * text.hidden_size ** 2
    expected = model_flops_per_token(model, length, predicted_fraction=0.0, training=False) * batch * length
    assert count_flops(lambda: model(ids, attention_mask=torch.ones_like(ids))) == expected + per_batch


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
