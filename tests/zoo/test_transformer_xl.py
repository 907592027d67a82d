"""Transformer-XL: the relative shift and sinusoids by hand, the attention against a brute-force
loop over the paper's (a) + (b) + (c) + (d), the segment recurrence against one long forward
with the matching attention mask (bidirectional and causal, with padding, with ``mem_len``
truncation), and the memory's stop-gradient."""

from __future__ import annotations

import math

import pytest
import torch

import babelzoo
from babelzoo.errors import InputError
from babelzoo.zoo.layers.xl_relative import (
    XLRelativeAttention,
    memory_attention_mask,
    relative_distances,
    relative_shift,
    sinusoids,
)
from babelzoo.zoo.families.transformer_xl.model import Memory, encode_segment, encode_segments

SMALL = dict(vocab_size=50, hidden_size=16, num_heads=2, intermediate_size=32, pad_token_id=0)


def small_model(**overrides):
    torch.manual_seed(0)
    return babelzoo.create_model("transformer_xl_tiny", **{**SMALL, **overrides}).eval()


def test_relative_distances_and_shift_by_hand():
    assert relative_distances(2, 3).tolist() == [2, 1, 0, -1]
    # 2 queries, the last of 3 keys; column p of x holds distance 2 - p
    x = torch.tensor([[10., 11., 12., 13.],
                      [20., 21., 22., 23.]])
    # query 0 is key position 1: distances to keys 0, 1, 2 are 1, 0, -1 → columns 1, 2, 3
    # query 1 is key position 2: distances 2, 1, 0 → columns 0, 1, 2
    assert relative_shift(x, 3).tolist() == [[11., 12., 13.], [20., 21., 22.]]


@pytest.mark.parametrize("queries,keys", [(3, 5), (4, 4), (1, 6)])
def test_relative_shift_matches_indexing(queries, keys):
    x = torch.randn(2, 3, queries, keys + queries - 1)
    out = relative_shift(x, keys)
    for i in range(queries):
        for j in range(keys):
            assert torch.equal(out[..., i, j], x[..., i, j + queries - 1 - i])
    # the causal width (distances keys-1 .. 0): exact wherever the key is at or before the query
    causal = relative_shift(x[..., :keys], keys)
    memory = keys - queries
    for i in range(queries):
        assert torch.equal(causal[..., i, :memory + i + 1], out[..., i, :memory + i + 1])


def test_sinusoids_by_hand():
    r = sinusoids(torch.tensor([0, 1, -2]), 4)  # frequencies 1 and 1/100
    expected = torch.tensor([[0.0, 0.0, 1.0, 1.0],
                             [math.sin(1), math.sin(0.01), math.cos(1), math.cos(0.01)],
                             [math.sin(-2), math.sin(-0.02), math.cos(-2), math.cos(-0.02)]])
    torch.testing.assert_close(r, expected)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_follows_the_papers_formula(causal):
    torch.manual_seed(0)
    hidden, heads, d = 8, 2, 4
    attention = XLRelativeAttention(hidden, heads).eval()
    with torch.no_grad():
        attention.content_bias.normal_()
        attention.position_bias.normal_()
    b, length, mlen = 2, 3, 2
    x, memory = torch.randn(b, length, hidden), torch.randn(b, mlen, hidden)
    attention_mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    memory_mask = torch.tensor([[1, 1], [0, 1]])
    keys = mlen + length
    mask = memory_attention_mask(attention_mask, memory_mask, None, causal, length)
    positions = sinusoids(relative_distances(length, keys), hidden)
    with torch.no_grad():
        got = attention(x, positions=positions, mask=mask, memory=memory)

    wq, wkv = attention.query.weight, attention.key_value.weight
    wk, wv, wr = wkv[:hidden], wkv[hidden:], attention.position.weight
    u, v = attention.content_bias, attention.position_bias
    context = torch.cat([memory, x], 1)
    real = torch.cat([memory_mask, attention_mask], 1)
    expected = torch.zeros(b, length, hidden)
    for row in range(b):
        for h in range(heads):
            part = slice(h * d, (h + 1) * d)
            for i in range(length):
                scores = []
                for j in range(keys):
                    e_i, e_j = x[row, i], context[row, j]
                    r = sinusoids(torch.tensor([mlen + i - j]), hidden)[0]  # R_{i-j}
                    a = (wq[part] @ e_i) @ (wk[part] @ e_j)
                    b_ = (wq[part] @ e_i) @ (wr[part] @ r)
                    c = u[h] @ (wk[part] @ e_j)
                    d_ = v[h] @ (wr[part] @ r)
                    seen = bool(real[row, j]) and (not causal or j <= mlen + i)
                    scores.append((a + b_ + c + d_) / math.sqrt(d) if seen else torch.tensor(float("-inf")))
                p = torch.stack(scores).softmax(0)
                expected[row, i, part] = sum(p[j] * (wv[part] @ context[row, j]) for j in range(keys))
    expected = expected @ attention.out.weight.T
    real_queries = attention_mask.bool()
    torch.testing.assert_close(got[real_queries], expected[real_queries], atol=1e-5, rtol=1e-5)


