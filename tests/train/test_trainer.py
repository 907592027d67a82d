"""The trainer's loop and outputs: a dict of datasets feeds a mixture-style objective, per-objective
metrics, tokens/s and MFU reach the JSONL log and the summary, the progress display and the
final summary are printed."""

import json

import pytest
import torch

from babelzoo.objectives.base import Loss, Objective
from babelzoo.train.config import TrainConfig
from babelzoo.train.trainer import Trainer
from tiny_objectives import FixedMaskMLM, RandomMaskMLM, corpus, one_thread, tiny_model  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


class TwoTasks(Objective):
    """Sum of two objectives, each on its own dataset."""

    name = "two_tasks"

    def __init__(self):
        super().__init__()
        self.parts = torch.nn.ModuleDict({"dynamic": RandomMaskMLM(), "fixed": FixedMaskMLM()})

    def prepare(self, examples):
        return {name: self.parts[name].prepare(examples[name]) for name in self.parts}

    def forward(self, model, batch):
        losses = {name: self.parts[name](model, batch[name]) for name in self.parts}
        metrics = {k: v for loss in losses.values() for k, v in loss.metrics.items()}
        return Loss(sum(loss.value for loss in losses.values()), metrics, sum(loss.tokens for loss in losses.values()))


def test_dict_of_datasets_trains_a_mixture_and_logs_everything(tmp_path, capsys):
    data = {"dynamic": corpus(40, seed=1), "fixed": corpus(24, seed=2)}
    config = TrainConfig(output_dir=str(tmp_path), max_steps=4, batch_size=4, lr=1e-2, checkpoint_every=2,
                         log_every=2, progress=True, tensorboard=True, peak_flops=5e10)
    summary = Trainer(tiny_model(), TwoTasks(), data, config).fit()
    log = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    for record in log:
        assert {"test_mlm/accuracy", "test_fixed_mlm/loss", "loss", "lr", "grad_norm", "tokens", "tokens_per_s",
                "mfu", "flops", "step_time", "data_time"} <= set(record)
        assert record["tokens_per_s"] == pytest.approx(record["tokens"] / record["step_time"])
        assert record["flops"] == pytest.approx(summary["flops_per_token"] * record["tokens"])
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["steps"] == 4 and on_disk["tokens"] == sum(r["tokens"] for r in log)
    assert on_disk["tokens_per_s"] == pytest.approx(on_disk["tokens"] / on_disk["train_time_s"])
    assert 0 < on_disk["mfu"] < 1 and on_disk["peak_flops"] == 5e10
    assert 0 <= on_disk["data_time_fraction"] < 1
    err = capsys.readouterr().err
    assert "training summary" in err and "tokens/s" in err and "MFU" in err and "data wait" in err
    assert "train:" in err or "step 4/4" in err  # the progress bar (tqdm) or plain progress lines


def test_data_position_of_each_dataset_is_checkpointed(tmp_path):
    data = {"dynamic": corpus(40, seed=1), "fixed": corpus(24, seed=2)}
    config = TrainConfig(output_dir=str(tmp_path), max_steps=7, batch_size=4, checkpoint_every=7, progress=False,
                         tensorboard=False, measure_mfu=False)
    Trainer(tiny_model(), TwoTasks(), data, config).fit()
    from babelzoo.train.checkpoint import read_part

    state = read_part(tmp_path / "checkpoints/step-00000007", "trainer")["data"]
    assert state["step"] == 7
    assert state["datasets"]["dynamic"] == {"size": 40, "global_batch": 4, "epoch": 0, "chunk": 7}
    assert state["datasets"]["fixed"] == {"size": 24, "global_batch": 4, "epoch": 1, "chunk": 1}
