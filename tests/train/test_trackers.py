"""Experiment trackers (``loggers:`` in a recipe): MLflow's local file store and W&B's offline
run get the config, every logging window's figures at its step, and the summary with the final
model's folder; a failed run is marked failed; a tracker that is unknown or not installed is an
error that says what to install. Everything stays offline, under the run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError
from babelzoo.objectives.mlm import MLM
from babelzoo.train import trackers as T
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.trainer import Trainer

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=60)
DATA = [list(range(5, 5 + n % 17 + 3)) for n in range(40)]


def run(tmp_path: Path, loggers: list[str], objective=None, **changes) -> tuple[dict, Path]:
    torch.manual_seed(0)
    model = babelzoo.create_model("xlmr_tiny", vocab_size=60, hidden_size=32, intermediate_size=64)
    config = TrainConfig(output_dir=str(tmp_path / "run"), max_steps=4, batch_size=4, device="cpu", model_dir="model",
                         optim=OptimConfig(optimizer="adamw", lr=1e-3), checkpoints=CheckpointConfig(every=4),
                         logging=LoggingConfig(every=2, progress=False, measure_mfu=False, loggers=loggers), **changes)
    summary = Trainer(model, objective or MLM(SPECIALS, max_length=24), DATA, config).fit()
    return summary, Path(config.output_dir)


def window_losses(folder: Path) -> dict[int, float]:
    """The mean loss of each logging window (steps 1-2, 3-4), from the run's own log."""
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return {end: sum(r["loss"] for r in records if end - 2 < r["step"] <= end) / 2 for end in (2, 4)}


def test_mlflow_gets_the_config_every_window_and_the_final_model(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    summary, folder = run(tmp_path, ["mlflow"])
    client = MlflowClient(tracking_uri=f"sqlite:///{folder.resolve() / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("babelzoo")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.status == "FINISHED"
    assert found.data.params["optim.lr"] == "0.001" and found.data.params["max_steps"] == "4"
    history = {m.step: m.value for m in client.get_metric_history(found.info.run_id, "loss")}
    assert history.keys() == {2, 4} and history == pytest.approx(window_losses(folder), rel=1e-9)
    assert found.data.tags["model_dir"] == str(folder / "model")
    assert found.data.metrics["final/final_loss"] == pytest.approx(summary["final_loss"])
    assert not (folder / "tensorboard").exists()  # loggers replace the tensorboard switch


def test_a_failed_run_is_marked_failed(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    class Breaks(MLM):
        calls = 0

        def forward(self, model, batch):
            Breaks.calls += 1
            if Breaks.calls == 3:
                raise RuntimeError("the objective broke at step 3")
            return super().forward(model, batch)

    with pytest.raises(RuntimeError, match="step 3"):
        run(tmp_path, ["mlflow"], objective=Breaks(SPECIALS, max_length=24))
    client = MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'run' / 'mlflow.db').resolve()}")
    (found,) = client.search_runs([client.get_experiment_by_name("babelzoo").experiment_id])
    assert found.info.status == "FAILED"
    assert [m.step for m in client.get_metric_history(found.info.run_id, "loss")] == [2]


def test_wandb_writes_an_offline_run_with_the_config_windows_and_summary(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary, folder = run(tmp_path, ["wandb"])
    (offline,) = (folder / "wandb").glob("offline-run-*")
    # The offline run's records (protobuf, in LevelDB's log format) hold keys and JSON values as
    # plain bytes; a run this small fits one 32 KiB block, so none is split.
    (records,) = offline.glob("run-*.wandb")
    data = records.read_bytes()
    assert len(data) < 32768
    for text in ("max_steps", "final_loss", json.dumps(summary["final_loss"]), str(folder / "model"),
                 json.dumps(window_losses(folder)[2]), json.dumps(window_losses(folder)[4])):
        assert text.encode() in data, text


def test_an_unknown_or_missing_tracker_says_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="unknown logger.*comet.*known: mlflow, tensorboard, wandb"):
        TrainConfig(logging=LoggingConfig(loggers=["comet"]))
    import importlib

    real = importlib.import_module

    def missing(name, *args):
        if name == "mlflow":
            raise ImportError("No module named 'mlflow'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(ConfigError, match="pip install mlflow-skinny"):
        T.build_trackers(["mlflow"], tmp_path, {})


def test_config_values_flatten_to_parameters():
    assert T.flat({"lr": 0.1, "objectives": {"mlm": {"max_length": 64}}, "data": {}}) == {
        "lr": "0.1", "objectives.mlm.max_length": "64", "data": "{}"}
    assert T.numbers({"loss": 2.5, "skipped": True, "lr": float("nan"), "name": "x", "steps": 3}) == \
        {"loss": 2.5, "steps": 3.0}
