"""The one attention path against hand-written attention: visibility matrices, causal and
prefix masks, T5 buckets, NEZHA relative encodings; the attention modes against each other."""

import math

import pytest
import torch

import babelzoo
from babelzoo.errors import InputError
from babelzoo.zoo.layers import (
    KVCache,
    LayerStack,
    LayerState,
    Packing,
    RotaryEmbedding,
    SelfAttention,
    TransformerBlock,
    build_attention_mask,
    causal_visibility,
    prefix_visibility,
    select_rows,
)
from babelzoo.zoo.layers.positions import NezhaRelativePositions, sinusoidal_table, t5_relative_bucket


def reference_attention(module: SelfAttention, x, visible, bias=None, relative=None):
    """softmax((q k^T + q a^T)/√d + bias, masked) (v + a), written out per head."""
    b, length, width = x.shape
    h, d = module.num_heads, module.head_dim
    q, k, v = module.qkv(x).split(width, dim=-1)
    q, k, v = (t.view(b, length, h, d).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2)
    if relative is not None:
        scores = scores + torch.einsum("bhid,ijd->bhij", q, relative)
    scores = scores / math.sqrt(d)
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~visible[:, None], float("-inf"))
    probs = scores.softmax(-1)
    out = probs @ v
    if relative is not None:
        out = out + torch.einsum("bhij,ijd->bhid", probs, relative)
    return module.out(out.transpose(1, 2).reshape(b, length, width))


def random_visibility(b, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    vis = torch.rand(b, length, length, generator=g) < 0.4
    return vis | torch.eye(length, dtype=torch.bool)


def test_visibility_matrix_matches_hand_written_attention():
    module = SelfAttention(32, 4).eval()
    x = torch.randn(2, 7, 32)
    vis = random_visibility(2, 7)
    got = module(x, build_attention_mask(visible=vis))
    torch.testing.assert_close(got, reference_attention(module, x, vis), atol=1e-5, rtol=1e-5)


def test_visibility_changes_exactly_the_attention_it_should():
    module = SelfAttention(32, 4).eval()
    x = torch.randn(1, 6, 32)
    vis = random_visibility(1, 6, seed=3)
    mask = build_attention_mask(visible=vis)
    before = module(x, mask)
    j = 2
    changed = x.clone()
    changed[0, j] += 1.0  # alter the key/value at position j only
    after = module(changed, mask)
    for i in range(6):
        moved = not torch.allclose(before[0, i], after[0, i], atol=1e-6)
        assert moved == bool(vis[0, i, j]), f"position {i} {'sees' if vis[0, i, j] else 'does not see'} {j}"


def test_padding_causal_and_prefix_masks():
    module = SelfAttention(16, 2).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    vis = pad.bool()[:, None, :].expand(2, 5, 5)
    torch.testing.assert_close(module(x, build_attention_mask(pad)), reference_attention(module, x, vis))
    causal = causal_visibility(5)[None].expand(2, 5, 5)
    torch.testing.assert_close(module(x, build_attention_mask(causal=True, length=5)),
                               reference_attention(module, x, causal))
    prefix = prefix_visibility(torch.tensor([2, 4]), 5)
    assert prefix[0].int().tolist() == [[1, 1, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                        [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    torch.testing.assert_close(module(x, build_attention_mask(visible=prefix)), reference_attention(module, x, prefix))


def test_no_mask_when_nothing_is_masked():
    assert build_attention_mask(torch.ones(2, 4)) is None


def test_row_that_sees_nothing_sees_itself():
    vis = torch.zeros(1, 3, 3, dtype=torch.bool)
    vis[0, 0, 1] = True
    mask = build_attention_mask(visible=vis)
    assert mask[0, 0].int().tolist() == [[0, 1, 0], [0, 1, 0], [0, 0, 1]]


def test_t5_buckets_by_hand_and_against_transformers():
    rel = torch.tensor([0, -1, 1, -7, -8, -20, 20, -200, 200])
    # bidirectional, 32 buckets: 16 per sign, 8 exact; log buckets: 8 + floor(log(n/8)/log(16) * 8)
    expected = [0, 1, 17, 7, 8, 10, 26, 15, 31]
    assert t5_relative_bucket(rel, 32, 128).tolist() == expected
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    grid = torch.arange(-150, 151)
    reference = t5.T5Attention._relative_position_bucket(grid, bidirectional=True, num_buckets=32, max_distance=128)
    assert torch.equal(t5_relative_bucket(grid, 32, 128), reference)


def test_nezha_relative_attention_matches_formula():
    module = SelfAttention(32, 4).eval()
    positions = NezhaRelativePositions(head_dim=8, max_distance=3)
    table = positions(6)
    # a_ij is the sinusoid of clip(j - i, -3, 3) + 3
    assert torch.equal(table[0, 5], sinusoidal_table(7, 8)[6])
    assert torch.equal(table[4, 0], sinusoidal_table(7, 8)[0])
    assert torch.equal(table[2, 3], sinusoidal_table(7, 8)[4])
    x = torch.randn(2, 6, 32)
    pad = torch.tensor([[1] * 6, [1] * 4 + [0] * 2])
    vis = pad.bool()[:, None, :].expand(2, 6, 6)
    got = module(x, build_attention_mask(pad), relative=table)
    torch.testing.assert_close(got, reference_attention(module, x, vis, relative=table), atol=1e-5, rtol=1e-5)


def test_additive_bias_with_padding():
    module = SelfAttention(16, 2).eval()
    x = torch.randn(2, 4, 16)
    bias = torch.randn(1, 2, 4, 4)
    pad = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    vis = pad.bool()[:, None, :].expand(2, 4, 4)
    torch.testing.assert_close(module(x, build_attention_mask(pad), bias=bias),
                               reference_attention(module, x, vis, bias=bias), atol=1e-5, rtol=1e-5)


def test_each_attention_mode_equals_the_full_pass_where_they_meet():
    # at_rows, packed and cached compute a part of what forward computes on the padded batch.
    torch.manual_seed(0)
    module = SelfAttention(16, 2).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    mask, bias = build_attention_mask(pad), torch.randn(1, 2, 5, 5)
    full, biased = module(x, mask), module(x, mask, bias=bias)
    picked = torch.tensor([[0, 1, 0, 1, 0], [1, 0, 1, 0, 0]], dtype=torch.bool)
    rows, valid = select_rows(picked)
    torch.testing.assert_close(module.at_rows(x, rows, mask=mask)[valid], full[picked])
    torch.testing.assert_close(module.at_rows(x, rows, mask=mask, bias=bias)[valid], biased[picked])
    packing = Packing(pad)  # segment by segment without a bias, on the padded layout with one
    torch.testing.assert_close(module.packed(packing.pack(x), packing, mask=mask), full[pad.bool()])
    torch.testing.assert_close(module.packed(packing.pack(x), packing, mask=mask, bias=bias), biased[pad.bool()])
    causal = module(x, build_attention_mask(causal=True, length=5))
    cache = KVCache(1, 2, 2, 5, 8)
    first = module.cached(x[:, :3], cache.layer(0), mask=build_attention_mask(causal=True, length=3))
    cache.advance(3)
    keys, queries = torch.arange(5), 3 + torch.arange(2)
    second = module.cached(x[:, 3:], cache.layer(0), mask=(keys[None, :] <= queries[:, None])[None, None])
    torch.testing.assert_close(torch.cat([first, second], dim=1), causal)


def test_a_block_refuses_state_its_attention_modes_do_not_combine():
    block = TransformerBlock(16, 2, 32).eval()
    x, rows = torch.randn(1, 4, 16), torch.tensor([[1, 2]])
    with pytest.raises(InputError, match="query rows and packed tokens cannot be combined"):
        block(x, LayerState(rows=rows, packing=Packing(torch.ones(1, 4))))
    rotary = RotaryEmbedding(8)(torch.arange(4)[None])
    with pytest.raises(InputError, match="query rows cannot be combined with NEZHA relative or rotary"):
        block(x, LayerState(rows=rows, rotary=rotary))


def test_sinusoidal_table_formula():
    table = sinusoidal_table(10, 6)
    p, i = 7, 1
    assert table[p, 2 * i].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 6)), abs=1e-6)
    assert table[p, 2 * i + 1].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 6)), abs=1e-6)


