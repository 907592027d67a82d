"""Quantized linear layers against hand-computed quantization, quantized models against their
fp32 originals, and the save/load round trip with its quantization.json."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest
import torch
from torch import nn

import babelzoo
from babelzoo.compression import prune_layers, quantize
from babelzoo.errors import InputError
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.zoo.layers.quantized import GROUP, Int8Linear, WeightOnlyLinear, full_range_activations
from babelzoo.errors import CheckpointError


def test_int8_weights_are_symmetric_per_output_channel():
    linear = nn.Linear(3, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[0.5, -1.0, 0.25], [2.0, 0.1, -0.3]]))
    layer = Int8Linear.from_linear(linear)
    # s = max|w| / 127 per row; q = round(w / s)
    assert layer.weight_scale.tolist() == pytest.approx([1.0 / 127, 2.0 / 127])
    assert layer.weight_int8.tolist() == [[64, -127, 32], [127, 6, -19]]


def test_int8_layer_computes_the_dequantized_product_up_to_activation_rounding():
    torch.manual_seed(0)
    linear = nn.Linear(64, 48)
    layer = Int8Linear.from_linear(linear)
    x = torch.randn(5, 7, 64)
    reference = nn.functional.linear(x, layer.weight, linear.bias)  # exact weights after rounding
    out = layer(x)
    assert out.shape == (5, 7, 48)
    # activations in 7 (or 8) bits over their range: error ~ range/127 per input, summed over 64 inputs
    error = (out - reference).abs().max() / reference.abs().max()
    assert error < 0.02
    assert (out - linear(x)).abs().max() / linear(x).abs().max() < 0.03


SATURATING_PRODUCT = """
import torch
from torch import nn
from babelzoo.zoo.layers.quantized import Int8Linear, full_range_activations
linear = nn.Linear(64, 3)
with torch.no_grad():
    linear.weight.fill_(0.3)
    linear.bias.copy_(torch.tensor([0.0, 1.0, -2.0]))
