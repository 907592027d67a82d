"""Experiment trackers behind one interface: TensorBoard, MLflow and Weights & Biases.

A recipe names them (``loggers: [tensorboard, mlflow, wandb]``); each is an optional install and
each writes under the run folder unless its own settings say otherwise, so nothing leaves the
machine by default:

* ``tensorboard``: event files in ``OUTPUT_DIR/tensorboard`` (``pip install tensorboard``);
* ``mlflow``: a local SQLite store, ``OUTPUT_DIR/mlflow.db`` (``MLFLOW_TRACKING_URI`` points
  elsewhere; ``mlflow ui --backend-store-uri sqlite:///OUTPUT_DIR/mlflow.db`` shows it), one run
  per training run, through ``MlflowClient`` (no process-wide MLflow state is set)
  (``pip install mlflow-skinny sqlalchemy alembic``);
* ``wandb``: an offline run in ``OUTPUT_DIR/wandb`` (``WANDB_MODE=online`` and a login to upload;
  ``wandb sync`` uploads an offline one later) (``pip install wandb``).

Every tracker receives the run's config once, the figures of each logging window (the progress
bar's: loss, tokens/s, MFU, learning rate, the objectives' metrics, evaluation results) at the
window's last step, and at the end the run's summary and the checkpoint written last.
"""

from __future__ import annotations

import abc
import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import ConfigError
from ..registry import Registry

# the trackers of this module register as it is defined; an installed package's through the group
TRACKERS: Registry[Callable[[Path, Mapping[str, Any]], "Tracker"]] = Registry("tracker", group="babelzoo.trackers")


class Tracker(abc.ABC):
    """What the run logger calls; rank 0 only."""

    name = ""

    @abc.abstractmethod
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """Record one logging window's numbers at ``step``."""

    @abc.abstractmethod
    def finish(self, summary: Optional[Mapping[str, Any]]) -> None:
        """End the run: ``summary`` is the run's, or None when it failed."""


def register_tracker(name: str):
    """Class decorator: register a :class:`Tracker` (or a factory of one, called with the run's
    folder and config) under ``name``, the name a recipe's ``logging.loggers`` gives."""
    return TRACKERS.register(name=name)


def check_loggers(names: Sequence[str]) -> None:
    """An error naming every tracker of ``names`` that is not registered, nor an installed plug-in."""
    known = TRACKERS.list()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigError(f"TrainConfig.logging.loggers: unknown logger(s) {unknown}; known: {', '.join(known)}")


def numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of ``values`` (the trackers take scalars only)."""
    return {k: float(v) for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as ``a.b.c`` keys with string values (MLflow's parameters)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat(value, name + "."))
        else:
            out[name] = str(value)[:6000]  # MLflow's limit on a parameter's value
    return out


def build_trackers(names: list[str], output_dir: Path, config: Mapping[str, Any]) -> list[Tracker]:
    """The trackers ``names`` for a run in ``output_dir``; an unknown name or a tracker whose
    package is not installed is an error that says what to install."""
    check_loggers(names)
    return [TRACKERS.get(name)(output_dir, config) for name in names]


def _require(module: str, package: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"TrainConfig.logging.loggers names {package.split()[0]!r}, which needs {package}: "
                          f"pip install {package}") from None


@register_tracker("tensorboard")
class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def __init__(self, output_dir: Path, config: Mapping[str, Any]):
        _require("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(output_dir / "tensorboard"))

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in numbers(metrics).items():
            self.writer.add_scalar(key, value, step)

    def finish(self, summary: Optional[Mapping[str, Any]]) -> None:
        self.writer.close()


@register_tracker("mlflow")
class MLflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, output_dir: Path, config: Mapping[str, Any]):
        _require("mlflow", "mlflow-skinny")
        _require("sqlalchemy", "sqlalchemy (MLflow's local store)")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(output_dir.resolve() / 'mlflow.db').as_posix()}"
        output_dir.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=uri)
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "babelzoo")
        found = self.client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        self.run_id = self.client.create_run(experiment_id, run_name=output_dir.name,
                                             tags={"output_dir": str(output_dir.resolve())}).info.run_id
        params = [Param(k, v) for k, v in flat(config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters a call
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        self.uri = uri

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        values = [Metric(k.replace("@", "_at_"), v, now, step) for k, v in numbers(metrics).items()]
        if values:
            self.client.log_batch(self.run_id, metrics=values)

    def finish(self, summary: Optional[Mapping[str, Any]]) -> None:
        if summary is not None:
            for key in ("checkpoint", "model_dir"):
                if summary.get(key):
                    self.client.set_tag(self.run_id, key, str(summary[key]))
            final = {f"final/{k}": v for k, v in numbers(summary).items()}
            if final:
                self.log_metrics(final, int(summary.get("final_step") or 0))
        self.client.set_terminated(self.run_id, "FINISHED" if summary is not None else "FAILED")


@register_tracker("wandb")
class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, output_dir: Path, config: Mapping[str, Any]):
        wandb = _require("wandb", "wandb")
        folder = output_dir / "wandb"
        folder.mkdir(parents=True, exist_ok=True)
        mode = os.environ.get("WANDB_MODE", "offline")
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "babelzoo"), dir=str(output_dir),
                              name=output_dir.name, config=dict(config), mode=mode, reinit="create_new")

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(numbers(metrics), step=step)

    def finish(self, summary: Optional[Mapping[str, Any]]) -> None:
        if summary is not None:
            self.run.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float, str))})
        self.run.finish(exit_code=0 if summary is not None else 1)
