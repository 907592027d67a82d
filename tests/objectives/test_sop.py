"""NSP and SOP: segment contents agree with the labels; labels are balanced."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import NSP, SOP, ExampleError

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=128, languages={"en": 0, "de": 1})


def documents():
    """Document d's sentence k is the single token 10 + 10·d + k, so a token names its place."""
    return [[([10 + 10 * d + k], "en" if d % 2 == 0 else "de") for k in range(5)] for d in range(6)]


def segments(row: list[int]) -> tuple[list[int], list[int]]:
    first = row.index(2)
    second = row.index(2, first + 1)
    return row[1:first], row[first + 1: second]


def consecutive(ids: list[int]) -> bool:
    return all(b == a + 1 for a, b in zip(ids, ids[1:])) and len({i // 10 for i in ids}) == 1


@pytest.mark.parametrize("cls", [NSP, SOP])
def test_segments_match_labels(cls):
    objective = cls(S, babelzoo.model_config("mbert_tiny"))
    counts = []
    for seed in range(40):
        torch.manual_seed(seed)
        batch = objective.prepare(documents())
        for row, label, segs in zip(batch["input_ids"].tolist(), batch["labels"].tolist(),
                                    batch["segment_ids"].tolist()):
            a, b = segments(row)
            assert a and b
            n = len(a) + len(b) + 3
            assert segs[:n] == [0] * (len(a) + 2) + [1] * (len(b) + 1)
            if cls is SOP:
                assert consecutive(b + a) if label == 1 else consecutive(a + b)
            elif label == 0:
                assert consecutive(a + b)
            else:
                assert a[0] // 10 != b[0] // 10, "a random next segment comes from another document"
                assert consecutive(a) and consecutive(b)
            counts.append(label)
    assert abs(sum(counts) / len(counts) - 0.5) < 0.08


def test_language_ids_follow_each_segment():
    torch.manual_seed(3)
    batch = NSP(S, babelzoo.model_config("xlm_tiny")).prepare(documents())
    for row, langs in zip(batch["input_ids"].tolist(), batch["language_ids"].tolist()):
        for token, lang in zip(row, langs):
            if token >= 10:
                assert lang == (token - 10) // 10 % 2  # even documents are English, odd German


def test_documents_need_two_sentences_and_nsp_two_documents():
    config = babelzoo.model_config("mbert_tiny")
    with pytest.raises(ExampleError, match="example 1 has 1 sentence"):
        SOP(S, config).prepare([[[10], [11]], [[12]]])
    with pytest.raises(ExampleError, match="another document"):
        NSP(S, config).prepare([[[10], [11]]])


def test_loss_is_cross_entropy_of_the_classifier_on_the_pooled_vector():
    model = babelzoo.create_model("mbert_tiny", vocab_size=128).eval()
    sop = SOP(S, model.config)
    batch = sop.prepare(documents())
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"], segment_ids=batch["segment_ids"])
    expected = F.cross_entropy(sop.classifier(out.pooled), batch["labels"])
    assert torch.allclose(sop(model, batch).value, expected, atol=1e-6)
