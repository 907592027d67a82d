"""Training checkpoints: atomic, verified, keep-last-K, no pickle.

A checkpoint is a directory ``<output_dir>/checkpoints/step-00000100/`` holding

- ``model.safetensors`` + ``config.json``: the model, loadable by ``from_pretrained`` as is;
- one ``<part>.json`` (+ ``<part>.safetensors``) per other part: objectives' heads, optimizer,
  trainer state (step, data position, schedule, loss scaler), and each rank's RNG states;
- ``manifest.json``, written last: the sha256 and size of every file.

A sharded checkpoint (``checkpoint_format: sharded``) holds no ``model.safetensors``: every rank
writes its slices of the model, the objectives' heads and the optimizer's tensors to
``sharded/`` through ``torch.distributed.checkpoint`` in its safetensors layout (each file
records its slices' offsets), so nothing is gathered on one rank and nothing is pickled; the
optimizer's other values go to ``optimizer.json``. A run of another number of processes, or
under another strategy, reads the slices it needs (resharding), and ``from_pretrained`` and
``babelzoo convert`` assemble the model from them.

Tensors go to safetensors and everything else to JSON, so loading a checkpoint never executes
code. The directory is written under a temporary name, every file is fsync'ed, then it is
renamed into place (a rename is atomic), so a crash mid-save leaves the previous checkpoints
intact. On resume the newest checkpoint whose files all match the manifest is used; a corrupted
one is reported with a warning and the one before it is tried.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

import numpy as np
import torch

from .._files import read_json, writing
from ..datasets.download import manifest_problem, sha256_of
from ..errors import BabelzooError
from . import distributed as D

MANIFEST = "manifest.json"
PATTERN = re.compile(r"^step-(\d{8,})$")


class CheckpointCorrupted(BabelzooError, RuntimeError):
    """A checkpoint directory fails verification (missing files, wrong hashes, bad JSON)."""


# --- structure ⇄ (JSON skeleton, flat tensor dict) ------------------------------------------

def encode(obj: Any) -> tuple[Any, dict[str, torch.Tensor]]:
    """Split a nested structure into a JSON-able skeleton and a flat ``{path: tensor}`` dict.

    Tensors become ``{"__tensor__": path}`` (a large one whose rows are mostly zero
    ``{"__rows__": path, "shape": ...}``: its other rows and their index); a tensor seen before
    (tied weights) becomes ``{"__alias__": path}``; tuples, dicts with non-string keys and
    numpy arrays are tagged so that :func:`decode` rebuilds them exactly."""
    tensors: dict[str, torch.Tensor] = {}
    seen: dict[tuple, str] = {}

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            value = value.detach()
            ident = ((value.data_ptr(), value.dtype, tuple(value.shape), tuple(value.stride()))
                     if value.numel() else None)
            if ident is not None and ident in seen:
                return {"__alias__": seen[ident]}
            if ident is not None:
                seen[ident] = path
            rows = _nonzero_rows(value)
            if rows is not None:  # mostly zero rows: store the others and their index
                tensors[path], tensors[f"{path}#rows"] = value[rows].cpu().contiguous(), rows.cpu()
                return {"__rows__": path, "shape": list(value.shape)}
            tensors[path] = value.cpu().contiguous().clone() if value.numel() else value.cpu().contiguous()
            return {"__tensor__": path}
        if isinstance(value, np.ndarray):
            return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, tuple):
            return {"__tuple__": [walk(v, f"{path}/{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [walk(v, f"{path}/{i}") for i, v in enumerate(value)]
        if isinstance(value, Mapping):
            if all(isinstance(k, str) and not k.startswith("__") for k in value):
                return {k: walk(v, f"{path}/{k}" if path else k) for k, v in value.items()}
            return {"__items__": [[walk(k, f"{path}/key{i}"), walk(v, f"{path}/{k}" if path else str(k))]
                                  for i, (k, v) in enumerate(value.items())]}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, torch.dtype):
            return {"__dtype__": str(value).replace("torch.", "")}
        raise TypeError(f"cannot store a value of type {type(value).__name__} in a checkpoint "
                        f"(at {path or 'top level'}): only tensors, numbers, strings and containers of them")

    return walk(obj, ""), tensors


# Below this many elements a tensor is stored whole: the index would save next to nothing.
SPARSE_MIN_ELEMENTS = 1 << 16


def _nonzero_rows(value: torch.Tensor) -> Optional[torch.Tensor]:
    """The indices of the rows holding any bit other than +0, when at most half of the rows
    do (Adam's moments of a large vocabulary's embedding: a row stays exactly zero until its
    token occurs); None to store the tensor whole. Rows left out are exactly +0.0, so the
    tensor rebuilds bit for bit."""
    if value.dim() < 2 or value.numel() < SPARSE_MIN_ELEMENTS or value.is_complex() or value.dtype == torch.bool:
        return None
    flat = value.detach().reshape(value.shape[0], -1)
    nonzero = flat != 0
    if value.is_floating_point():
        nonzero |= torch.signbit(flat)  # -0.0 is kept as written
    rows = nonzero.any(dim=1).nonzero().flatten()
    return rows if 2 * rows.numel() <= value.shape[0] else None


def decode(skeleton: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    built: dict[str, torch.Tensor] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "__tensor__" in value:
            built[value["__tensor__"]] = tensors[value["__tensor__"]]
            return built[value["__tensor__"]]
        if "__rows__" in value:
            path, kept = value["__rows__"], tensors[value["__rows__"]]
            full = torch.zeros(value["shape"], dtype=kept.dtype)
            full[tensors[f"{path}#rows"]] = kept
            built[path] = full
            return full
        if "__alias__" in value:
            return built[value["__alias__"]]
        if "__tuple__" in value:
            return tuple(walk(v) for v in value["__tuple__"])
        if "__items__" in value:
            return {walk(k): walk(v) for k, v in value["__items__"]}
        if "__ndarray__" in value:
            return np.asarray(value["__ndarray__"], dtype=value["dtype"])
        if "__dtype__" in value:
            return getattr(torch, value["__dtype__"])
        return {k: walk(v) for k, v in value.items()}

    return walk(skeleton)


# --- RNG states ------------------------------------------------------------------------------

def rng_state() -> dict[str, Any]:
    """Python, numpy, torch CPU and every CUDA device's generator state."""
    import random

    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    import random

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@contextlib.contextmanager
def rng_kept(device: Optional[torch.device] = None) -> Iterator[None]:
    """After the block, the process's random generators (Python, numpy, torch's CPU one and, for
    a CUDA ``device``, that device's) are as they were before it: a run seeds and draws from
    them, its caller's sequence goes on untouched."""
    state = rng_state()
    cuda = [device.index or 0] if device is not None and device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        try:
            yield
        finally:
            set_rng_state(state)


