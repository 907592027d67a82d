"""MLM conditioned on an image or speech: masking of the caption only, the loss equals a
cross-entropy computed by hand from the fused states, and the image changes the prediction."""

import pytest
import torch
import torch.nn.functional as F
from fusion_models import fusion_models

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.mlm_conditioned import ConditionedMLM

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=8000)


def examples(model, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        e = {"input_ids": torch.randint(5, 8000, (6 + 2 * i,), generator=g).tolist(), "lang": "en",
             "group": str(i), "source": f"{i}"}
        if model.modality == "vision":
            e["pixel_values"] = torch.randn(3, 64, 64, generator=g)
        else:
            e["audio_features"] = torch.randn(60 + 10 * i, 80, generator=g)
        out.append(e)
    return out


def test_prepare_masks_only_caption_tokens():
    model = babelzoo.create_model("vl_fusion_tiny")
    mlm = ConditionedMLM(SPECIALS, masking={"probability": 0.5})
    torch.manual_seed(0)
    batch = mlm.prepare(examples(model, n=8))
    labelled = batch["labels"] != -100
    assert int(labelled.sum()) > 0
    original = torch.where(labelled, batch["labels"], batch["input_ids"])
    assert not bool(labelled[original < 5].any())  # never [CLS], [SEP], padding
    assert bool((batch["input_ids"][labelled] == SPECIALS.mask).any())
    assert batch["pixel_values"].shape == (8, 3, 64, 64)


@pytest.mark.parametrize("name", fusion_models(joint=True))
def test_loss_is_the_cross_entropy_of_the_fused_states(name):
    model = babelzoo.create_model(name).eval()
    mlm = ConditionedMLM(SPECIALS)
    torch.manual_seed(0)
    batch = mlm.prepare(examples(model))
    out = mlm(model, batch)
    other = ({"pixel_values": batch["pixel_values"]} if "pixel_values" in batch
             else {"audio_features": batch["audio_features"], "audio_mask": batch["audio_mask"]})
    with torch.no_grad():
        hidden = model(batch["input_ids"], batch["attention_mask"], **other).last_hidden
        positions = batch["labels"] != -100
        expected = F.cross_entropy(model.mlm_logits(hidden)[positions], batch["labels"][positions])
        # the prediction depends on the image/speech: another one gives another loss
        shuffled = {k: v.flip(0) for k, v in other.items()}
        hidden2 = model(batch["input_ids"], batch["attention_mask"], **shuffled).last_hidden
        other_loss = F.cross_entropy(model.mlm_logits(hidden2)[positions], batch["labels"][positions])
    assert float(out.value.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert abs(float(other_loss) - float(expected)) > 1e-6
    out.value.backward()


def test_dual_encoders_are_refused():
    model = babelzoo.create_model("speech_dual_tiny")
    mlm = ConditionedMLM(SPECIALS)
    with pytest.raises(ValueError, match="conditioned MLM needs a joint encoder"):
        mlm(model, mlm.prepare(examples(model)))
