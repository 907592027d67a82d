"""A Trainer's changes to the process hold for its run only: glibc's malloc options
(``keep_cpu_buffers``) are set only when the config turns them on, and the caller's random
generators go on after the run as if it had not drawn from them."""

import contextlib
import random

import numpy as np
import pytest
import torch

import babelzoo.train.trainer as trainer_module
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig
from babelzoo.train.trainer import Trainer
from tiny_objectives import FixedMaskMLM, corpus, one_thread, tiny_model  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("asked", [False, True])
def test_malloc_options_change_only_when_asked(tmp_path, monkeypatch, asked):
    calls = []
    @contextlib.contextmanager
    def kept():
        calls.append("set")
        yield True
        calls.append("restored")

    monkeypatch.setattr(trainer_module, "cpu_buffers_kept", kept)
    changes = {"keep_cpu_buffers": True} if asked else {}
    config = TrainConfig(output_dir=str(tmp_path), max_steps=2, batch_size=8, checkpoints=CheckpointConfig(every=2),
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), **changes)
    Trainer(tiny_model(), FixedMaskMLM(), corpus(16), config).fit()
    assert calls == (["set", "restored"] if asked else [])
    assert TrainConfig().keep_cpu_buffers is False


def draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_the_callers_random_sequence_goes_on_as_if_no_run_happened(tmp_path):
    config = TrainConfig(output_dir=str(tmp_path), max_steps=2, batch_size=8,
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False),
                         checkpoints=CheckpointConfig(every=2), seed=5)
    model = tiny_model()
    for seed in (0, 1):
        random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
        want = draws()
        random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
        Trainer(model, FixedMaskMLM(), corpus(16), config.replace(output_dir=str(tmp_path / str(seed)))).fit()
        assert draws() == want
