"""Skip-thoughts: neighbour triples of hand-built documents (edges exactly), the conditional GRU
against the paper's equations step by step, the tied vocabulary projection, and the loss by
hand; learning on real text is in tests/objectives/test_objectives_learn.py."""

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import ConditionalGRU, ExampleError, build_objective, neighbour_triples

I = -100
SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=60, languages={"en": 0, "de": 1})
# Sentence k of document d is [10d + k, 10d + k] (document 2's sentence 0 is one token longer).
A = [[10, 10], [11, 11], [12, 12]]
B = [[20, 20], [21, 21]]
C = [[30, 30, 39], [31, 31], [32, 32], [33, 33]]


def test_neighbour_triples_are_the_sentences_with_both_neighbours():
    assert neighbour_triples([3, 1, 2, 4, 0]) == [(0, 1), (3, 1), (3, 2)]
    assert neighbour_triples([2, 2]) == []


def test_prepare_builds_exact_triples_and_decoder_rows():
    objective = build_objective("skip_thoughts", SPECIALS, babelzoo.create_model("bigru_tiny", vocab_size=60).config)
    batch = objective.prepare([A, B, C])
    # encoded: A1, C1, C2 (B has no middle sentence; document edges are never encoded)
    assert batch["input_ids"].tolist() == [[1, 11, 11, 2], [1, 31, 31, 2], [1, 32, 32, 2]]
    # next: A2, C2, C3; previous: A0, C0, C1; inputs start at [CLS], targets end at [SEP]
    assert batch["next_inputs"].tolist() == [[1, 12, 12], [1, 32, 32], [1, 33, 33]]
    assert batch["next_labels"].tolist() == [[12, 12, 2], [32, 32, 2], [33, 33, 2]]
    assert batch["previous_inputs"].tolist() == [[1, 10, 10, 0], [1, 30, 30, 39], [1, 31, 31, 0]]
    assert batch["previous_labels"].tolist() == [[10, 10, 2, I], [30, 30, 39, 2], [31, 31, 2, I]]
    with pytest.raises(ExampleError, match=r"at least three sentences; sizes: \[2, 2\]"):
        objective.prepare([B, B])


def test_conditional_gru_follows_the_paper_equations():
    torch.manual_seed(0)
    gru = ConditionalGRU(input_size=3, hidden_size=4, condition_size=5)
    x, c = torch.randn(2, 3, 3), torch.randn(2, 5)
    W, b = gru.input.weight, gru.input.bias
    Cw, U = gru.condition.weight, gru.gates.weight
    Wr, Wz, Wh = W.chunk(3)
    br, bz, bh = b.chunk(3)
    Cr, Cz, Ch = Cw.chunk(3)
    Ur, Uz = U.chunk(2)
    Uh = gru.candidate.weight
    h = torch.zeros(2, 4)
    expected = []
    for t in range(3):
        r = torch.sigmoid(x[:, t] @ Wr.T + br + h @ Ur.T + c @ Cr.T)
        z = torch.sigmoid(x[:, t] @ Wz.T + bz + h @ Uz.T + c @ Cz.T)
        candidate = torch.tanh(x[:, t] @ Wh.T + bh + (r * h) @ Uh.T + c @ Ch.T)  # U (r ⊙ h), as the paper
        h = (1 - z) * h + z * candidate
        expected.append(h)
    torch.testing.assert_close(gru(x, c), torch.stack(expected, 1))
    # the condition reaches every step: changing it changes the first and the last state
    other = gru(x, c + 1.0)
    assert not torch.allclose(other[:, 0], gru(x, c)[:, 0]) and not torch.allclose(other[:, -1], gru(x, c)[:, -1])


def test_loss_is_the_two_decoders_summed_log_likelihood_through_the_tied_embeddings():
    torch.manual_seed(0)
    model = babelzoo.create_model("bigru_tiny", vocab_size=60, dropout=0.0).eval()
    objective = build_objective("skip_thoughts", SPECIALS, model.config).eval()
    width, vocab = model.config.text.embedding_dim, model.config.text.vocab_size
    for decoder in objective.decoders.values():  # as wide as the embeddings; no vocabulary matrix of its own
        assert decoder.hidden_size == width and decoder.condition.in_features == model.config.text.hidden_size
    assert all(vocab not in p.shape for p in objective.parameters())
    batch = objective.prepare([A, B, C])
    loss = objective(model, batch)
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    half = model.config.text.hidden_size // 2
    last = batch["attention_mask"].sum(1) - 1
    h = torch.cat([out.last_hidden[torch.arange(3), last, :half], out.last_hidden[:, 0, half:]], -1)
    E = model.embeddings.word.weight
    total = 0.0
    for side in ("next", "previous"):
        states = objective.decoders[side](E[batch[f"{side}_inputs"]], h)
        logits = states @ E.T  # [N, T, V]
        labels = batch[f"{side}_labels"]
        total = total + F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), reduction="sum")
    torch.testing.assert_close(loss.value, total / 3)
    loss.value.backward()
    assert model.embeddings.word.weight.grad[[12, 32, 33, 10, 30, 39, 31]].abs().sum(1).gt(0).all()
    assert loss.metrics["accuracy"].shape == () and 0 <= float(loss.metrics["accuracy"]) <= 1
