"""Whose folder ``output_dir`` is: a training run writes only into a new or empty folder, or
into one a babelzoo run of the same identity wrote (to resume or finish it).

When it starts, a run records itself in its folder (:data:`RUN_RECORD`: its settings and, once
built, its model, objectives and data, compared as resume compares them,
:func:`~babelzoo.train.identity.check_same_run`). A folder without that record holds files no
run wrote (a user's ``summary.json`` or ``metrics.jsonl``), and a folder with another run's
record holds that run: both are refused before anything is written, naming the folder and its
files or the differences. A folder written before runs recorded themselves is known by its
checkpoints, which resume compares before the record is added.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Optional

from .._files import read_json_object, write_json_atomic
from ..zoo.config import ConfigError
from .checkpoint import CheckpointCorrupted, CheckpointManager, read_trainer_state
from .config import TrainConfig
from .identity import check_same_run

RUN_RECORD = ".babelzoo-run.json"  # in a training run's output_dir: the run that writes there
WHAT = "training run"
PARTS = ("config", "model", "objectives", "data")


class RunFolderNotOwned(ConfigError):
    """``output_dir`` holds files no babelzoo training run wrote there."""


def run_record(folder: str | Path) -> Optional[dict[str, Any]]:
    """What the run that wrote ``folder`` recorded of itself (``run``: ``{"config": ...,
    "model": ...}``; ``world_size``: its processes), or None where no run did. A record babelzoo
    could not have written raises naming it."""
    path = Path(folder) / RUN_RECORD
    if not path.is_file():
        return None
    data = read_json_object(path, RunFolderNotOwned)
    if data.get("written_by") != "babelzoo" or data.get("what") != WHAT or not isinstance(data.get("run"), dict):
        raise RunFolderNotOwned(f"{path}: not the record of a babelzoo training run; nothing was written: choose a "
                                "new or empty output_dir")
    return data


def is_run_folder(folder: str | Path) -> bool:
    """True when a babelzoo training run recorded itself in ``folder`` (a real folder, not a link)."""
    folder = Path(folder)
    return folder.is_dir() and not folder.is_symlink() and (folder / RUN_RECORD).is_file()


def claim_output_dir(config: TrainConfig, identity: Optional[Mapping[str, Any]] = None,
                     world_size: Optional[int] = None, write: bool = True) -> Path:
    """Make ``config.output_dir`` this run's folder, or refuse it before anything is written.

    ``identity``: the run's ``model``, ``objectives`` and ``data`` as
    :func:`~babelzoo.train.identity.check_same_run` takes them (None before they are built: the
    settings alone are compared). A new or empty folder gets the run's record; a folder with a
    record is this run's when the record agrees (parts not recorded yet are added). A folder of
    checkpoints is compared with the newest one's settings until ``identity`` is given (resume
    compares the rest, and reports a checkpoint it cannot read); one without a record gets it
    then. Any other folder raises :class:`RunFolderNotOwned` (naming its files) or
    :class:`~babelzoo.train.identity.ResumeMismatch` (the differences). ``world_size``: the
    run's processes (default: torchrun's ``WORLD_SIZE``), so that another number of processes
    with the same global batch is the same run, as on resume. ``write``: False checks the
    folder and writes nothing (the trainer records the run when it starts)."""
    folder = Path(config.output_dir)
    if folder.exists() and not folder.is_dir():
        raise RunFolderNotOwned(f"output_dir {folder}: exists and is not a folder; choose a new or empty folder")
    current = {"config": config.to_dict(), **(identity or {})}
    processes = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    entries = sorted(p.name for p in folder.iterdir() if p.name != RUN_RECORD) if folder.is_dir() else []
    checkpoints = CheckpointManager(folder / "checkpoints", 1)
    if entries and identity is None and checkpoints.steps():
        _check_newest_checkpoint(checkpoints, current, processes)
        return folder
    record = run_record(folder) if entries else None  # a record alone: nothing of that run was written
    if record is not None:
        saved, processes_then = record["run"], int(record.get("world_size", 1))
        check_same_run(f"output_dir {folder}", saved, current, step=0, world_sizes=(processes_then, processes),
                       saved_as="that run")
        current = {part: saved.get(part) if saved.get(part) is not None else current.get(part) for part in PARTS}
        if current == {part: saved.get(part) for part in PARTS}:
            return folder
        processes = processes_then  # the record keeps the first run's, which its batch settings go with
    elif entries and not checkpoints.steps():
        shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
        raise RunFolderNotOwned(f"output_dir {folder}: not a folder a babelzoo training run wrote (it holds {shown}); "
                                "nothing was written there: choose a new or empty output_dir, or move those files "
                                "out")
    if write:
        write_json_atomic(folder / RUN_RECORD, {"written_by": "babelzoo", "what": WHAT, "world_size": processes,
                                                "run": current}, indent=1)
    return folder


def _check_newest_checkpoint(checkpoints: CheckpointManager, current: Mapping[str, Any], world: int) -> None:
    """Refuse a run whose settings differ from those of the newest checkpoint (as resume would,
    but before the run writes its tokenizer and token cache there); a checkpoint that cannot be
    read is left to resume, which falls back to an earlier one or names the damage."""
    path = checkpoints.path(checkpoints.steps()[-1])
    try:
        trainer = read_trainer_state(path)
    except (CheckpointCorrupted, OSError, ValueError):
        return
    check_same_run(str(path), {"config": trainer.get("config")}, {"config": current["config"]}, int(trainer["step"]),
                   world_sizes=(int(trainer.get("world_size", 1)), world))
