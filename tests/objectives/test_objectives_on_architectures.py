"""Every encoder objective runs on every text architecture of the zoo (its layout decides which of
positions, segments and language ids reach the model), and bad examples fail loudly."""

from __future__ import annotations

import math

import pytest
import torch
from test_objective_gradients import OWN_MODEL

import babelzoo
from babelzoo.objectives import OBJECTIVES, ExampleError, build_objective

# the objectives that the toy batches check on a plain encoder (OWN_MODEL names the others and
# their tests), on every encoder of the zoo (an encoder–decoder takes other objectives)
ENCODER_OBJECTIVES = sorted(set(OBJECTIVES) - set(OWN_MODEL))
TEXT_MODELS = [name for name in babelzoo.list_models("*_tiny") if babelzoo.model_config(name).fusion is None
               and not babelzoo.model_config(name).text.is_encoder_decoder]


@pytest.mark.parametrize("arch", TEXT_MODELS)
def test_every_objective_on_every_text_model(arch, toy):
    specials, examples = toy
    overrides = {"pad_token_id": 0} if arch == "xlmr_tiny" else {}
    model = babelzoo.create_model(arch, vocab_size=64, **overrides)
    for name in ENCODER_OBJECTIVES:
        torch.manual_seed(0)
        objective = build_objective(name, specials, model.config)
        batch = objective.prepare(examples[objective.consumes])
        if name in ("clm", "unilm", "glm", "segment_clm") and model.config.text.family == "rnn":
            with pytest.raises(ValueError, match="causal"):
                objective(model, batch)
            continue
        loss = objective(model, batch)
        loss.value.backward()
        assert math.isfinite(float(loss.value.detach())), (arch, name)
        assert 0.0 <= loss.metrics["accuracy"] <= 1.0 and loss.tokens > 0


@pytest.mark.parametrize("name,bad,message", [
    ("tlm", [([1, 2], "en")], "target: expected a sequence of integer token ids"),
    ("tlm", [([10], [11.5])], "integer token ids"),
    ("clwr", [([10], [], "en", "de")], "empty target"),
    ("mlm", [("hello", "en")], "token ids"),
    ("mlm", [([10], 3)], "language must be a code"),
    ("sop", [[10, 11]], "document"),
    ("clmlm", [[]], "empty document"),
    ("xlco", [], "empty batch"),
])
def test_bad_examples_are_reported(name, bad, message, toy):
    objective = build_objective(name, toy[0], babelzoo.model_config("xlm_tiny", vocab_size=64))
    with pytest.raises(ExampleError, match=message):
        objective.prepare(bad)


def test_token_ids_may_be_arrays_or_tensors(toy):
    import numpy as np

    objective = build_objective("mlm", toy[0])
    a = objective.prepare([np.array([10, 11, 12]), torch.tensor([13, 14])])
    assert a["attention_mask"].sum(1).tolist() == [5, 4]