# --- files -----------------------------------------------------------------------------------

def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_part(directory: Path, name: str, obj: Any) -> None:
    """``name.json`` (skeleton) + ``name.safetensors`` (tensors, when there are any), fsync'ed."""
    from safetensors.torch import save_file

    skeleton, tensors = encode(obj)
    json_path = directory / f"{name}.json"
    with writing(json_path):
        json_path.write_text(json.dumps(skeleton, allow_nan=True), encoding="utf-8")
    _fsync_file(json_path)
    if tensors:
        path = directory / f"{name}.safetensors"
        with writing(path):
            save_file(tensors, str(path), metadata={"format": "pt"})
        _fsync_file(path)


def read_part(directory: Path, name: str) -> Any:
    from safetensors.torch import load_file

    skeleton = read_json(directory / f"{name}.json", CheckpointCorrupted)
    path = directory / f"{name}.safetensors"
    tensors = load_file(str(path)) if path.is_file() else {}
    return decode(skeleton, tensors)


TRAINER_KEYS = ("step", "world_size", "precision", "data")  # what resuming reads from trainer.json


def read_trainer_state(directory: Path) -> dict[str, Any]:
    """The trainer part of a checkpoint, holding every key resuming reads (a :class:`CheckpointCorrupted`
    naming the file otherwise: a hand-edited or foreign ``trainer.json`` is refused, not half-read)."""
    state, path = read_part(directory, "trainer"), directory / "trainer.json"
    if not isinstance(state, dict):
        raise CheckpointCorrupted(f"{path}: expected a JSON object, found {type(state).__name__}")
    missing = [key for key in TRAINER_KEYS if key not in state]
    if missing:
        raise CheckpointCorrupted(f"{path}: no {', '.join(missing)}; this is not a checkpoint babelzoo can resume "
                                  "(choose a new output_dir, or remove this checkpoint)")
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointCorrupted(f"{path}: step={step!r} must be a non-negative integer")
    return state


