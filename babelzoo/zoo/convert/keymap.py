"""The mapping engine: one declarative key table per family, applied in both directions.

A :class:`KeyMap` lists, per group, pairs ``hf_key -> our_key``. A Hugging Face side given as a
tuple of keys is *fused*: the tensors are concatenated along dim 0 into our key on import and
split into equal parts on export (BERT's separate query/key/value projections become our one
``qkv`` Linear, in that order). Two placeholders expand a pair into many:

* ``{p}`` is each of ``weight`` and ``bias`` (a Linear or LayerNorm);
* ``{i}`` is each layer index, ``0 .. num_layers - 1``;
* ``{j}`` is each layer index but the first, ``1 .. num_layers - 1`` (a part the first layer
  lacks, as ModernBERT's first attention norm).

Groups say when a pair applies: ``base`` always; ``pooler`` and ``mlm`` when the model has that
head; ``decoder`` when the MLM decoder is not tied to the word embeddings; ``head`` when the model
has a task head. The ``head`` table depends on the Hugging Face class (BERT's sequence classifier
is one Linear, XLM-R's is dense + out_proj), so a family's own table leaves it empty and each of
its task classes fills it in (:meth:`HFFamily.key_map`). ``base`` pairs carry the family's
base-model prefix (``bert.``, ``roberta.``, ``albert.``) in head-model checkpoints; head pairs
never do.

Both directions are total: a key that no pair covers is an error naming it, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import torch

from ...errors import CheckpointError

GROUPS = ("base", "pooler", "mlm", "decoder", "head")


@dataclass(frozen=True)
class Pair:
    """One expanded rule: ``hf`` keys (one, or several fused along dim 0) ↔ ``ours``."""

    hf: tuple[str, ...]
    ours: str
    group: str


@dataclass(frozen=True)
class KeyMap:
    """A family's table. Each group maps an HF key (or a tuple of fused HF keys) to ours."""

    base: Mapping[object, str]
    pooler: Mapping[object, str] = field(default_factory=dict)
    mlm: Mapping[object, str] = field(default_factory=dict)
    decoder: Mapping[object, str] = field(default_factory=dict)
    head: Mapping[object, str] = field(default_factory=dict)

    def pairs(self, num_layers: int, groups: Iterable[str]) -> list[Pair]:
        """Every rule of the wanted ``groups``, with ``{p}`` and ``{i}`` expanded."""
        out: list[Pair] = []
        for group in groups:
            for hf, ours in getattr(self, group).items():
                hf_keys = hf if isinstance(hf, tuple) else (hf,)
                for fill in _fills(" ".join(hf_keys) + " " + ours, num_layers):
                    out.append(Pair(tuple(k.format(**fill) for k in hf_keys), ours.format(**fill), group))
        return out

    def hf_keys(self, group: str, num_layers: int) -> set[str]:
        return {k for pair in self.pairs(num_layers, [group]) for k in pair.hf}


def _fills(text: str, num_layers: int) -> list[dict[str, object]]:
    params = ("weight", "bias") if "{p}" in text else (None,)
    layer_key = "i" if "{i}" in text else "j" if "{j}" in text else None
    layers = {"i": range(num_layers), "j": range(1, num_layers), None: (None,)}[layer_key]
    return [{k: v for k, v in (("p", p), (layer_key, i)) if v is not None} for i in layers for p in params]


def to_ours(state: Mapping[str, torch.Tensor], pairs: list[Pair]) -> dict[str, torch.Tensor]:
    """HF tensors → our keys (fused keys concatenated). Every key of ``state`` must be consumed."""
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    missing = [k for pair in pairs for k in pair.hf if k not in state]
    if missing:
        raise CheckpointError(f"missing Hugging Face keys ({len(missing)}): {_short(missing)}")
    for pair in pairs:
        parts = [state[k] for k in pair.hf]
        out[pair.ours] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
        used.update(pair.hf)
    left = sorted(set(state) - used)
    if left:
        raise CheckpointError(f"Hugging Face keys with no babelzoo counterpart ({len(left)}): {_short(left)}")
    return out


def to_hf(state: Mapping[str, torch.Tensor], pairs: list[Pair]) -> dict[str, torch.Tensor]:
    """Our tensors → HF keys (fused tensors split into equal parts). Every key must be consumed."""
    out: dict[str, torch.Tensor] = {}
    missing = [pair.ours for pair in pairs if pair.ours not in state]
    if missing:
        raise CheckpointError(f"babelzoo model lacks keys the Hugging Face layout needs: {_short(missing)}")
    for pair in pairs:
        tensor = state[pair.ours]
        if len(pair.hf) == 1:
            out[pair.hf[0]] = tensor
            continue
        if tensor.shape[0] % len(pair.hf):
            raise CheckpointError(f"{pair.ours}: dim 0 of {tuple(tensor.shape)} does not split into "
                                  f"{len(pair.hf)} equal parts for {', '.join(pair.hf)}")
        for key, part in zip(pair.hf, tensor.chunk(len(pair.hf), dim=0)):
            out[key] = part.clone()  # safetensors refuses views that share storage
    left = sorted(set(state) - {pair.ours for pair in pairs})
    if left:
        raise CheckpointError(f"babelzoo keys with no Hugging Face counterpart ({len(left)}): {_short(left)}; "
                              f"this model has parts the Hugging Face family cannot hold")
    return out


def compare_shapes(expected: Mapping[str, tuple], found: Mapping[str, torch.Tensor], source: str,
                   names: Mapping[str, str] | None = None) -> None:
    """Raise one :class:`CheckpointError` listing every missing key (with the shape the config
    implies), unexpected key and shape mismatch. ``names`` maps keys back to the checkpoint's own
    spelling (with its prefix) for the message."""
    names = names or {}

    def show(key: str) -> str:
        return names.get(key, key)

    missing = [f"{show(k)} {tuple(expected[k])}" for k in sorted(set(expected) - set(found))]
    unexpected = [f"{show(k)} {tuple(found[k].shape)}" for k in sorted(set(found) - set(expected))]
    shapes = [f"{show(k)}: checkpoint {tuple(found[k].shape)} vs config {tuple(expected[k])}"
              for k in sorted(set(expected) & set(found)) if tuple(found[k].shape) != tuple(expected[k])]
    problems = []
    if missing:
        problems.append(f"missing keys ({len(missing)}): {_short(missing)}")
    if unexpected:
        problems.append(f"unexpected keys ({len(unexpected)}): {_short(unexpected)}")
    if shapes:
        problems.append(f"shape mismatches ({len(shapes)}): {_short(shapes, sep='; ')}")
    if problems:
        raise CheckpointError(f"{source} does not match its config.json: " + " | ".join(problems))


def _short(items: list[str], limit: int = 20, sep: str = ", ") -> str:
    return sep.join(items[:limit]) + (f"{sep}... ({len(items) - limit} more)" if len(items) > limit else "")
