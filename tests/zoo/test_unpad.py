"""Unpadded encoding (``model(..., unpad=True)``): the same states at every real token and the
same gradients as the padded pass, for every Transformer family, in float64."""

import pytest
import torch

import babelzoo
from babelzoo.zoo.layers import Packing

FAMILIES = ["xlmr_tiny", "mbert_tiny", "nezha_tiny", "t5rel_prenorm_tiny", "albert_tiny", "unicoder_tiny",
            "modernbert_tiny"]


def batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (4, 11), generator=g)
    mask = torch.ones(4, 11, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    mask[3, 9:] = 0
    return ids, mask


def test_packing_round_trip():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    x = torch.arange(6.0).view(2, 3, 1)
    packing = Packing(mask)
    assert packing.pack(x).flatten().tolist() == [0.0, 1.0, 3.0]
    assert packing.unpack(packing.pack(x)).flatten().tolist() == [0.0, 1.0, 0.0, 3.0, 0.0, 0.0]


@pytest.mark.parametrize("name", FAMILIES)
def test_unpadded_states_equal_the_padded_pass_at_real_tokens(name):
    model = babelzoo.create_model(name).double().eval()
    ids, mask = batch()
    padded = model(ids, attention_mask=mask, output_hidden_states=True)
    packed = model(ids, attention_mask=mask, output_hidden_states=True, unpad=True)
    real = mask.bool()
    for a, b in zip(padded.hidden_states, packed.hidden_states):
        torch.testing.assert_close(b[real], a[real], rtol=0, atol=1e-12)
        assert b[~real].abs().max() == 0
    torch.testing.assert_close(packed.pooled, padded.pooled, rtol=0, atol=1e-12)


def test_right_padded_rows_attend_segment_by_segment(monkeypatch):
    """Padding-only masks on right-padded rows: attention runs on each row's real tokens alone
    (one SDPA call per row and layer, shaped by that row's length); other masks take the padded
    layout."""
    from babelzoo.zoo.layers import attention

    shapes = []
    real_attend = attention.attend
    monkeypatch.setattr(attention, "attend", lambda q, *a, **k: shapes.append(tuple(q.shape)) or
                        real_attend(q, *a, **k))
    model = babelzoo.create_model("xlmr_tiny", num_layers=2).double().eval()
    ids, mask = batch()
    model(ids, attention_mask=mask, unpad=True)
    heads, d = model.config.text.num_heads, model.config.text.head_dim
    assert shapes == [(1, heads, n, d) for n in (11, 6, 2, 9)] * 2
    assert Packing(mask).lengths == [11, 6, 2, 9]
    assert Packing(torch.tensor([[1, 0, 1], [1, 1, 0]])).lengths is None  # a hole: not segments
    shapes.clear()
    model(ids, attention_mask=mask, unpad=True, causal=True)
    assert shapes == [(4, heads, 11, d)] * 2


def test_unpadded_gradients_equal_the_padded_pass():
    torch.manual_seed(0)
    model = babelzoo.create_model("xlmr_tiny", dropout=0.0, attention_dropout=0.0).double()
    ids, mask = batch()
    weights = torch.randn(4, 11, model.config.text.hidden_size, dtype=torch.float64) * mask[..., None]
    grads = []
    for unpad in (False, True):
        model.zero_grad()
        (model(ids, attention_mask=mask, unpad=unpad).last_hidden * weights).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=0, atol=1e-10, msg=name)


def test_unpadded_selected_positions_equal_the_padded_selection():
    model = babelzoo.create_model("xlmr_tiny").double().eval()
    ids, mask = batch()
    positions = mask.bool() & (torch.arange(11)[None] % 2 == 1)
    full = model(ids, attention_mask=mask).last_hidden
    got = model(ids, attention_mask=mask, unpad=True, output_positions=positions).last_hidden
    torch.testing.assert_close(got, full[positions], rtol=0, atol=1e-12)
