"""A Trainer leaves the process's allocator alone unless asked: glibc's malloc options
(``keep_cpu_buffers``) are set only when the config turns them on."""

import pytest

import babelzoo.train.trainer as trainer_module
from babelzoo.train.config import TrainConfig
from babelzoo.train.trainer import Trainer
from tiny_objectives import FixedMaskMLM, corpus, one_thread, tiny_model  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("asked", [False, True])
def test_malloc_options_change_only_when_asked(tmp_path, monkeypatch, asked):
    calls = []
    monkeypatch.setattr(trainer_module, "keep_cpu_buffers", lambda: calls.append("mallopt") or True)
    changes = {"keep_cpu_buffers": True} if asked else {}
    config = TrainConfig(output_dir=str(tmp_path), max_steps=2, batch_size=8, progress=False, tensorboard=False,
                         measure_mfu=False, checkpoint_every=2, **changes)
    Trainer(tiny_model(), FixedMaskMLM(), corpus(16), config).fit()
    assert calls == (["mallopt"] if asked else [])
    assert TrainConfig().keep_cpu_buffers is False