def test_a_causal_mask_lies_on_the_device_of_its_inputs_or_the_one_given():
    # A batch without padding leaves no padding mask to take the device from: the causal
    # triangle must still lie on the model's device (it lay on the CPU beside a model on a GPU).
    # Under a meta default device, a mask made without a device would land on meta.
    cpu = torch.device("cpu")
    padding, visible = torch.ones(2, 4), torch.ones(4, 4, dtype=torch.bool)
    with torch.device("meta"):
        assert build_attention_mask(padding, causal=True, length=4).device == cpu
        assert build_attention_mask(causal=True, length=4, device=cpu).device == cpu
        assert build_attention_mask(visible=visible, causal=True).device == cpu


@pytest.mark.parametrize("name", [name for name in babelzoo.list_models("*_tiny")
                                  if babelzoo.model_config(name).fusion is None])  # every text model
def test_no_forward_creates_a_tensor_on_the_default_device(name):
    # Every tensor a forward creates must be placed on the model's device. Under a ``meta``
    # default device, one created without ``device=`` lands on meta and the forward fails: the
    # CPU stands in for the GPU, where such a tensor fails the step (seen on an H200).
    model = babelzoo.create_model(name, vocab_size=64).eval()
    ids = torch.randint(5, 64, (2, 6))
    full = torch.ones(2, 6, dtype=torch.long)  # no padding: no padding mask to take the device from
    with torch.device("meta"):
        if model.config.text.is_encoder_decoder:
            out = model(input_ids=ids, attention_mask=full, decoder_input_ids=ids, decoder_attention_mask=full)
            result = out.logits
        else:  # a layer stack builds a causal mask too (an RNN takes none)
            causal = isinstance(model.encoder, LayerStack)
            result = model(input_ids=ids, attention_mask=full, causal=causal).last_hidden
    assert result.device.type == "cpu" and torch.isfinite(result).all()