def write_model(directory: Path, state: Optional[Mapping[str, torch.Tensor]], config_json: Optional[str]) -> None:
    """The model as a ``from_pretrained`` directory: ``model.safetensors`` (+ ``config.json``);
    with ``state`` None (a sharded checkpoint, whose slices hold the weights) the config only."""
    from safetensors.torch import save_file

    if state is not None:
        path = directory / "model.safetensors"
        with writing(path):
            save_file({k: v.detach().cpu().contiguous() for k, v in state.items()}, str(path),
                      metadata={"format": "pt"})
        _fsync_file(path)
    if config_json is not None:
        with writing(directory / "config.json"):
            (directory / "config.json").write_text(config_json, encoding="utf-8")
        _fsync_file(directory / "config.json")


@contextlib.contextmanager
def single_process_quiet():
    """torch.distributed.checkpoint outside a process group, without its warning that it
    assumes one process (what a one-process run means)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        yield


def write_slices(tensors: Mapping[str, torch.Tensor], directory: Path) -> None:
    """This rank's slices of ``tensors`` (FSDP2's DTensors, or whole tensors every rank holds)
    into ``directory/sharded``: torch.distributed.checkpoint in its safetensors layout, one file
    a rank, each slice's offsets in the file's metadata; a tensor every rank holds whole is
    written by one of them. Rank 0 adds the whole shapes (``shapes.json``), by which a reader
    knows every slice is there. Every rank calls this."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter

    from ..zoo.checkpoint_io import SHARDED_DIR, SHARDED_SHAPES

    folder = directory / SHARDED_DIR
    with single_process_quiet():
        dcp.save(dict(tensors), storage_writer=HuggingFaceStorageWriter(str(folder), save_distributed=True))
    if D.rank_and_world()[0] == 0:
        with writing(folder / SHARDED_SHAPES):
            (folder / SHARDED_SHAPES).write_text(json.dumps({k: list(v.shape) for k, v in tensors.items()}),
                                                 encoding="utf-8")
        _fsync_file(folder / SHARDED_SHAPES)


def read_model(directory: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(directory / "model.safetensors"))


