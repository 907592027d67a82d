"""The trainer's loop and outputs: a dict of datasets feeds a mixture-style objective, per-objective
metrics, tokens/s and MFU reach the JSONL log and the summary, the progress display and the
final summary are printed."""

import json
import re

import pytest
import torch

from babelzoo.objectives.base import Loss, Objective
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.run_checkpoints import finished_checkpoint
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
    config = TrainConfig(output_dir=str(tmp_path), max_steps=4, batch_size=4, optim=OptimConfig(lr=1e-2),
                         checkpoints=CheckpointConfig(every=2),
                         logging=LoggingConfig(every=2, progress=True, tensorboard=True, peak_flops=5e10))
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
    config = TrainConfig(output_dir=str(tmp_path), max_steps=7, batch_size=4, checkpoints=CheckpointConfig(every=7),
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False))
    Trainer(tiny_model(), TwoTasks(), data, config).fit()
    from babelzoo.train.checkpoint import read_part

    state = read_part(tmp_path / "checkpoints/step-00000007", "trainer")["data"]
    assert state["step"] == 7
    assert state["datasets"]["dynamic"] == {"size": 40, "global_batch": 4, "epoch": 0, "chunk": 7}
    assert state["datasets"]["fixed"] == {"size": 24, "global_batch": 4, "epoch": 1, "chunk": 1}


def sampled_mixture():
    from babelzoo.objectives.mixture import Mixture

    return Mixture({"dynamic": RandomMaskMLM(), "fixed": FixedMaskMLM()}, mode="sample")


BAR = re.compile(r"mean of steps (\d+)-(\d+): loss ([\d.]+), ([\d,]+) tok/s, MFU ([\d.]+)% \| lr (\S+)\]")


def test_progress_bar_and_summary_agree_on_what_they_both_show(tmp_path, capsys):
    """The bar's last figures are the summary's last window; the whole-run figures say what they
    average over and are what the step records give."""
    data = {"dynamic": corpus(40, seed=1), "fixed": corpus(24, seed=2)}
    config = TrainConfig(output_dir=str(tmp_path), max_steps=8, batch_size=4, optim=OptimConfig(lr=1e-2),
                         checkpoints=CheckpointConfig(every=4),
                         logging=LoggingConfig(every=3, progress=True, tensorboard=False, peak_flops=5e10))
    summary = Trainer(tiny_model(), sampled_mixture(), data, config).fit()
    err = capsys.readouterr().err
    first, last, loss, tokens_per_s, mfu, lr = BAR.findall(err)[-1]  # the bar as it was closed
    window = summary["last_window"]
    assert (int(first), int(last)) == (window["first_step"], window["last_step"]) == (7, 8)
    assert loss == f"{window['loss']:.4f}" and tokens_per_s == f"{window['tokens_per_s']:,.0f}"
    assert mfu == f"{100 * window['mfu']:.1f}" and lr == f"{window['lr']:.2e}"
    # ... and those are the records of steps 7-8: mean loss, tokens over their own time, the last lr
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    tail = records[6:]
    assert window["loss"] == pytest.approx(sum(r["loss"] for r in tail) / 2)
    assert window["tokens_per_s"] == pytest.approx(sum(r["tokens"] for r in tail) / sum(r["step_time"] for r in tail))
    assert window["mfu"] == pytest.approx(sum(r["flops"] for r in tail) / sum(r["step_time"] for r in tail) / 5e10)
    assert window["lr"] == tail[-1]["lr"]
    drawn = [[k.split("/")[0] for k in r if k.endswith("/loss") and k.count("/") == 1] for r in records]
    assert all(len(names) == 1 for names in drawn)  # a sampling mixture: one objective a step, named
    assert sum(n for _, n in window["losses"].values()) == 2
    # the whole run: tokens over the summed step time; wall time counts everything else too
    assert summary["tokens_per_s"] == pytest.approx(sum(r["tokens"] for r in records)
                                                    / sum(r["step_time"] for r in records))
    assert summary["mfu"] == pytest.approx(sum(r["flops"] for r in records)
                                           / sum(r["step_time"] for r in records) / 5e10)
    assert summary["wall_time_s"] > summary["train_time_s"]
    assert summary["wall_tokens_per_s"] == pytest.approx(summary["tokens"] / summary["wall_time_s"])
    assert summary["final_loss"] == records[-1]["loss"] and summary["final_objectives"] == drawn[-1]
    text = err[err.index("training summary"):]
    assert f"loss             {loss} mean of steps 7-8 (as on the progress bar); step 8 alone " \
           f"{records[-1]['loss']:.4f} (objective {drawn[-1][0]})" in text
    assert (f"tokens/s over training steps 1-8 (their own time); {tokens_per_s} over steps 7-8 "
            "(as on the progress bar)") in text
    assert f"MFU              {100 * summary['mfu']:.1f}% over training steps 1-8; {mfu}% over steps 7-8 " in text
    assert f"wall throughput  {summary['wall_tokens_per_s']:,.0f} tokens/s over this run's " in text


def test_a_finished_run_resumed_reports_its_own_figures_and_says_so(tmp_path, capsys):
    data = {"dynamic": corpus(40, seed=1), "fixed": corpus(24, seed=2)}
    settings = {"output_dir": str(tmp_path), "max_steps": 4, "batch_size": 4, "checkpoint_every": 4, "log_every": 2,
                "tensorboard": False}
    done = Trainer(tiny_model(), sampled_mixture(), data,
                   TrainConfig.from_dict({**settings, "peak_flops": 5e10, "progress": False})).fit()
    capsys.readouterr()
    # The same run again, where a peak of 8e10 would be measured now: nothing is trained, no bar
    # shows the run as done in no time, and no figure mixes the old steps with the new peak.
    config = TrainConfig.from_dict({**settings, "peak_flops": 8e10, "progress": True})
    checkpoint = tmp_path / "checkpoints" / "step-00000004"
    assert finished_checkpoint(config) == checkpoint  # what `babelzoo demo` asks before it trains
    assert finished_checkpoint(TrainConfig.from_dict({**settings, "max_steps": 5})) is None
    again = Trainer(tiny_model(), sampled_mixture(), data, config).fit()
    err = capsys.readouterr().err
    assert "train:" not in err
    assert again["finished_before"] and again["steps_this_run"] == 0 and again["steps"] == 4
    assert again["peak_flops"] == 5e10 and again["mfu"] == pytest.approx(done["mfu"])
    assert again["tokens_per_s"] == pytest.approx(done["tokens_per_s"]) and again["last_window"] == done["last_window"]
    assert again["wall_tokens_per_s"] is None
    assert err.startswith(f"training summary: nothing trained now; {checkpoint} had already reached max_steps=4, "
                          "and the figures are that run's (to train again, use another output_dir or remove this one)")
    assert "wall throughput  not measured: no step was trained in this run" in err
    assert "peak 50 GFLOP/s" in err