def two_segment_batch():
    """Three documents of up to 8 tokens, cut into two segments of 4: row 0 full, row 1 with its
    second segment padded at the end, row 2 with two real tokens (its second segment empty)."""
    torch.manual_seed(1)
    ids = torch.randint(5, 50, (3, 8))
    ids[1, 6:] = 0
    ids[2, 2:] = 0
    return ids, ids.ne(0).long()


def long_visibility(length: int, segment: int, mem_len: int) -> torch.Tensor:
    """[T, T]: a query of segment k sees its own segment and the ``mem_len`` positions before it."""
    pos = torch.arange(length)
    start = pos // segment * segment
    return (pos[None, :] >= (start[:, None] - mem_len)) & (pos[None, :] < start[:, None] + segment)


@pytest.mark.parametrize("causal", [False, True])
def test_two_segments_with_memory_equal_one_long_forward(causal):
    model = small_model()
    ids, mask = two_segment_batch()
    with torch.no_grad():
        outs = encode_segments(model, ids, mask, segment_length=4, mem_len=4, causal=causal)
        # the first segment's queries see their own segment only, the second's the first and their own
        long = model(ids, attention_mask=mask, visible=long_visibility(8, 4, 4), causal=causal).last_hidden
    recurrent = torch.cat([o.last_hidden for o in outs], 1)
    real = mask.bool()
    torch.testing.assert_close(recurrent[real], long[real], atol=1e-5, rtol=1e-5)
    # the memory did change the second segment: without it, the outputs differ
    with torch.no_grad():
        alone = encode_segment(model, ids[:, 4:], mask[:, 4:], causal=causal).last_hidden
    assert (alone[0] - recurrent[0, 4:]).abs().max() > 1e-3


@pytest.mark.parametrize("mem_len", [3, 8])
def test_mem_len_truncates_the_memory(mem_len):
    model = small_model()
    torch.manual_seed(2)
    ids = torch.randint(5, 50, (2, 15))
    ids[1, 12:] = 0
    mask = ids.ne(0).long()
    with torch.no_grad():
        outs = encode_segments(model, ids, mask, segment_length=5, mem_len=mem_len)
        long = model(ids, attention_mask=mask, visible=long_visibility(15, 5, mem_len)).last_hidden
        embedded = model.embeddings(ids)
    assert [o.memory.length for o in outs] == [min(mem_len, 5), mem_len, mem_len]
    # layer 0's memory after two segments: the embeddings of the last mem_len positions read
    torch.testing.assert_close(outs[1].memory.states[0], embedded[:, 10 - mem_len:10])
    assert torch.equal(outs[1].memory.mask, mask[:, 10 - mem_len:10])
    recurrent = torch.cat([o.last_hidden for o in outs], 1)
    torch.testing.assert_close(recurrent[mask.bool()], long[mask.bool()], atol=1e-5, rtol=1e-5)


def test_an_empty_previous_segment_contributes_nothing():
    model = small_model()
    torch.manual_seed(3)
    first = torch.randint(5, 50, (2, 4))
    first[1] = 0  # row 1's previous segment is all padding
    second = torch.randint(5, 50, (2, 4))
    with torch.no_grad():
        memory = encode_segment(model, first, mem_len=4).memory
        after = encode_segment(model, second, memory=memory).last_hidden
        alone = encode_segment(model, second).last_hidden
        plain = model(second).last_hidden
    torch.testing.assert_close(after[1], alone[1], atol=1e-5, rtol=1e-5)
    assert (after[0] - alone[0]).abs().max() > 1e-3
    torch.testing.assert_close(alone, plain, atol=0, rtol=0)


