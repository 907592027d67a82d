"""Mistakes found when a run or an encoder is built, not many steps later."""

import numpy as np
import pytest
import torch

from babelzoo.datasets.specials import SpecialIds
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.objectives.mixture import Mixture
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import LoggingConfig
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.factory import create_model

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=64)


def tiny(max_positions: int = 32):
    torch.manual_seed(0)
    return create_model("xlmr_tiny", vocab_size=64, num_layers=1, max_positions=max_positions)


def test_objective_longer_than_the_model_is_refused_when_the_trainer_is_built(tmp_path):
    model = tiny(32)
    mixture = Mixture.from_spec({"mlm": {"max_length": 32}, "tlm": {"max_length": 48}}, SPECIALS, model.config)
    cfg = TrainConfig(output_dir=str(tmp_path), max_steps=1, device="cpu",
                      logging=LoggingConfig(progress=False, tensorboard=False))
    with pytest.raises(ConfigError, match=r"objectives\.tlm\.max_length=48 is longer than the model's "
                                          r"max_positions=32"):
        Trainer(model, mixture, [], cfg)
    fits = Mixture.from_spec({"mlm": {"max_length": 32}}, SPECIALS, model.config)
    Trainer(model, fits, [], cfg)  # at the limit: accepted


class Characters:
    """A tokenizer with one id per character (ids 5..63), enough to make long rows."""

    specials = SPECIALS

    def batch_encode(self, texts, max_length, padding, truncation, return_tensors):
        rows = [[SPECIALS.cls, *[5 + ord(c) % 59 for c in t][: max_length - 2], SPECIALS.sep] for t in texts]
        return {"input_ids": rows}


def test_encoder_length_is_clamped_to_the_model_positions():
    model = tiny(16)
    encoder = BabelEncoder("tiny", model, Characters(), max_length=512)
    assert encoder.max_length == 16 and encoder.protocol["max_length"] == 16
    long, prefix = "x" * 400, "x" * 14  # the long sentence is truncated to the same 16 tokens
    vectors = encoder.encode([long, prefix])
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)