# every activation quantizes to 255 and every weight to 127: pairs of products exceed 16 bits
out = Int8Linear.from_linear(linear)(torch.full((2, 64), 1.5))
print(full_range_activations(), *out.flatten().tolist())
"""


def _saturating_product(env=None) -> tuple[bool, list[float]]:
    run = subprocess.run([sys.executable, "-c", SATURATING_PRODUCT], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    full, *values = run.stdout.split()
    return full == "True", [float(v) for v in values]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 int8 kernels")
def test_int8_activations_never_overflow_the_kernels_sums():
    expected = pytest.approx([64 * 1.5 * 0.3 + b for b in (0.0, 1.0, -2.0)] * 2, rel=1e-4)
    full, values = _saturating_product()
    assert values == expected and full == full_range_activations()
    # fbgemm forced onto its AVX2 kernels (16-bit pair sums, as on CPUs without VNNI): 7-bit
    # activations, still the exact product
    full, values = _saturating_product({"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"})
    assert values == expected and not full


@pytest.mark.skipif(not full_range_activations(), reason="this CPU's int8 sums are 16-bit: 7-bit activations")
def test_int8_activations_use_eight_bits_where_the_sums_are_exact():
    torch.manual_seed(1)
    linear = nn.Linear(256, 128)
    layer = Int8Linear.from_linear(linear)
    x = torch.randn(64, 256)
    reference = nn.functional.linear(x, layer.weight, linear.bias)
    eight_bits = layer(x)
    seven_bits = torch.ops.quantized.linear_dynamic(x, layer._packed, True)
    error = lambda out: float((out - reference).norm() / reference.norm())  # noqa: E731
    # rounding error ∝ the activation step: range/255 against range/127
    assert error(eight_bits) < 0.6 * error(seven_bits)


def test_four_bit_weights_pack_two_per_byte_in_groups_and_round_trip_exactly():
    scales = torch.tensor([0.5, 0.25])
    q = torch.randint(-7, 8, (2, 2 * GROUP))
    weight = (q.float().reshape(-1, GROUP) * torch.tensor([0.5, 0.5, 0.25, 0.25])[:, None]).reshape(2, 2 * GROUP)
    weight[0, 0], weight[1, GROUP] = 3.5, -1.75  # each group's largest magnitude sets its scale
    linear = nn.Linear(2 * GROUP, 2, bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    layer = WeightOnlyLinear.from_linear(linear, 4)
    assert layer.weight_packed.shape == (4, GROUP // 2) and layer.weight_packed.dtype == torch.uint8
    torch.testing.assert_close(layer.weight, weight, rtol=0, atol=0)
    assert scales.tolist() == [0.5, 0.25]
    with pytest.raises(InputError, match="divisible by 32"):
        WeightOnlyLinear(40, 2, bits=4)


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return babelzoo.create_model("xlmr_tiny", vocab_size=300, num_layers=2).eval()


def encode(model, ids):
    with torch.no_grad():
        return model(ids, attention_mask=torch.ones_like(ids)).last_hidden


@pytest.mark.parametrize("scheme,tolerance", [("int8", 0.05), ("int8_weight", 0.01), ("int4_weight", 0.1)])
def test_a_quantized_model_follows_its_original_and_survives_save_and_load(tiny, scheme, tolerance, tmp_path):
    ids = torch.randint(5, 300, (3, 12))
    small = quantize(tiny, scheme)
    assert small.quantization["scheme"] == scheme
    assert all(name.startswith("encoder.") for name in small.quantization["modules"])
    assert len(small.quantization["modules"]) == 4 * 2  # qkv, out, ffn in/out per layer
    assert not any(isinstance(m, nn.Linear) for n, m in small.named_modules() if n.startswith("encoder."))
    full, quantized = encode(tiny, ids), encode(small, ids)
    assert (quantized - full).norm() / full.norm() < tolerance
    small.save_pretrained(tmp_path / "q")
    assert json.loads((tmp_path / "q" / "quantization.json").read_text()) == small.quantization
    again = babelzoo.from_pretrained(tmp_path / "q").eval()
    torch.testing.assert_close(encode(again, ids), quantized, rtol=0, atol=0)
    assert isinstance(tiny.encoder.layers[0].attention.qkv, nn.Linear)  # the original is untouched


def test_quantized_inference_through_the_encoder_api(e5_small):
    e5 = e5_small
    texts = ["query: Das Haus ist rot.", "query: La maison est rouge.", "query: The house is red.",
             "query: Il pleut depuis trois jours.", "query: Морковь растёт в саду."]
    full = torch.as_tensor(BabelEncoder("e5", e5, e5.tokenizer).encode(texts))
    small = quantize(e5, "int8")
    fast = torch.as_tensor(BabelEncoder("e5 int8", small, small.tokenizer).encode(texts))
    cosine = torch.nn.functional.cosine_similarity(full, fast)
    assert cosine.mean() > 0.985 and cosine.min() > 0.97
    # the feed-forward output layers read GELU activations with outlying channels: kept in fp32,
    # the vectors follow the original more closely
    linears = [n for n, m in e5.named_modules() if isinstance(m, nn.Linear) and n.startswith("encoder.")]
    partial = quantize(e5, "int8", [n for n in linears if not n.endswith("ffn.down")])
    closer = torch.nn.functional.cosine_similarity(full, torch.as_tensor(
        BabelEncoder("e5 int8", partial, partial.tokenizer).encode(texts)))
    assert closer.min() > 0.99 and closer.mean() > cosine.mean()


def test_quantization_refuses_bad_requests_and_unmarked_checkpoints(tiny, tmp_path):
    with pytest.raises(InputError, match="unknown quantization scheme 'int3'"):
        quantize(tiny, "int3")
    small = quantize(tiny, "int8")
    with pytest.raises(InputError, match="already quantized"):
        quantize(small, "int8")
    with pytest.raises(InputError, match="no nn.Linear named"):
        quantize(tiny, "int8", modules=["encoder.nothing"])
    small.save_pretrained(tmp_path / "q")
    (tmp_path / "q" / "quantization.json").unlink()
    with pytest.raises(CheckpointError, match="the weights are quantized .* quantization.json is missing"):
        babelzoo.from_pretrained(tmp_path / "q")
    (tmp_path / "q" / "quantization.json").write_text("{\"scheme\": 1}")
    with pytest.raises(CheckpointError, match="expected"):
        babelzoo.from_pretrained(tmp_path / "q")


def test_smoothquant_scales_follow_the_formula_by_hand():
    # s_j = max|X_j|^α / max|W_:,j|^(1−α); a channel never active keeps s = 1
    activation = torch.tensor([16.0, 1.0, 0.0])
    weight = torch.tensor([[1.0, -4.0, 2.0], [-0.25, 1.0, 1.0]])
    from babelzoo.compression.quantization import smoothing_scales

    s = smoothing_scales(activation, weight, 0.5)
    assert s.tolist() == pytest.approx([16 ** 0.5 / 1.0 ** 0.5, 1.0 / 4 ** 0.5, 1.0])
    assert smoothing_scales(activation, weight, 1.0).tolist() == pytest.approx([16.0, 1.0, 1.0])


def test_a_smoothed_int8_layer_tames_an_outlier_channel():
    """One input channel 100× the others: per-tensor activation rounding wipes out the small
    channels; divided by s first (and s carried on the weights), the product stays close."""
    torch.manual_seed(0)
    linear = nn.Linear(32, 16)
    x = torch.randn(64, 32)
    x[:, 3] *= 100.0
    s = torch.ones(32)
    s[3] = 10.0  # α = 1/2: the outlier's factor 100 split evenly between activations and weights
    plain, smoothed = Int8Linear.from_linear(linear), Int8Linear.from_linear(linear, s)
    # the dequantized weight is the original up to the (coarser) rounding of its rows
    assert float((smoothed.weight - linear.weight).abs().max()) < 10 * float(linear.weight.abs().max()) / 127
    exact = linear(x)
    error = {name: float((layer(x) - exact).norm() / exact.norm()) for name, layer in
             (("plain", plain), ("smoothed", smoothed))}
    assert error["smoothed"] < 0.5 * error["plain"], error


def test_smoothquant_calibrates_on_texts_and_round_trips(e5_small, tmp_path):
    two_layers = prune_layers(e5_small, [0, 1])
    calibration = ["query: Das Haus ist rot.", "query: La maison est rouge.", "query: The house is red.",
                   "query: Морковь растёт в саду."]
    texts = ["query: Il pleut depuis trois jours.", "query: Der Zug fährt um acht Uhr ab."]
    smoothed = quantize(two_layers, "int8", calibration=calibration, alpha=0.7)
    assert smoothed.quantization["smoothing"] == {"method": "smoothquant", "alpha": 0.7, "texts": 4}
    layer = smoothed.encoder.layers[0].ffn.down
    assert isinstance(layer, Int8Linear) and layer.input_scale.shape == (layer.in_features,)
    assert not torch.equal(layer.input_scale, torch.ones_like(layer.input_scale))
    full = torch.as_tensor(BabelEncoder("e5", two_layers, two_layers.tokenizer).encode(texts))
    fast = torch.as_tensor(BabelEncoder("e5 int8", smoothed, smoothed.tokenizer).encode(texts))
    assert torch.nn.functional.cosine_similarity(full, fast).min() > 0.99
    smoothed.save_pretrained(tmp_path / "sq")
    again = babelzoo.from_pretrained(tmp_path / "sq")
    torch.testing.assert_close(torch.as_tensor(BabelEncoder("again", again, again.tokenizer).encode(texts)), fast,
                               rtol=0, atol=0)
    with pytest.raises(InputError, match="'int8' scheme"):
        quantize(two_layers, "int4_weight", calibration=calibration)
    with pytest.raises(InputError, match="alpha=1.5"):
        quantize(two_layers, "int8", calibration=calibration, alpha=1.5)
    with pytest.raises(InputError, match="no non-empty text"):
        quantize(two_layers, "int8", calibration=["  "])
