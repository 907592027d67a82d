"""ITM: hard negatives drawn from contrastive similarities are never positives and follow the
softmax; the objective builds B positive and 2B negative pairs; dual encoders are refused."""

import math

import pytest
import torch
from fusion_models import fusion_models

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.itm import ITM, sample_hard_negatives

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=8000)


def test_negatives_are_never_positives():
    groups = torch.tensor([0, 0, 1, 1, 2, 3, 3, 4])
    positive = (groups[:, None] == groups[None, :]).repeat(1000, 1)  # 1000 batches of 8 rows
    g = torch.Generator().manual_seed(0)
    # similarities that favour the positives strongly: the sampler must still avoid them
    sim = torch.randn(8000, 8, generator=g) + 20.0 * positive
    picks = sample_hard_negatives(sim, positive, generator=g)
    assert not bool(positive[torch.arange(8000), picks].any())
    assert set(picks.tolist()) == set(range(8))  # every column is a negative of some row


def test_the_hardest_negative_is_drawn_beside_stronger_positives():
    # Row i's positives (its group) score 25, one chosen negative 20, the rest 0. Softmax over the
    # whole row, +1e-5, positives removed: the chosen one is drawn with probability
    # (e^20/Z + 1e-5) / (e^20/Z + 1e-5 + k·(1/Z + 1e-5)) for k other negatives, Z = n·e^25 + e^20 + k.
    groups = torch.tensor([0, 0, 1, 1, 2, 3, 3, 4])
    positive = groups[:, None] == groups[None, :]
    hard = torch.tensor([2, 4, 7, 0, 1, 0, 2, 6])  # a negative of each row
    sim = 25.0 * positive + 20.0 * torch.nn.functional.one_hot(hard, 8)
    repeats = 4000
    picks = sample_hard_negatives(sim.repeat(repeats, 1), positive.repeat(repeats, 1),
                                  generator=torch.Generator().manual_seed(0)).view(repeats, 8)
    n, k = positive.sum(1).double(), 8 - positive.sum(1).double() - 1
    z = n * math.exp(25) + math.exp(20) + k
    expected = (math.exp(20) / z + 1e-5) / (math.exp(20) / z + 1e-5 + k * (1 / z + 1e-5))
    assert expected.min() > 0.98  # by hand: ≈ 0.99 (one positive) and 0.98 (two)
    torch.testing.assert_close((picks == hard).double().mean(0), expected, atol=0.01, rtol=0)


def test_rows_without_any_negative_get_minus_one():
    positive = torch.tensor([[True, True], [True, True]])
    assert sample_hard_negatives(torch.zeros(2, 2), positive).tolist() == [-1, -1]


def test_negatives_follow_the_softmax_of_similarity():
    sim = torch.tensor([[5.0, 2.0, 1.0, 0.0]])
    positive = torch.tensor([[True, False, False, False]])
    g = torch.Generator().manual_seed(0)
    picks = sample_hard_negatives(sim.repeat(20000, 1), positive.repeat(20000, 1), generator=g)
    freq = torch.bincount(picks, minlength=4).float() / len(picks)
    expected = torch.softmax(torch.tensor([2.0, 1.0, 0.0]), dim=0)  # renormalised over the negatives
    assert float(freq[0]) == 0.0
    torch.testing.assert_close(freq[1:], expected, atol=0.015, rtol=0)


def examples(groups, size=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(5, 8000, (4,), generator=g).tolist(), "lang": "en", "group": grp,
             "source": f"{i}.png", "pixel_values": torch.randn(3, size, size, generator=g)}
            for i, grp in enumerate(groups)]


@pytest.mark.parametrize("name", fusion_models(joint=True, vision=True))
def test_objective_scores_positive_and_negative_pairs(name):
    model = babelzoo.create_model(name)
    itm = ITM(SPECIALS, model.config)
    out = itm(model, itm.prepare(examples(["a", "b", "c", "d"])))
    assert out.metrics["itm_negatives"] == 8.0  # a negative image per text and a negative text per image
    assert 0.3 < float(out.value.detach()) < 1.5  # about ln 2 for an untrained head
    out.value.backward()
    assert itm.head.weight.grad is not None and model.frontend.proj.weight.grad is not None


def test_a_batch_of_one_group_has_no_negatives():
    model = babelzoo.create_model("vl_albef_tiny")
    itm = ITM(SPECIALS, model.config)
    out = itm(model, itm.prepare(examples(["same", "same", "same"])))
    assert out.metrics["itm_negatives"] == 0.0


def test_built_by_name_like_every_objective():
    import babelzoo.objectives.mlm_conditioned  # noqa: F401  (registers it)
    from babelzoo.objectives.mixture import build_objective

    config = babelzoo.model_config("vl_albef_tiny")
    itm = build_objective("itm", SPECIALS, config, spec_augment={"freq_masks": 1})
    assert itm.head.in_features == 128 and itm.spec_augment.freq_masks == 1
    assert build_objective("itc", SPECIALS).name == "itc"
    assert build_objective("mlm_conditioned", SPECIALS, masking={"probability": 0.2}).masker.config.probability == 0.2


def test_dual_encoders_are_refused():
    model = babelzoo.create_model("vl_dual_tiny")
    itm = ITM(SPECIALS, model.config)
    with pytest.raises(ValueError, match="ITM needs a joint encoder"):
        itm(model, itm.prepare(examples(["a", "b"])))


def test_the_objective_never_pairs_a_text_with_an_image_of_its_own_group():
    model = babelzoo.create_model("vl_albef_tiny")
    itm = ITM(SPECIALS, model.config)
    groups = ["a", "a", "b", "b", "c", "d"]
    batch = itm.prepare(examples(groups))
    calls = []
    hook = model.register_forward_hook(lambda m, args, kwargs, out: calls.append(kwargs), with_kwargs=True)
    torch.manual_seed(0)
    for _ in range(20):  # 20 draws of negatives
        itm(model, batch)
    hook.remove()
    fused = [c for c in calls if not c.get("unimodal")]
    assert len(fused) == 20
    text_group = {tuple(row.tolist()): g for row, g in zip(batch["input_ids"], groups)}
    image_group = {float(img.sum()): g for img, g in zip(batch["pixel_values"], groups)}
    for call in fused:
        pairs = [(text_group[tuple(t.tolist())], image_group[float(i.sum())])
                 for t, i in zip(call["input_ids"], call["pixel_values"])]
        assert pairs[:6] == list(zip(groups, groups))  # the B positive pairs first
        assert len(pairs) == 18 and all(t != i for t, i in pairs[6:])  # then 2B negatives, none positive


def test_speech_text_matching_with_padded_utterances():
    model = babelzoo.create_model("speech_text_tiny")
    itm = ITM(SPECIALS, model.config, spec_augment={"time_width": 10})
    g = torch.Generator().manual_seed(0)
    speech = [{"input_ids": torch.randint(5, 8000, (5,), generator=g).tolist(), "lang": "en", "group": grp,
               "source": f"{i}.wav", "audio_features": torch.randn(40 + 10 * i, 80, generator=g)}
              for i, grp in enumerate(["a", "b", "b", "c"])]
    batch = itm.prepare(speech)
    assert batch["audio_mask"].sum(dim=1).tolist() == [40, 50, 60, 70]
    out = itm(model, batch)
    assert out.metrics["itm_negatives"] == 8.0 and torch.isfinite(out.value)
    out.value.backward()
    assert itm.head.weight.grad is not None and model.frontend.convs[0].weight.grad is not None