def _manifest_step(directory: Path) -> Optional[int]:
    """The step ``manifest.json`` records, or None when it cannot say (missing or unreadable)."""
    try:
        step = json.loads((directory / MANIFEST).read_text(encoding="utf-8")).get("step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def verify(directory: Path) -> None:
    """Raise :class:`CheckpointCorrupted` unless every file in the manifest is present with
    the recorded size and sha256."""
    problem = manifest_problem(directory, MANIFEST)
    if problem is not None:
        raise CheckpointCorrupted(problem)


class CheckpointManager:
    """Saves into and restores from ``root`` (``<output_dir>/checkpoints``); every rank calls
    :meth:`save` and :meth:`latest` (they synchronise). ``root`` must be on a filesystem all
    ranks share."""

    def __init__(self, root: str | Path, keep: int = 3, rank: int = 0):
        self.root, self.keep, self.rank = Path(root), keep, rank

    def path(self, step: int) -> Path:
        return self.root / f"step-{step:08d}"

    def _named(self) -> list[tuple[int, Path]]:
        """(step in the name, folder) of every ``step-NNNNNNNN`` folder, by step."""
        if not self.root.is_dir():
            return []
        return sorted((int(m.group(1)), p) for p in self.root.iterdir() if (m := PATTERN.match(p.name)) and p.is_dir())

    def misnamed(self) -> list[tuple[Path, int, int]]:
        """(folder, step in its name, step its manifest records) of checkpoint folders renamed to
        another step: resuming from one would restart at its real step on every run."""
        return [(p, n, m) for n, p in self._named() if (m := _manifest_step(p)) is not None and m != n]

    def steps(self) -> list[int]:
        """Steps of the checkpoint folders whose name agrees with their manifest's step (a folder
        whose manifest cannot say is kept: :func:`verify` reports it)."""
        return [n for n, p in self._named() if (m := _manifest_step(p)) is None or m == n]

    def save(self, step: int, shared: Callable[[], dict[str, Any]], rank_parts: dict[str, Any],
             model: Callable[[], tuple[Optional[dict[str, torch.Tensor]], Optional[str]]],
             extra: Optional[Callable[[Path], Any]] = None,
             every_rank: Optional[Callable[[Path], Any]] = None) -> Path:
        """Write checkpoint ``step``. ``shared()`` and ``model()`` are called on every rank
        (FSDP needs all ranks to gather full tensors) but only rank 0 writes them; each rank
        writes its own ``rank_parts`` (RNG states) as ``<name>-rank<r>``; ``every_rank(directory)``
        is called on every rank (a sharded save, where each rank writes its own slices);
        ``extra(directory)`` (rank 0) adds other files, e.g. the tokenizer's, before the
        manifest, which lists every file of the folder and its subfolders, is made."""
        final, tmp = self.path(step), self.root / f".tmp-step-{step:08d}"
        if self.rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
        D.barrier()
        for name, obj in rank_parts.items():
            write_part(tmp, f"{name}-rank{self.rank}", obj)
        if every_rank is not None:
            every_rank(tmp)
        model_state, config_json = model()
        shared_parts = shared()
        D.barrier()
        if self.rank == 0:
            try:
                self._write(tmp, step, model_state, config_json, shared_parts, extra)
            except Exception as err:  # a full disk must not stay full of a half-written checkpoint
                shutil.rmtree(tmp, ignore_errors=True)
                code = getattr(err, "errno", None) or (errno.ENOSPC if "No space left" in str(err) else None)
                if code is None:
                    raise
                raise OSError(code, f"cannot write checkpoint step {step} ({os.strerror(code)}); the partial "
                                    f"save was removed", str(final)) from err
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
            _fsync_dir(self.root)
            self._prune()
        D.barrier()
        return final

    @staticmethod
    def _write(tmp: Path, step: int, model_state, config_json, shared_parts: dict[str, Any],
               extra: Optional[Callable[[Path], Any]]) -> None:
        write_model(tmp, model_state, config_json)
        for name, obj in shared_parts.items():
            write_part(tmp, name, obj)
        if extra is not None:
            extra(tmp)
            for path in tmp.iterdir():
                if path.is_file():
                    _fsync_file(path)
        files = {p.relative_to(tmp).as_posix(): {"size": p.stat().st_size, "sha256": sha256_of(p)}
                 for p in sorted(tmp.rglob("*")) if p.is_file()}
        with writing(tmp / MANIFEST):
            (tmp / MANIFEST).write_text(json.dumps({"step": step, "files": files}, indent=1), encoding="utf-8")
        _fsync_file(tmp / MANIFEST)
        _fsync_dir(tmp)

    def _prune(self) -> None:
        for step in self.steps()[: -self.keep]:
            shutil.rmtree(self.path(step), ignore_errors=True)

    def latest(self) -> Optional[Path]:
        """The newest checkpoint that verifies; corrupted newer ones are skipped with a warning.
        Raises :class:`CheckpointCorrupted` when checkpoints exist but none verifies. A collective:
        rank 0 looks, every rank must call it and receives rank 0's answer."""
        chosen, problems = D.broadcast_object(self._newest_verified() if self.rank == 0 else (None, []))
        return self._chosen(chosen, problems)

    def latest_here(self) -> Optional[Path]:
        """:meth:`latest` as this process alone finds it, with no collective: for code that only
        one rank runs (rank 0 building what the other ranks then load)."""
        return self._chosen(*self._newest_verified())

    def _newest_verified(self) -> tuple[Optional[str], list[str]]:
        """(the newest checkpoint that verifies or None, why each newer one did not)."""
        problems: list[str] = []
        for path, named, recorded in self.misnamed():
            warnings.warn(f"checkpoint folder {path} is named for step {named}, but its {MANIFEST} records step "
                          f"{recorded}; skipped (rename it {self.path(recorded).name} to resume from it)",
                          RuntimeWarning, stacklevel=3)
        for step in reversed(self.steps()):
            try:
                verify(self.path(step))
            except CheckpointCorrupted as err:
                problems.append(str(err))
                warnings.warn(f"checkpoint {self.path(step)} is corrupted ({err}); trying the previous one",
                              RuntimeWarning, stacklevel=3)
                continue
            return str(self.path(step)), problems
        return None, problems

    def _chosen(self, chosen: Optional[str], problems: list[str]) -> Optional[Path]:
        if chosen is None and problems:
            raise CheckpointCorrupted(f"no usable checkpoint in {self.root}: " + "; ".join(problems))
        return Path(chosen) if chosen is not None else None
