"""Reading a Hugging Face model directory: ``config.json`` and the weights, whole or sharded.

Weights come from ``model.safetensors`` or ``pytorch_model.bin`` (read with
``torch.load(weights_only=True)``), or from the shards an ``*.index.json`` lists.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..._files import read_json, read_json_object
from ..checkpoint_io import CheckpointError, read_weights

CONFIG = "config.json"
SINGLE = ("model.safetensors", "pytorch_model.bin")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")

# TensorFlow-era BERT checkpoints name LayerNorm parameters gamma/beta; transformers renames them
# on load, and so do we.
LEGACY_SUFFIXES = {".gamma": ".weight", ".beta": ".bias"}


def read_hf_config(directory: Path) -> dict:
    path = directory / CONFIG
    if not path.is_file():
        raise CheckpointError(f"{directory}: no {CONFIG}; is this a Hugging Face model directory?")
    return read_json_object(path, CheckpointError)


def find_hf_weights(directory: Path) -> Path:
    for name in (*SINGLE, *INDEXES):
        if (directory / name).is_file():
            return directory / name
    raise CheckpointError(f"{directory}: no weights file (looked for {', '.join(SINGLE + INDEXES)})")


def read_hf_weights(path: Path) -> dict[str, torch.Tensor]:
    """All tensors of a weights file or of every shard an index lists, with legacy
    gamma/beta names renamed. A key an index promises but its shard lacks is an error."""
    if path.name in INDEXES:
        state = _read_sharded(path)
    else:
        state = read_weights(path)
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        new = key
        for old, repl in LEGACY_SUFFIXES.items():
            if key.endswith(old):
                new = key[: -len(old)] + repl
        if new in out:
            raise CheckpointError(f"{path}: both {key!r} and another key map to {new!r}")
        out[new] = tensor
    return out


def _read_sharded(index: Path) -> dict[str, torch.Tensor]:
    try:
        weight_map = read_json(index, CheckpointError)["weight_map"]
    except (KeyError, TypeError) as err:
        raise CheckpointError(f"{index}: not a shard index with a 'weight_map' ({err})") from None
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard:
            raise CheckpointError(f"{index}: shard name {shard!r} must be a file in the same directory")
        state.update(read_weights(index.parent / shard))
    absent = sorted(set(weight_map) - set(state))
    if absent:
        raise CheckpointError(f"{index}: keys listed in the index but absent from their shards: "
                              f"{', '.join(absent[:20])}")
    return state
