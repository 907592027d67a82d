"""XLNet's own pieces on hand-built inputs: the relative encodings and the relative shift, the
relative segment term, and two-stream attention, whose dependencies are checked against the
factorisation order position by position (a brute-force reading of §2.3)."""

import math

import pytest
import torch

import babelzoo
from babelzoo.zoo.families.xlnet.model import relative_encodings, relative_shift


def test_relative_encodings_are_the_sines_then_cosines_of_each_distance():
    table = relative_encodings(3, 4)
    assert table.shape == (6, 4)
    for row, distance in enumerate([3, 2, 1, 0, -1, -2]):
        expected = [math.sin(distance), math.sin(distance / 100), math.cos(distance), math.cos(distance / 100)]
        torch.testing.assert_close(table[row], torch.tensor(expected), atol=1e-6, rtol=0)
    clamped = relative_encodings(3, 4, clamp_len=1)
    torch.testing.assert_close(clamped[:3], relative_encodings(1, 4)[:1].expand(3, -1))  # 3, 2, 1 → 1


def test_relative_shift_puts_distance_i_minus_j_at_i_j():
    length = 4
    # score of query i against distance d (column c ↔ d = L − c) = 10·i + d
    distances = length - torch.arange(2 * length)
    scores = (10 * torch.arange(length)[:, None] + distances[None, :]).float()[None, None]
    shifted = relative_shift(scores, length)[0, 0]
    i, j = torch.meshgrid(torch.arange(length), torch.arange(length), indexing="ij")
    assert torch.equal(shifted, (10 * i + (i - j)).float())


def model(**overrides):
    torch.manual_seed(0)
    options = dict(vocab_size=50, hidden_size=32, num_heads=2, intermediate_size=48, dropout=0.0, init_std=0.2,
                   attention_dropout=0.0)
    return babelzoo.create_model("xlnet_tiny", **{**options, **overrides}).eval()


def test_segments_enter_only_as_same_or_different():
    m = model()
    ids = torch.randint(5, 50, (1, 7))
    a = torch.tensor([[0, 0, 0, 1, 1, 1, 2]])
    b = torch.tensor([[5, 5, 5, 9, 9, 9, 0]])  # other ids, the same partition
    with torch.no_grad():
        out_a, out_b = m(ids, segment_ids=a).last_hidden, m(ids, segment_ids=b).last_hidden
        one = m(ids, segment_ids=torch.zeros_like(a)).last_hidden
    torch.testing.assert_close(out_a, out_b, atol=0, rtol=0)
    assert (out_a - one).abs().max() > 1e-4


def dependencies(f, x):
    """dep[k, j]: does output row k change when the input at position j moves?"""
    with torch.no_grad():
        base = f(x)
        columns = []
        for j in range(x.shape[1]):
            moved = x.clone()
            moved[0, j] += 1.0
            columns.append((f(moved) - base).abs().amax(-1)[0] > 1e-6)
    return torch.stack(columns, dim=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_stream_attention_follows_the_factorisation_order_exactly(seed):
    """Content h_i depends on x_j iff z⁻¹(j) ≤ z⁻¹(i); query g at target t iff z⁻¹(j) < z⁻¹(t):
    the query stream never sees its own token. Padding influences nothing."""
    m = model(num_layers=2)
    length, real = 8, 7
    order = torch.randperm(real, generator=torch.Generator().manual_seed(seed))  # z, over the real positions
    rank = torch.empty(length, dtype=torch.long)
    rank[order] = torch.arange(real)
    rank[real:] = length
    # brute force: loop over the order, each position sees what came before it
    visible = torch.zeros(1, length, length, dtype=torch.bool)
    for t, i in enumerate(order.tolist()):
        for j in order[:t].tolist():
            visible[0, i, j] = True
    assert torch.equal(visible[0], (rank[None, :] < rank[:, None]) & (rank[:, None] < length) & (rank[None, :] < length))
    targets = order[-3:]
    mapping = torch.zeros(1, 4, length)  # three targets and a padding row
    mapping[0, torch.arange(3), targets] = 1.0
    mask = (torch.arange(length) < real).long()[None]
    x = m.embeddings(torch.randint(5, 50, (1, length)))
    content = dependencies(lambda e: m.encoder.two_stream(e, visible, mapping, mask)[0], x)
    query = dependencies(lambda e: m.encoder.two_stream(e, visible, mapping, mask)[1], x)
    seen = visible[0] | torch.eye(length, dtype=torch.bool)
    assert torch.equal(content[:real], seen[:real])
    for p, t in enumerate(targets.tolist()):
        assert torch.equal(query[p], visible[0, t])
        assert not query[p, t]  # never its own content
    assert not query[3].any()  # the padding row reads nothing
    assert not content[:real, real:].any() and not query[:, real:].any()  # padding is never attended


def test_the_content_stream_of_two_stream_is_the_forward_pass_with_the_same_visibility():
    m = model()
    ids = torch.randint(5, 50, (2, 6))
    visible = torch.rand(2, 6, 6) > 0.5
    seen = visible | torch.eye(6, dtype=torch.bool)
    mapping = torch.zeros(2, 1, 6)
    mapping[:, 0, 2] = 1.0
    with torch.no_grad():
        content, _ = m.encoder.two_stream(m.embeddings(ids), visible, mapping)
        torch.testing.assert_close(content, m(ids, visible=seen).last_hidden, atol=1e-6, rtol=0)


def test_position_ids_are_not_read():
    """Positions are the sequence order: TLM's restarted position ids change nothing."""
    m = model()
    ids = torch.randint(5, 50, (1, 6))
    with torch.no_grad():
        restarted = m(ids, position_ids=torch.tensor([[0, 1, 2, 0, 1, 2]])).last_hidden
        torch.testing.assert_close(restarted, m(ids).last_hidden, atol=0, rtol=0)
