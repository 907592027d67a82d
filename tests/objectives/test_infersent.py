"""InferSent's pair classifier: the features by hand, in-batch mismatched pairs, the loss through
max-pooled BiLSTM vectors; learning on real text is in tests/objectives/test_objectives_learn.py."""

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import ExampleError, Pair, build_objective, pair_features

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=60, languages={"en": 0, "de": 1})


def test_pair_features_by_hand():
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    assert pair_features(u, v).tolist() == [[1.0, -2.0, 3.0, 4.0, 2.0, 6.0, 3.0, -8.0]]


def test_mismatched_pairs_come_from_other_pairs():
    model = babelzoo.create_model("infersent_tiny", vocab_size=60)
    objective = build_objective("infersent", SPECIALS, model.config)
    pairs = [Pair([10 + i], [30 + i], "en", "de") for i in range(5)]
    for seed in range(20):
        torch.manual_seed(seed)
        batch = objective.prepare(pairs)
        assert (batch["mismatch"] != torch.arange(5)).all()
        assert batch["labels"].tolist() == [1] * 5 + [0] * 5
    # a drawn target equal to the true one is a translation, not a mismatch
    batch = objective.prepare([Pair([10], [30]), Pair([11], [30])])
    assert batch["labels"].tolist() == [1, 1, 1, 1]
    with pytest.raises(ExampleError, match="this batch has one pair"):
        objective.prepare(pairs[:1])


def test_loss_classifies_max_pooled_features():
    torch.manual_seed(0)
    model = babelzoo.create_model("infersent_tiny", vocab_size=60, dropout=0.0).eval()
    objective = build_objective("infersent", SPECIALS, model.config, hidden_size=16)
    pairs = [Pair([10, 11, 12], [30, 31], "en", "de"), Pair([13], [32, 33, 34], "en", "de"),
             Pair([14, 15], [35], "en", "de")]
    batch = objective.prepare(pairs)
    loss = objective(model, batch)
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    lengths = batch["attention_mask"].sum(1)
    vectors = torch.stack([out.last_hidden[b, : lengths[b]].max(0).values for b in range(6)])
    u, v = vectors[:3], vectors[3:]
    m = batch["mismatch"]
    feats = torch.cat([torch.cat([u, v, (u - v).abs(), u * v], -1), torch.cat([u, v[m], (u - v[m]).abs(), u * v[m]], -1)])
    first, _, second = objective.classifier
    logits = second(torch.tanh(first(feats)))
    torch.testing.assert_close(loss.value, F.cross_entropy(logits, torch.tensor([1, 1, 1, 0, 0, 0])))
    assert objective.classifier[0].in_features == 4 * model.config.text.hidden_size
