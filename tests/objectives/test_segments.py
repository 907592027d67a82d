"""The segment objectives (segment_mlm, segment_clm): streams, segments and labels by hand, the
loss against a segment-by-segment reference with the memory carried by hand, gradients
truncated at segment boundaries, the memory-free baseline on any encoder, and learning on real
documents (Django's catalogs grouped by source file) in under 100 steps."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError
from babelzoo.objectives import ExampleError, Sentence, build_objective
from babelzoo.objectives.segments import cut_segments, document_stream
from babelzoo.zoo.families.transformer_xl.model import Memory, encode_segment

I = -100
SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=50, languages={"en": 0, "de": 1})
DOCS = [[[10, 11, 12], [13, 14, 15, 16]], [[20, 21], [22, 23], [24]], [[30, 31, 32, 33, 34, 35, 36, 37]]]


def model(**overrides):
    torch.manual_seed(0)
    options = dict(vocab_size=50, hidden_size=16, num_heads=2, intermediate_size=32, dropout=0.0,
                   attention_dropout=0.0)
    return babelzoo.create_model("transformer_xl_tiny", **{**options, **overrides})


def test_streams_and_segments_by_hand():
    assert document_stream([Sentence([10, 11]), Sentence([12])], SPECIALS) == [1, 10, 11, 2, 12, 2]
    ids, mask = cut_segments([[1, 10, 11, 2, 12, 2], [1, 20, 2]], 4, pad=0)
    assert ids.tolist() == [[[1, 10, 11, 2], [12, 2, 0, 0]], [[1, 20, 2, 0], [0, 0, 0, 0]]]
    assert mask.tolist() == [[[1, 1, 1, 1], [1, 1, 0, 0]], [[1, 1, 1, 0], [0, 0, 0, 0]]]


def test_segment_clm_targets_cross_segment_boundaries():
    objective = build_objective("segment_clm", SPECIALS, model().config, segment_length=4, max_segments=3)
    batch = objective.prepare(DOCS)
    # document 0: [CLS] 10 11 12 [SEP] 13 14 15 16 [SEP] → inputs all but the last, targets all but the first
    assert batch["input_ids"][0].tolist() == [[1, 10, 11, 12], [2, 13, 14, 15], [16, 0, 0, 0]]
    assert batch["labels"][0].tolist() == [[10, 11, 12, 2], [13, 14, 15, 16], [2, I, I, I]]
    assert batch["labels"][1].tolist() == [[20, 21, 2, 22], [23, 2, 24, 2], [I, I, I, I]]
    assert int(batch["truncated"]) == 0


def test_a_long_document_is_read_as_one_window():
    objective = build_objective("segment_mlm", SPECIALS, model().config, segment_length=4, max_segments=2,
                                masking={"probability": 0.3})
    long = [[10 + i for i in range(5)] for _ in range(3)]  # a stream of 1 + 3·6 = 19 tokens
    batch = objective.prepare([long])
    assert int(batch["truncated"]) == 19 - 8 and batch["input_ids"].shape == (1, 2, 4)
    labels, ids = batch["labels"].flatten(), batch["input_ids"].flatten()
    original = torch.where(labels.ne(I), labels, ids)
    stream = torch.tensor(document_stream([Sentence(s) for s in long], SPECIALS))
    starts = [s for s in range(len(stream) - 7) if torch.equal(stream[s:s + 8], original)]
    assert starts, "the window is a contiguous piece of the document's stream"
    assert labels.ne(I).any()


def reference_loss(net, batch, mem_len, causal):
    """The loss by hand: each segment encoded after the memory of the previous ones."""
    logits, targets, memory = [], [], None
    for s in range(batch["input_ids"].shape[1]):
        ids, mask, labels = batch["input_ids"][:, s], batch["attention_mask"][:, s], batch["labels"][:, s]
        out = encode_segment(net, ids, mask, memory, mem_len=mem_len, causal=causal)
        memory = out.memory
        picked = labels.ne(I)
        logits.append(net.mlm_logits(out.last_hidden[picked]))
        targets.append(labels[picked])
    return F.cross_entropy(torch.cat(logits), torch.cat(targets))


@pytest.mark.parametrize("name,causal", [("segment_mlm", False), ("segment_clm", True)])
def test_loss_equals_the_segment_by_segment_reference(name, causal):
    net = model(init_std=0.3).eval()  # large weights: the memory's effect shows in the loss
    with_memory = build_objective(name, SPECIALS, net.config, segment_length=4, mem_len=6)
    without = build_objective(name, SPECIALS, net.config, segment_length=4, mem_len=0)
    torch.manual_seed(5)
    batch = with_memory.prepare(DOCS)
    with torch.no_grad():
        loss = with_memory(net, batch).value
        baseline = without(net, batch).value
        torch.testing.assert_close(loss, reference_loss(net, batch, 6, causal), atol=1e-5, rtol=1e-5)
        # mem_len=0: every segment through the plain forward, alone
        torch.testing.assert_close(baseline, reference_loss(net, batch, 0, causal), atol=1e-5, rtol=1e-5)
    assert abs(float(loss) - float(baseline)) > 1e-3


def test_the_gradient_stops_at_segment_boundaries():
    net = model()
    objective = build_objective("segment_clm", SPECIALS, net.config, segment_length=4, mem_len=4)
    batch = objective.prepare(DOCS)
    objective(net, batch).value.backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    # reference: each segment's loss on its own, after a memory of constants (no graph into it)
    net.zero_grad()
    labels = batch["labels"]
    total = labels.ne(I).sum()
    memory = None
    for s in range(labels.shape[1]):
        ids, mask = batch["input_ids"][:, s], batch["attention_mask"][:, s]
        if memory is not None:
            memory = Memory(tuple(x.clone() for x in memory.states), memory.mask.clone())
        out = encode_segment(net, ids, mask, memory, mem_len=4, causal=True)
        picked = labels[:, s].ne(I)
        part = F.cross_entropy(net.mlm_logits(out.last_hidden[picked]), labels[:, s][picked], reduction="sum")
        (part / total).backward()
        memory = out.memory
    for name, param in net.named_parameters():
        if param.grad is not None or name in grads:
            torch.testing.assert_close(param.grad, grads[name], atol=1e-6, rtol=1e-4)


def test_the_memory_free_baseline_runs_on_any_encoder_and_memory_needs_transformer_xl():
    mbert = babelzoo.create_model("mbert_tiny", vocab_size=50)
    objective = build_objective("segment_mlm", SPECIALS, mbert.config, segment_length=4)
    assert objective.mem_len == 0
    loss = objective(mbert, objective.prepare(DOCS))
    assert torch.isfinite(loss.value)
    with pytest.raises(ConfigError, match=r"mem_len=4 needs a model with a segment memory .*this model's family is 'transformer'"):
        build_objective("segment_clm", SPECIALS, mbert.config, mem_len=4)
    assert build_objective("segment_clm", SPECIALS, model().config).mem_len == 64  # the config's mem_len


def test_language_ids_follow_the_document():
    net = model(num_languages=2)
    objective = build_objective("segment_clm", SPECIALS, net.config, segment_length=4)
    batch = objective.prepare([[([10, 11], "de"), ([12], "de")], [([20, 21, 22, 23, 24], "en")]])
    assert batch["language_ids"][0].tolist() == [[1, 1, 1, 1], [1, 0, 0, 0]]
    assert batch["language_ids"][1].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0]]
    assert torch.isfinite(objective(net, batch).value)


@pytest.mark.parametrize("bad,message", [([[]], "expected a document"), ([[10, 11]], "expected a document"),
                                         ([], "empty batch"), ([[[10, 99]]], "outside the vocabulary")])
def test_bad_documents_are_reported(bad, message):
    objective = build_objective("segment_mlm", SPECIALS, model().config)
    with pytest.raises(ExampleError, match=message):
        objective.prepare(bad)


# --- learning on real documents ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def documents(spm):
    """Django's German, French and Spanish catalogs as documents: the messages of one source file, in
    order, up to 32 a document."""
    from babelzoo.offline.embedded import CatalogDocuments

    source = CatalogDocuments(langs=["de", "fr", "es"], packages=["django"], max_sentences=32)
    return [[Sentence(spm.encode(text), lang) for text in document]
            for lang, docs in source.documents().items() for document in docs]


def held_loss(net, objective, batch) -> float:
    net.eval()
    with torch.no_grad():
        value = float(objective(net, batch).value)
    net.train()
    return value


# (optimiser steps, largest allowed end/start ratio of the held loss); each trains until its held
# loss is clearly past its bound (the ratio reached: segment_mlm 0.767, segment_clm 0.634)
@pytest.mark.slow
@pytest.mark.parametrize("name,steps,ratio", [("segment_mlm", 75, 0.85), ("segment_clm", 100, 0.75)])
def test_segment_objective_learns_on_real_documents(name, steps, ratio, documents, specials, one_thread):
    torch.manual_seed(0)
    net = babelzoo.create_model("transformer_xl_tiny", vocab_size=specials.vocab_size, hidden_size=64,
                                intermediate_size=128, dropout=0.0, attention_dropout=0.0)
    objective = build_objective(name, specials, net.config, segment_length=32, mem_len=32, max_segments=4,
                                use_language_ids=False)
    held_batch = objective.prepare([documents[i] for i in torch.randperm(len(documents))[:16].tolist()])
    start = held_loss(net, objective, held_batch)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    for _ in range(steps):
        picks = torch.randint(len(documents), (8,)).tolist()
        loss = objective(net, objective.prepare([documents[i] for i in picks]))
        optimizer.zero_grad()
        loss.value.backward()
        optimizer.step()
    end = held_loss(net, objective, held_batch)
    print(f"{name}: held loss {start:.3f} -> {end:.3f}")
    assert end < ratio * start, f"{name}: held loss {start:.3f} -> {end:.3f} (needed < {ratio * start:.3f})"
