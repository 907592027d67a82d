"""Fine-tuning objectives: first-sub-word label alignment on hand-made inputs, and the two
losses against cross-entropy written out by hand."""

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import Labelled, SequenceClassification, Tagged, TokenClassification, align_first_subword
from babelzoo.objectives.examples import ExampleError

S = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=99)
X = -100


def test_label_sits_on_each_words_first_subword():
    ids, labels, cut = align_first_subword([[10, 11, 12], [20], [30, 31]], [7, 8, 9], S, max_length=16)
    assert ids == [0, 10, 11, 12, 20, 30, 31, 2]
    assert labels == [X, 7, X, X, 8, 9, X, X]
    assert cut == 0


def test_a_word_without_subwords_keeps_its_label_on_unk():
    ids, labels, _ = align_first_subword([[10], [], [20]], [1, 2, 3], S, max_length=16)
    assert ids == [0, 10, 3, 20, 2] and labels == [X, 1, 2, 3, X]


def test_words_that_do_not_fit_are_cut_whole_and_counted():
    ids, labels, cut = align_first_subword([[10, 11], [20, 21], [30]], [1, 2, 3], S, max_length=5)
    assert ids == [0, 10, 11, 2] and labels == [X, 1, X, X] and cut == 2


def test_word_and_label_counts_must_agree():
    with pytest.raises(ExampleError, match="2 words but 1 labels"):
        align_first_subword([[10], [11]], [1], S, 16)


def model(kind, labels=("a", "b", "c")):
    return babelzoo.create_model("xlmr_tiny", num_layers=2, hidden_size=32, num_heads=4, intermediate_size=64,
                                 vocab_size=99, head={"kind": kind, "labels": labels, "pooling": "mean"}).eval()


def test_sequence_loss_is_cross_entropy_of_the_head():
    m = model("sequence_classification")
    objective = SequenceClassification(S)
    examples = [Labelled([0, 10, 11, 2], [0, 0, 0, 0], 2), Labelled([0, 12, 2], [0, 0, 0], 0)]
    batch = objective.prepare(examples)
    assert batch["input_ids"].tolist() == [[0, 10, 11, 2], [0, 12, 2, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    loss = objective(m, batch)
    logits = torch.cat([m.head_logits(torch.tensor([[0, 10, 11, 2]])), m.head_logits(torch.tensor([[0, 12, 2]]))])
    expected = -(logits.log_softmax(-1)[0, 2] + logits.log_softmax(-1)[1, 0]) / 2
    torch.testing.assert_close(loss.value, expected, rtol=0, atol=1e-5)
    assert loss.tokens == 7
    assert float(loss.metrics["accuracy"]) == float((logits.argmax(-1) == torch.tensor([2, 0])).float().mean())


def test_token_loss_reads_first_subwords_only():
    m = model("token_classification")
    objective = TokenClassification(S, max_length=16)
    examples = [Tagged([[10, 11], [12]], [1, 2]), Tagged([[13], [14, 15, 16]], [0, 1])]
    batch = objective.prepare(examples)
    assert batch["labels"].tolist() == [[X, 1, X, 2, X, X], [X, 0, 1, X, X, X]]
    loss = objective(m, batch)
    full = m.head_logits(batch["input_ids"], attention_mask=batch["attention_mask"])
    keep = batch["labels"].ne(X)
    expected = F.cross_entropy(full[keep], batch["labels"][keep])
    torch.testing.assert_close(loss.value, expected, rtol=0, atol=1e-5)
    assert int(batch["truncated_words"]) == 0


def test_label_out_of_the_heads_range_is_an_error():
    m = model("sequence_classification", labels=("a", "b"))
    objective = SequenceClassification(S)
    with pytest.raises(ValueError, match="out of range for the head's 2 labels"):
        objective(m, objective.prepare([Labelled([0, 10, 2], [0, 0, 0], 5)]))


def test_sequence_example_longer_than_max_length_is_an_error():
    with pytest.raises(ExampleError, match="example 0 has 5 ids"):
        SequenceClassification(S, max_length=4).prepare([Labelled([0, 1, 2, 3, 4], [0] * 5, 0)])
