"""CLPC: pair layout, labels, and negatives that are never a translation (random and hard)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import CLPC, HardNegatives, Pair, RandomNegatives
from babelzoo.objectives.batching import pair_rows
from babelzoo.objectives.clpc import forbidden_matrix

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})


def test_pair_rows_layout():
    src = torch.tensor([[10, 11, 0], [12, 13, 14]])
    tgt = torch.tensor([[20, 0], [21, 22]])
    rows = pair_rows(src, torch.tensor([2, 3]), tgt, torch.tensor([1, 2]), torch.tensor([0, 1, 0]),
                     torch.tensor([0, 1, 1]), S)
    assert rows["input_ids"].tolist() == [[1, 10, 11, 2, 20, 2, 0, 0],
                                          [1, 12, 13, 14, 2, 21, 22, 2],
                                          [1, 10, 11, 2, 21, 22, 2, 0]]
    assert rows["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 0, 0],
                                            [0, 0, 0, 0, 0, 1, 1, 1],
                                            [0, 0, 0, 0, 1, 1, 1, 0]]
    assert rows["attention_mask"].sum(1).tolist() == [6, 8, 7]


def test_forbidden_covers_duplicates():
    # Pairs 0 and 2 share a target; pairs 1 and 3 share a source: both are true translations.
    srcs = [[10], [11], [12], [11]]
    tgts = [[20], [21], [20], [22]]
    forbidden = forbidden_matrix(srcs, tgts)
    assert forbidden.tolist() == [[True, False, True, False],
                                  [False, True, False, True],
                                  [True, False, True, False],
                                  [False, True, False, True]]


def duplicated_batch():
    pairs = [Pair([10 + i], [30 + i], "en", "de") for i in range(6)]
    pairs += [Pair([10], [40], "en", "de"), Pair([41], [31], "en", "de")]  # same source as 0 / target as 1
    return pairs


def check_negatives(batch, negatives):
    src, tgt = batch["src_ids"], batch["tgt_ids"]
    for i, row in enumerate(negatives.tolist()):
        for j in row:
            assert j != i
            assert not torch.equal(tgt[j], tgt[i]) and not torch.equal(src[j], src[i])
            assert not bool(batch["forbidden"][i, j])


def test_random_miner_never_returns_a_translation():
    clpc = CLPC(S, babelzoo.model_config("xlm_tiny"), negatives=3)
    for seed in range(200):
        torch.manual_seed(seed)
        batch = clpc.prepare(duplicated_batch())
        check_negatives(batch, batch["negatives"])
        assert batch["negatives"].shape == (8, 3)
        assert all(len(set(r)) == 3 for r in batch["negatives"].tolist())


def test_random_miner_errors_when_no_negative_exists():
    with pytest.raises(ValueError, match="non-translation"):
        RandomNegatives().mine(forbidden_matrix([[1], [1]], [[2], [3]]), 1)


def test_hard_miner_returns_nearest_non_translation(parallel, specials, tiny):
    pytest.importorskip("faiss")
    model = tiny("xlm_tiny")
    clpc = CLPC(specials, model.config, miner="hard", negatives=2)
    examples = parallel[:24] + [Pair(parallel[0].src, parallel[5].tgt, "en", parallel[5].tgt_lang)]
    batch = clpc.prepare(examples)
    assert "negatives" not in batch  # hard negatives need the current model
    negatives = clpc.mine(model, batch)
    check_negatives(batch, negatives)
    # Parity with a brute-force cosine search.
    queries, keys = clpc.sentence_embeddings(model, batch)
    cos = F.normalize(queries, dim=-1) @ F.normalize(keys, dim=-1).T
    cos = cos.masked_fill(batch["forbidden"], -2.0)
    expected = cos.topk(2, dim=1).indices
    assert torch.equal(negatives, expected)
    # A classifier that calls every pair a translation: right on the 25 positives, wrong on the
    # 2 × 25 negatives; and one that calls none a translation: the other way round.
    with torch.no_grad():
        clpc.classifier.weight.zero_()
        clpc.classifier.bias.copy_(torch.tensor([0.0, 1.0]))
    loss = clpc(model, batch)
    assert float(loss.metrics["accuracy"]) == pytest.approx(1 / 3)
    expected = (math.log1p(math.exp(-1)) + 2 * math.log1p(math.exp(1))) / 3  # mean cross-entropy of logits (0, 1)
    assert float(loss.value.detach()) == pytest.approx(expected, rel=1e-5) and loss.value.requires_grad
    with torch.no_grad():
        clpc.classifier.bias.copy_(torch.tensor([1.0, 0.0]))
    assert float(clpc(model, batch).metrics["accuracy"]) == pytest.approx(2 / 3)


def test_clpc_labels_and_classifier_input():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    clpc = CLPC(S, model.config)
    torch.manual_seed(0)
    batch = clpc.prepare([Pair([10, 11], [20], "en", "de"), Pair([12], [21, 22], "en", "de")])
    assert batch["negatives"].tolist() == [[1], [0]]
    loss = clpc(model, batch)
    rows = pair_rows(batch["src_ids"], batch["src_lengths"], batch["tgt_ids"], batch["tgt_lengths"],
                     torch.tensor([0, 1, 0, 1]), torch.tensor([0, 1, 1, 0]), S)
    language_ids = torch.where(rows["first"], 0, 1) * rows["attention_mask"]
    out = model(rows["input_ids"], attention_mask=rows["attention_mask"], language_ids=language_ids)
    logits = clpc.classifier(out.pooled)
    labels = torch.tensor([1, 1, 0, 0])  # positives first, then negatives
    expected = F.cross_entropy(logits, labels)
    assert torch.allclose(loss.value, expected, atol=1e-6)
    assert float(loss.metrics["accuracy"]) == float((logits.argmax(-1) == labels).float().mean())
    assert HardNegatives().pooling is None and HardNegatives("max").pooling == "max"  # None: mean, or the model's own
