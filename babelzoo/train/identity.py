"""What makes a run the same run: resume continues a checkpoint only when this run would have
produced it.

A checkpoint stores the :class:`~babelzoo.train.config.TrainConfig` it was trained under, the
model's config and the identity of every dataset (tokenised corpora are keyed by their text,
languages and tokenizer; fine-tuning data by the content of its files and of its tokenizer). On resume every field is compared except the few that only change how
a run is watched or how long it goes on (:data:`RESUMABLE`); any other difference is refused with
the list of differences, since continuing would silently mix two runs.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

from .._files import read_json_object
from ..zoo.config import ConfigError
from .config import TrainConfig

# TrainConfig settings a resumed run may change: where and how it runs, logs and checkpoints, how
# long it trains (max_steps, upward only), the learning rate and the evaluation cadence (a group
# names all of its settings)
RESUMABLE = frozenset({
    "output_dir", "device", "num_workers", "distributed", "find_unused_parameters", "keep_cpu_buffers", "compile",
    "max_steps", "optim.lr", "eval_every", "patience", "checkpoints", "logging", "threads", "max_seconds",
    "budget_clock", "model_dir",
})
# ... and these, when another number of processes keeps the global batch (batch_size × grad_accum
# × world_size): every step then sees the examples it would have seen
PER_RANK_BATCH = frozenset({"batch_size", "grad_accum"})


class ResumeMismatch(ConfigError):
    """The checkpoint in ``output_dir`` was written by a different run."""


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            out.update(_flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out if out or not prefix else {prefix: {}}
    return {prefix: value}


def differences(saved: Any, current: Any, skip: frozenset = frozenset(), saved_as: str = "checkpoint") -> list[str]:
    """``field: saved → current`` for every leaf that differs (JSON-normalised: tuples and
    lists are equal); ``saved_as`` names where the saved values come from."""
    saved, current = json.loads(json.dumps(saved)), json.loads(json.dumps(current))
    a, b = _flatten(saved), _flatten(current)
    lines = []
    for key in sorted(set(a) | set(b)):
        if any(key == name or key.startswith(f"{name}.") for name in skip):
            continue
        old, new = a.get(key, "(absent)"), b.get(key, "(absent)")
        if old != new:
            lines.append(f"{key}: {old!r} ({saved_as}) → {new!r} (now)")
    return lines


def data_identity(data: Any) -> Any:
    """A JSON description of the datasets that changes when their content does: the cache key
    of tokenised corpora (their text, languages and tokenizer), a dataset's own ``fingerprint``
    (a string, or a mapping naming each input, e.g. ``{"train": sha256, "tokenizer": ...}``),
    nested for mixtures and ``{objective: data}`` mappings; None for data that carries no
    identity (in-memory lists)."""
    if isinstance(data, Mapping):
        return {str(k): data_identity(v) for k, v in data.items()}
    if isinstance(data, tuple) and data:  # (dataset, sampler)
        return data_identity(data[0])
    fingerprint = getattr(data, "fingerprint", None)
    if isinstance(fingerprint, str):
        return fingerprint
    if isinstance(fingerprint, Mapping):
        return json.loads(json.dumps(fingerprint))
    keys, corpora = getattr(data, "keys", None), getattr(data, "corpora", None)
    if isinstance(keys, list) and isinstance(corpora, list):  # a CorpusMixture
        return {str(k): data_identity(c) for k, c in zip(keys, corpora)}
    pairs = getattr(data, "pairs", None)  # parallel documents over a tokenised corpus
    if pairs is not None and pairs is not data:
        return data_identity(pairs)
    return None


def objective_identity(objectives: Any) -> dict[str, Any]:
    """Each objective's class and scalar settings (max_length, temperature, ...), and a
    mixture's mode and weights: what a Python caller (who builds objectives without a config)
    would change to change the run."""
    named = getattr(objectives, "objectives", None)
    items = list(named.items()) if hasattr(named, "items") else [("objective", objectives)]
    out: dict[str, Any] = {}
    for name, objective in items:
        # constructor arguments kept under their own names (max_length=..., temperature=...),
        # not running state such as counters
        accepted = set(inspect.signature(type(objective).__init__).parameters) - {"self"}
        settings = {k: v for k, v in vars(objective).items()
                    if k in accepted and isinstance(v, (bool, int, float, str))}
        out[str(name)] = {"class": type(objective).__name__, **settings}
    if named is not None:
        out["mixture"] = {"mode": getattr(objectives, "mode", None),
                          "weights": {str(k): float(v) for k, v in getattr(objectives, "weights", {}).items()}}
    return out


def check_same_run(where: str, saved: Mapping[str, Any], current: Mapping[str, Any], step: int,
                   world_sizes: tuple[int, int] = (1, 1), saved_as: str = "checkpoint") -> None:
    """Refuse to resume ``where`` (a checkpoint written at ``step``) when ``current`` differs
    from ``saved`` outside :data:`RESUMABLE` (keys: ``config``, ``model``, ``objectives``, ``data``);
    ``world_sizes``: the processes that wrote the checkpoint and those resuming it (when they
    differ, :data:`PER_RANK_BATCH` may change with them); ``saved_as`` names ``saved`` in the
    differences listed (a checkpoint, a run's record of itself)."""
    lines: list[str] = []
    if saved.get("config") is not None:
        # a checkpoint of the flat layout of earlier versions reads as its groups; a setting added
        # to TrainConfig after the checkpoint was written has its default there
        before = _with_defaults(TrainConfig.nest_flat_keys(saved["config"])[0], _defaults(), current["config"])
        lines += differences(before, current["config"], RESUMABLE | _same_global_batch(before, current["config"],
                                                                                      world_sizes), saved_as)
        max_steps = current["config"].get("max_steps")
        if isinstance(max_steps, int) and max_steps < step:
            lines.append(f"max_steps: {max_steps} is below the checkpoint's step {step} (it may only grow)")
    for part in ("model", "objectives", "data"):
        if saved.get(part) is not None and current.get(part) is not None:
            lines += [f"{part}.{line}" for line in differences(saved[part], current[part], saved_as=saved_as)]
    if lines:
        raise ResumeMismatch(
            f"{where} was written by a different run; resuming would mix the two. Differences:\n  "
            + "\n  ".join(lines)
            + f"\nTo start fresh, choose a new output_dir; to resume, restore the settings and files it was "
              f"trained with (a *_sha256 entry is a file's content). Fields that may change on resume: "
              f"{', '.join(sorted(RESUMABLE))}")


def _defaults() -> dict[str, Any]:
    """TrainConfig's defaults, as a saved config spells them (JSON)."""
    return json.loads(json.dumps(TrainConfig().to_dict()))


def _with_defaults(saved: Mapping[str, Any], defaults: Mapping[str, Any], current: Mapping[str, Any]) -> dict:
    """``saved`` with the default of every setting it lacks and ``current`` has, group by group."""
    out = dict(saved)
    for key, default in defaults.items():
        if key not in current:
            continue
        if key not in out:
            out[key] = default
        elif isinstance(default, Mapping) and isinstance(out[key], Mapping) and isinstance(current[key], Mapping):
            out[key] = _with_defaults(out[key], default, current[key])
    return out


def _same_global_batch(before: Mapping[str, Any], now: Mapping[str, Any], world_sizes: tuple[int, int]
                       ) -> frozenset:
    def global_batch(config: Mapping[str, Any], world: int) -> Any:
        try:
            return config["batch_size"] * config["grad_accum"] * world
        except (KeyError, TypeError):
            return None

    was, will = global_batch(before, world_sizes[0]), global_batch(now, world_sizes[1])
    return PER_RANK_BATCH if world_sizes[0] != world_sizes[1] and was is not None and was == will else frozenset()


def folder_digest(directory: str | Path) -> str:
    """sha256 over the names and bytes of the files directly in ``directory``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(directory).iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def tokenizer_identity(tokenizer: Any) -> str:
    """The tokenizer's content: the digest of the files its ``save`` writes (as pre-training
    keys its corpora), so two tokenizers that may encode a text differently differ here, and
    the same vocabulary read from another folder does not."""
    with tempfile.TemporaryDirectory(prefix="babelzoo-tokenizer-") as tmp:
        tokenizer.save(tmp)
        return folder_digest(tmp)


def saved_model_config(directory) -> Optional[dict]:
    """The model config a checkpoint directory holds (None without ``config.json``)."""
    path = directory / "config.json"
    if not path.is_file():
        return None
    return read_json_object(path, ConfigError)
