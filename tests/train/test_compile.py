"""TrainConfig.compile: the model's forward goes through torch.compile from the second step on,
with the same losses and weights as eager training and the same checkpoint keys; the caller's
module is wrapped, never compiled in place."""

import json

import pytest
import torch
from safetensors.torch import load_file

from babelzoo.train.config import TrainConfig

from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.trainer import Trainer
from tiny_objectives import FIRST, FixedMaskMLM, one_thread, tiny_model  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def fit(output_dir, compile: bool):
    # Rows of one length: one compiled graph, no recompilation for new shapes.
    data = [[FIRST + (3 * i + 5 * j) % 60 for j in range(12)] for i in range(32)]
    config = TrainConfig(output_dir=str(output_dir), max_steps=4, batch_size=8,
                         optim=OptimConfig(lr=3e-3, optimizer="adamw"), checkpoints=CheckpointConfig(every=4),
                         logging=LoggingConfig(progress=False, tensorboard=False, peak_flops=1e10), compile=compile)
    model = tiny_model(dropout=0.0)
    trainer = Trainer(model, FixedMaskMLM(), data, config)
    summary = trainer.fit()
    losses = [json.loads(line)["loss"] for line in (output_dir / "metrics.jsonl").read_text().splitlines()]
    return model, summary, losses, trainer


def test_compiled_training_matches_eager_training(tmp_path):
    eager_model, eager, eager_losses, eager_trainer = fit(tmp_path / "eager", compile=False)
    model, compiled, losses, trainer = fit(tmp_path / "compiled", compile=True)
    runner, eager_runner = trainer.module._runner[0], eager_trainer.module._runner[0]
    assert isinstance(runner, torch._dynamo.eval_frame.OptimizedModule) and runner._orig_mod is model
    assert eager_runner is eager_model
    assert model._compiled_call_impl is None  # the caller's module is wrapped, not changed
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert losses[-1] < losses[0]
    assert compiled["flops_per_token"] == eager["flops_per_token"]  # counted on the eager first step
    a = load_file(tmp_path / "eager" / "checkpoints" / "step-00000004" / "model.safetensors")
    b = load_file(tmp_path / "compiled" / "checkpoints" / "step-00000004" / "model.safetensors")
    assert list(a) == list(b) and not any("_orig_mod" in key for key in b)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5)
