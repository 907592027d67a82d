"""Unpadded encoding (``model(..., unpad=True)``): the same states at every real token and the
same gradients as the padded pass, for every tiny model whose encoder says it packs, in float64;
an encoder that cannot pack runs padded and gives the padded pass's states."""

import pytest
import torch

import babelzoo
from babelzoo.zoo.family import family_of
from babelzoo.zoo.layers import LayerStack, Packing
from babelzoo.zoo.model import BabelModel


def packs(model) -> bool:
    """What the encoder declares: a text encoder whose layer stack may run on the real tokens."""
    return isinstance(model, BabelModel) and isinstance(model.encoder, LayerStack) and model.encoder.can_pack()


# Every text encoder of the zoo at tiny size, split by its declaration (``LayerStack.can_pack``):
# a new family or entry lands in one of the two lists without a line here.
TEXT_ENCODERS = {name: packs(babelzoo.create_model(name)) for name in babelzoo.list_models("*_tiny")
                 if babelzoo.model_config(name).fusion is None
                 and family_of(babelzoo.model_config(name).text).model_class() is BabelModel}
PACKING = [name for name, packing in TEXT_ENCODERS.items() if packing]
PADDED = [name for name, packing in TEXT_ENCODERS.items() if not packing]


def batch(lengths=(11, 6, 2, 9)):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (len(lengths), max(lengths)), generator=g)
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()
    return ids, mask


def test_packing_round_trip():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    x = torch.arange(6.0).view(2, 3, 1)
    packing = Packing(mask)
    assert packing.pack(x).flatten().tolist() == [0.0, 1.0, 3.0]
    assert packing.unpack(packing.pack(x)).flatten().tolist() == [0.0, 1.0, 0.0, 3.0, 0.0, 0.0]


@pytest.mark.parametrize("lengths", [(11, 6, 2, 9), (3, 3, 7, 7, 7, 1, 2)], ids=["distinct", "runs"])
@pytest.mark.parametrize("name", PACKING)
def test_unpadded_states_equal_the_padded_pass_at_real_tokens(name, lengths):
    model = babelzoo.create_model(name).double().eval()
    ids, mask = batch(lengths)
    padded = model(ids, attention_mask=mask, output_hidden_states=True)
    packed = model(ids, attention_mask=mask, output_hidden_states=True, unpad=True)
    real = mask.bool()
    for a, b in zip(padded.hidden_states, packed.hidden_states):
        torch.testing.assert_close(b[real], a[real], rtol=0, atol=1e-12)
        assert b[~real].abs().max() == 0
    torch.testing.assert_close(packed.pooled, padded.pooled, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", PADDED)
def test_an_encoder_that_cannot_pack_runs_padded(name):
    """``unpad=True`` is a request: an encoder that declares it cannot pack gives exactly the
    padded pass's states, padding positions included."""
    model = babelzoo.create_model(name).double().eval()
    ids, mask = batch()
    padded = model(ids, attention_mask=mask, output_hidden_states=True)
    unpadded = model(ids, attention_mask=mask, output_hidden_states=True, unpad=True)
    for a, b in zip(padded.hidden_states, unpadded.hidden_states, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=0)


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


def test_rows_of_one_length_share_one_attention_call(monkeypatch):
    """Consecutive rows of equal length (a length-sorted batch) attend in one SDPA call each run;
    empty rows are skipped."""
    from babelzoo.zoo.layers import attention

    shapes = []
    real_attend = attention.attend
    monkeypatch.setattr(attention, "attend", lambda q, *a, **k: shapes.append(tuple(q.shape)) or
                        real_attend(q, *a, **k))
    model = babelzoo.create_model("xlmr_tiny", num_layers=1).double().eval()
    ids, mask = batch((3, 3, 7, 7, 7, 0, 2, 3))
    packing = Packing(mask)
    assert [(r.first, r.rows, r.length, r.start) for r in packing.runs] == [
        (0, 2, 3, 0), (2, 3, 7, 6), (6, 1, 2, 27), (7, 1, 3, 29)]
    model(ids, attention_mask=mask, unpad=True)
    heads, d = model.config.text.num_heads, model.config.text.head_dim
    assert shapes == [(2, heads, 3, d), (3, heads, 7, d), (1, heads, 2, d), (1, heads, 3, d)]


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


@pytest.mark.parametrize("name", ["mbert_tiny", "xlm_tiny", "xlmr_tiny"])
def test_embeddings_run_on_the_packed_tokens(name, monkeypatch):
    """The embeddings see the N real tokens only ([1, N]), with the positions, segments and
    languages a padded pass gives them, and the states equal the padded pass's."""
    model = babelzoo.create_model(name, num_languages=3).double().eval()
    ids, mask = batch((5, 5, 3, 1))
    segments = (torch.arange(5)[None, :] >= 2).long().expand(4, -1)
    languages = torch.tensor([0, 1, 2, 1])[:, None].expand(-1, 5)
    extra = {"segment_ids": segments, "language_ids": languages}
    padded = model(ids, attention_mask=mask, **extra)
    shapes = []
    real_forward = type(model.embeddings).forward
    monkeypatch.setattr(type(model.embeddings), "forward",
                        lambda self, ids, *a, **k: shapes.append(tuple(ids.shape)) or real_forward(self, ids, *a, **k))
    packed = model(ids, attention_mask=mask, unpad=True, **extra)
    assert shapes == [(1, 14)]
    torch.testing.assert_close(packed.last_hidden[mask.bool()], padded.last_hidden[mask.bool()], rtol=0, atol=1e-12)


@pytest.mark.parametrize("scale", [None, 1.0])
def test_short_segments_attend_by_two_products_equal_to_the_formula(scale):
    """fp32 segments up to SHORT_SEGMENT tokens attend through two batched products: equal to
    softmax(q·kᵀ·s)·v written out in float64, and to SDPA to float32 rounding."""
    from babelzoo.zoo.layers.attention import _short_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 16, generator=g) for _ in range(3))
    s = 1 / 16 ** 0.5 if scale is None else scale
    expected = torch.softmax(q.double() @ k.double().transpose(-1, -2) * s, dim=-1) @ v.double()
    got = _short_attention(q, k, v, scale)
    assert got.shape == (3, 4, 7, 16) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=2e-6)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
    torch.testing.assert_close(got, sdpa, rtol=0, atol=2e-6)


def test_fp32_unpadded_pass_takes_the_short_path_below_the_threshold_only(monkeypatch):
    """A float32 batch: runs up to SHORT_SEGMENT tokens go through the two products, longer ones
    through SDPA, and the states equal the padded pass's to float32 rounding."""
    from babelzoo.zoo.layers import attention

    short, sdpa = [], []
    real_short, real_attend = attention._short_attention, attention.attend
    monkeypatch.setattr(attention, "_short_attention", lambda q, *a: short.append(q.shape[2]) or real_short(q, *a))
    monkeypatch.setattr(attention, "attend", lambda q, *a, **k: sdpa.append(q.shape[2]) or real_attend(q, *a, **k))
    model = babelzoo.create_model("xlmr_tiny", num_layers=1, max_positions=128).eval()
    n = attention.SHORT_SEGMENT
    ids, mask = batch((n + 1, n, 5))
    with torch.no_grad():
        packed = model(ids, attention_mask=mask, unpad=True).last_hidden
        assert short == [n, 5] and sdpa == [n + 1]
        padded = model(ids, attention_mask=mask).last_hidden
    torch.testing.assert_close(packed[mask.bool()], padded[mask.bool()], rtol=0, atol=1e-5)