def test_no_gradient_flows_into_the_memory():
    model = small_model(dropout=0.0, attention_dropout=0.0).train()  # no dropout: the passes compare exactly
    first = torch.arange(5, 9)[None].repeat(2, 1)  # tokens 5..8 in the first segment only
    second = torch.arange(20, 24)[None].repeat(2, 1)
    out1 = encode_segment(model, first, mem_len=4)
    assert all(not s.requires_grad and s.grad_fn is None for s in out1.memory.states)
    model.zero_grad()
    encode_segment(model, second, memory=out1.memory).last_hidden.pow(2).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    # the first segment's tokens reach the loss only through the (stopped) memory: no gradient
    assert torch.equal(grads["embeddings.word.weight"][5:9], torch.zeros(4, 16))
    assert grads["embeddings.word.weight"][20:24].abs().sum() > 0

    # reference: the memory as constants computed without autograd
    with torch.no_grad():
        states = model(first, output_hidden_states=True).hidden_states[:-1]
    model.zero_grad()
    constant = Memory(tuple(s.clone() for s in states), torch.ones(2, 4, dtype=torch.long))
    encode_segment(model, second, memory=constant).last_hidden.pow(2).sum().backward()
    reference = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert sorted(reference) == sorted(grads) and "encoder.layers.0.attention.key_value.weight" in grads
    for name, grad in reference.items():
        torch.testing.assert_close(grad, grads[name], atol=1e-6, rtol=1e-5)

    # and a memory that kept its graph would send gradient to the first segment's tokens
    model.zero_grad()
    live = Memory(tuple(model(first, output_hidden_states=True).hidden_states[:-1]), torch.ones(2, 4, dtype=torch.long))
    encode_segment(model, second, memory=live).last_hidden.pow(2).sum().backward()
    assert model.embeddings.word.weight.grad[5:9].abs().sum() > 0


def test_memory_extend_detaches_and_keeps_the_last_positions():
    x = torch.randn(1, 3, 2, requires_grad=True)
    previous = Memory((torch.zeros(1, 2, 2),), torch.tensor([[1, 0]]))
    memory = Memory.extend(previous, [x * 2], torch.tensor([[1, 1, 0]]), mem_len=4)
    assert memory.length == 4 and not memory.states[0].requires_grad
    assert memory.mask.tolist() == [[0, 1, 1, 0]]
    torch.testing.assert_close(memory.states[0][0, 1:], (x * 2)[0].detach())
    assert Memory.extend(previous, [x], torch.ones(1, 3), mem_len=0) is None


def test_causal_config_and_the_plain_forward_agree_with_encode_segment():
    model = small_model(causal=True)
    ids, mask = two_segment_batch()
    with torch.no_grad():
        plain = model(ids, attention_mask=mask).last_hidden
        seg = encode_segment(model, ids, mask).last_hidden
        changed = ids.clone()
        changed[:, 6] = 7  # a later token cannot change earlier outputs under a causal model
        later = model(changed, attention_mask=changed.ne(0).long()).last_hidden
    torch.testing.assert_close(seg, plain, atol=0, rtol=0)
    torch.testing.assert_close(later[0, :6], plain[0, :6], atol=1e-6, rtol=1e-6)


def test_bad_memory_and_models_without_one_are_errors():
    model = small_model()
    memory = encode_segment(model, torch.randint(5, 50, (2, 4))).memory
    with pytest.raises(InputError, match=r"memory holds 2 states shaped .*this segment needs 2 states of \[3, 4, 16\]"):
        encode_segment(model, torch.randint(5, 50, (3, 4)), memory=memory)
    with pytest.raises(InputError, match="needs a transformer_xl model"):
        encode_segment(babelzoo.create_model("mbert_tiny", vocab_size=50), torch.randint(5, 50, (1, 4)))
    with pytest.raises(InputError, match="segment_length=0"):
        encode_segments(model, torch.randint(5, 50, (1, 4)), segment_length=0)


@pytest.mark.parametrize("kind", ["sequence_classification", "token_classification"])
def test_task_heads_fine_tune_on_transformer_xl(kind):
    torch.manual_seed(0)
    net = babelzoo.create_model("transformer_xl_tiny", **SMALL, head={"kind": kind, "labels": ["a", "b", "c"]})
    ids, mask = two_segment_batch()
    logits = net.head_logits(ids, attention_mask=mask)
    assert logits.shape == ((3, 3) if kind == "sequence_classification" else (3, 8, 3))
    if kind == "token_classification":  # the labelled positions alone equal the full pass there
        net.eval()
        with torch.no_grad():
            full = net.head_logits(ids, attention_mask=mask)
            picked = net.head_logits(ids, attention_mask=mask, positions=mask.bool())
        torch.testing.assert_close(picked, full[mask.bool()], atol=1e-5, rtol=1e-5)
    logits.sum().backward()
    assert net.encoder.layers[0].attention.position_bias.grad.abs().sum() > 0
