"""Checkpoint files: ``config.json`` + ``model.safetensors`` (+ tokenizer files), read and
written, loaded strictly into a model.

Weights are read with safetensors, or, for ``.bin``/``.pt`` files, with
``torch.load(weights_only=True)``: no checkpoint can run code. A checkpoint whose keys or shapes
do not match the model is an error that lists them; a truncated or corrupted file is an error
naming the file. Nothing is ever partly loaded.

This module lies below every model class (each is :class:`Checkpointed`) and below the factory
that builds them; :func:`babelzoo.zoo.pretrained.from_pretrained`, which builds any model and
converts Hugging Face checkpoints, lies above both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, ClassVar, Mapping, Optional

import torch
from torch import nn

from .._files import FolderNotOwned, atomic_write, read_json, read_json_object, replace_owned_folder
from ..datasets.download import download, fetch_directory, is_url, manifest_problem
from ..datasets.tokenizer import load_tokenizer
from ..errors import CheckpointError, InputError
from .config import ConfigError
from .model_config import ModelConfig
from .family import family_of
from ._hub_ids import looks_like_hub_id, snapshot
from .layers.quantized import quantize_linears
from .sentences import attached_tokenizer

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
PICKLE_NAMES = ("pytorch_model.bin", "model.bin", "model.pt")
QUANTIZATION_NAME = "quantization.json"  # written beside config.json by a quantized model
MANIFEST_NAME = "manifest.json"  # written by the trainer into every checkpoint
# a sharded training checkpoint's folder of slices (torch.distributed.checkpoint's safetensors
# layout: one file per rank, each tensor slice's offsets in the file's metadata), and the
# prefix of the model's tensors there
SHARDED_DIR, SHARDED_MODEL_PREFIX = "sharded", "model."
SHARD_OFFSETS_KEY = "DCP_SHARDING_INFO"
SHARDED_SHAPES = "shapes.json"  # {name: whole shape} of every tensor sliced there


def tied_keys(model: nn.Module) -> set[str]:
    """State-dict keys whose tensors are the same storage as an earlier key (tied weights):
    saved once, restored by tying."""
    seen: dict[int, str] = {}
    tied: set[str] = set()
    for key, tensor in model.state_dict(keep_vars=True).items():
        ident = id(tensor)
        if ident in seen:
            tied.add(key)
        else:
            seen[ident] = key
    return tied


def model_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The model's state dict without tied duplicates, contiguous, ready for safetensors."""
    skip = tied_keys(model)
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if k not in skip}


class Checkpointed:
    """The checkpoint methods every babelzoo model class has: ``save_pretrained``,
    ``from_pretrained`` and ``num_parameters`` (tied weights counted once)."""

    fuses: ClassVar[bool] = False  # True for the class of configs with a fusion part

    def save_pretrained(self, directory: str | Path, tokenizer=None) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ the tokenizer's files)."""
        return save_pretrained(self, directory, tokenizer)

    @classmethod
    def from_pretrained(cls, source: str | Path, sha256: Optional[str] = None, *, revision: Optional[str] = None,
                        cache_dir: str | Path | None = None):
        """A model of this class from a babelzoo checkpoint: a directory, the URL of an archived
        one (verified against ``sha256``) or a Hub id (at ``revision``, through ``cache_dir``).
        :func:`babelzoo.from_pretrained` loads a checkpoint of any model class, and converts
        Hugging Face checkpoints."""
        directory, raw = open_checkpoint(source, sha256, revision=revision, cache_dir=cache_dir)
        if "model_type" in raw:
            raise CheckpointError(f"{directory} is a Hugging Face checkpoint: babelzoo.from_pretrained converts it")
        return load_checkpoint(directory, raw, cls._from_config)

    @classmethod
    def _from_config(cls, config: ModelConfig):
        fits = cls.fuses if config.fusion is not None else \
            not cls.fuses and issubclass(cls, family_of(config.text).model_class())
        if not fits:
            held = "fusion model" if config.fusion is not None else family_of(config.text).model_class().__name__
            raise CheckpointError(f"the checkpoint holds a {held}, not a {cls.__name__}: load it with "
                                  "babelzoo.from_pretrained")
        return cls(config)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in {id(p): p for p in self.parameters()}.values())


def _atomic_write(path: Path, write) -> None:
    atomic_write(path, write)


def save_weights(state: Mapping[str, torch.Tensor], path: str | Path, metadata: Optional[dict] = None) -> None:
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, lambda tmp: save_file(dict(state), tmp, metadata=metadata or {"format": "pt"}))


def _pickle_reason(err: Exception) -> str:
    """Why torch refused a pickle, without its advice to load with ``weights_only=False``."""
    text = str(err)
    found = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)
    if found:
        return found.group(1).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip() and "weights_only" not in line]
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a ``.safetensors`` file, a ``.bin``/``.pt`` pickle with ``weights_only=True``, or a
    sharded training checkpoint's ``sharded/`` folder (:func:`read_sharded`)."""
    path = Path(path)
    if path.is_dir() and path.name == SHARDED_DIR:
        return read_sharded(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such weights file")
    if path.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(path)
        except (SafetensorError, OSError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{path}: corrupted or truncated safetensors file ({err})") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle errors come in many types; all mean the same here
        raise CheckpointError(f"{path}: cannot read weights with torch.load(weights_only=True) "
                              f"({_pickle_reason(err)}); babelzoo never runs a checkpoint's code: convert "
                              f"the weights to safetensors") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path}: expected a dict of tensors")
    return state


def check_state(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Raise :class:`CheckpointError` listing missing keys, unexpected keys and shape
    mismatches between ``state`` and ``model``."""
    expected = {k: v for k, v in model.state_dict().items() if k not in tied_keys(model)}
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected) - tied_keys(model))
    shapes = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
              for k in sorted(set(state) & set(expected)) if tuple(state[k].shape) != tuple(expected[k].shape)]
    # loading copies values into the model's tensors, converting silently: int64 token counts
    # would become float weights, float weights would be truncated into an integer buffer
    kinds = [f"{k}: checkpoint {_dtype_name(state[k])} for the model's {_dtype_name(expected[k])}"
             for k in sorted(set(state) & set(expected)) if _dtype_kind(state[k]) != _dtype_kind(expected[k])]
    problems = []
    if missing:
        problems.append(f"missing keys ({len(missing)}): {', '.join(missing[:20])}{' ...' if len(missing) > 20 else ''}")
    if unexpected:
        problems.append(f"unexpected keys ({len(unexpected)}): "
                        f"{', '.join(unexpected[:20])}{' ...' if len(unexpected) > 20 else ''}")
    if shapes:
        problems.append(f"shape mismatches ({len(shapes)}): {'; '.join(shapes[:20])}")
    if kinds:
        problems.append(f"dtype mismatches ({len(kinds)}; a floating-point tensor cannot be loaded from integer, bool "
                        f"or complex values, nor an integer one from floats): {'; '.join(kinds[:20])}")
    if problems:
        raise CheckpointError(f"{source} does not match the model: " + " | ".join(problems))


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _dtype_kind(tensor: torch.Tensor) -> str:
    if tensor.dtype == torch.bool:
        return "bool"
    if tensor.is_complex():
        return "complex"
    return "floating" if tensor.is_floating_point() else "integer"


def load_state_strict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    check_state(model, state, source)
    skip = tied_keys(model)
    model.load_state_dict({k: v for k, v in state.items() if k not in skip}, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()


def find_weights(directory: Path) -> Path:
    """The weights of a checkpoint directory: its weights file, else the folder of a sharded
    training checkpoint's slices (read by :func:`read_weights`)."""
    for name in (WEIGHTS_NAME, *PICKLE_NAMES):
        if (directory / name).is_file():
            return directory / name
    if (directory / SHARDED_DIR).is_dir():
        return directory / SHARDED_DIR
    raise CheckpointError(f"{directory}: no weights file ({WEIGHTS_NAME} or {', '.join(PICKLE_NAMES)}) and no "
                          f"{SHARDED_DIR}/ folder of a sharded training checkpoint")


def shard_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: no .safetensors slices in this sharded checkpoint folder")
    return files


def slice_names(folder: Path) -> set[str]:
    """The names of the tensors a sharded checkpoint folder holds slices of."""
    from safetensors import safe_open

    names: set[str] = set()
    for file in shard_files(folder):
        with safe_open(str(file), framework="pt") as f:
            names.update(f.keys())
    return names


def read_sharded(folder: str | Path, prefix: str = SHARDED_MODEL_PREFIX) -> dict[str, torch.Tensor]:
    """The whole tensors named ``prefix...`` (without the prefix) of a sharded checkpoint
    folder, each assembled from the slices every rank wrote at the offsets its file records; no
    process group is needed. A tensor whose slices do not cover it (a rank's file missing) is
    refused by name."""
    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    slices: dict[str, list[tuple[list[int], torch.Tensor]]] = {}
    for file in shard_files(folder):
        try:
            with safe_open(str(file), framework="pt") as f:
                offsets = json.loads((f.metadata() or {}).get(SHARD_OFFSETS_KEY) or "{}")
                for key in f.keys():
                    if key.startswith(prefix):
                        tensor = f.get_tensor(key)
                        start = offsets.get(key, {}).get("saved_offsets", [0] * tensor.dim())
                        slices.setdefault(key[len(prefix):], []).append((list(start), tensor))
        except (SafetensorError, OSError, ValueError) as err:
            raise CheckpointError(f"{file}: corrupted or truncated safetensors file ({err})") from None
    shapes = read_json(folder / SHARDED_SHAPES, CheckpointError) if (folder / SHARDED_SHAPES).is_file() else {}
    missing = sorted(k for k in shapes if k.startswith(prefix) and k[len(prefix):] not in slices)
    if missing:
        raise CheckpointError(f"{folder}: no slice of {', '.join(map(repr, missing[:5]))}; a rank's file is missing")
    return {key: _assemble(folder, key, parts, shapes.get(prefix + key)) for key, parts in slices.items()}


def _assemble(folder: Path, key: str, parts: list[tuple[list[int], torch.Tensor]],
              shape: Optional[list[int]]) -> torch.Tensor:
    first = parts[0][1]
    if shape is None:  # no shapes.json: as far as the slices reach
        shape = [max(start[d] + t.shape[d] for start, t in parts) for d in range(first.dim())]
    whole = torch.empty(shape, dtype=first.dtype)
    for start, t in parts:
        whole[tuple(slice(s, s + n) for s, n in zip(start, t.shape))] = t
    held = sum(t.numel() for _, t in parts)
    if held != whole.numel():
        raise CheckpointError(f"{folder}: the slices of {key!r} hold {held} of its {whole.numel()} elements; "
                              "a rank's file is missing")
    return whole


def replace_directory(directory: str | Path, write: Callable[[Path], None], what: str = "model") -> Path:
    """Write a whole model directory: ``write(tmp)`` fills a fresh folder beside ``directory``,
    which then takes its place, so no file of an earlier model (another tokenizer's files) is
    left beside the new one, and an interrupted save leaves the old model whole. Only a folder
    babelzoo wrote as a model, holding nothing else, is replaced; any other non-empty folder (a
    project, a training checkpoint) is refused with its name and left untouched."""
    try:
        return replace_owned_folder(directory, write, what)
    except FolderNotOwned as err:
        raise CheckpointError(str(err)) from None


def save_pretrained(model, directory: str | Path, tokenizer=None, extra_files: Optional[Mapping[str, str]] = None,
                    write_extra: Optional[Callable[[Path], None]] = None) -> Path:
    """``model.safetensors``, ``config.json`` and the tokenizer's files (``tokenizer``, else the
    one attached to the model: exports and ``babelzoo encode`` find it beside the weights) (and
    ``extra_files``, name →
    text, such as a model card; ``write_extra(folder)`` adds more, such as a scorer and its
    memory beside an encoder), replacing whatever model ``directory`` held (see
    :func:`replace_directory`)."""
    tokenizer = tokenizer if tokenizer is not None else attached_tokenizer(model)

    def write(folder: Path) -> None:
        for name, text in (extra_files or {}).items():
            _atomic_write(folder / name, lambda tmp, text=text: Path(tmp).write_text(text, encoding="utf-8"))
        save_weights(model_state(model), folder / WEIGHTS_NAME)
        _atomic_write(folder / CONFIG_NAME, lambda tmp: model.config.to_json(tmp))
        quantization = getattr(model, "quantization", None)
        if quantization is not None:
            _atomic_write(folder / QUANTIZATION_NAME, lambda tmp: Path(tmp).write_text(
                json.dumps(quantization, indent=1), encoding="utf-8"))
        if tokenizer is not None:
            tokenizer.save(folder)
        if write_extra is not None:
            write_extra(folder)

    return replace_directory(directory, write)


def read_config(directory: Path) -> dict:
    path = directory / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{directory}: no {CONFIG_NAME}; is this a checkpoint directory?")
    return read_json_object(path, CheckpointError)


def open_checkpoint(source: str | Path, sha256: Optional[str] = None, *, revision: Optional[str] = None,
                    cache_dir: str | Path | None = None) -> tuple[Path, dict]:
    """The local directory of the checkpoint ``source`` names (see :func:`resolve_source`) and
    its ``config.json``, read."""
    directory = resolve_source(source, sha256, revision=revision, cache_dir=cache_dir)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a checkpoint directory")
    return directory, read_config(directory)


def load_checkpoint(directory: Path, raw: dict, build: Callable[[ModelConfig], nn.Module]) -> nn.Module:
    """The model ``build`` makes for the babelzoo checkpoint in ``directory`` (``raw``: its
    ``config.json``), the checkpoint verified against its manifest, its weights (quantized
    layers included) loaded strictly and its tokenizer attached."""
    try:
        config = ModelConfig.from_dict(raw, where=str(directory / CONFIG_NAME))
    except (ConfigError, TypeError) as err:
        raise CheckpointError(f"{directory / CONFIG_NAME}: {err}") from None
    _verify_manifest(directory)
    model = build(config)
    weights = find_weights(directory)
    state = read_weights(weights)
    _apply_quantization(model, directory, state)
    load_state_strict(model, state, str(weights))
    _attach_tokenizer(model, directory)
    return model


def _apply_quantization(model, directory: Path, state: Mapping[str, torch.Tensor]) -> None:
    """Give ``model`` the quantized layers ``quantization.json`` lists, so that the quantized
    weights load strictly; quantized weights without that file are refused by name."""
    path = directory / QUANTIZATION_NAME
    if not path.is_file():
        packed = sorted(k for k in state if k.endswith((".weight_int8", ".weight_packed")))
        if packed:
            raise CheckpointError(f"{directory}: the weights are quantized ({len(packed)} layers, e.g. {packed[0]}) "
                                  f"but {QUANTIZATION_NAME} is missing; restore it beside {CONFIG_NAME} (it says "
                                  "which layers hold which scheme)")
        return
    spec = read_json(path, CheckpointError)
    if not isinstance(spec, dict) or not isinstance(spec.get("scheme"), str) or \
            not isinstance(spec.get("modules"), list):
        raise CheckpointError(f"{path}: expected {{\"scheme\": ..., \"modules\": [...]}}")
    try:
        quantize_linears(model, spec["scheme"], spec["modules"], empty=True, smoothed="smoothing" in spec)
    except InputError as err:
        raise CheckpointError(f"{path}: {err}") from None
    model.quantization = spec


def resolve_source(source: str | Path, sha256: Optional[str] = None, *, revision: Optional[str] = None,
                   cache_dir: str | Path | None = None) -> Path:
    """The local path of a checkpoint: ``source`` itself, the unpacked archive at a URL, or the
    verified snapshot of a Hub id."""
    if looks_like_hub_id(source):
        return snapshot(source, revision, cache_dir)
    if revision is not None or cache_dir is not None:
        raise ConfigError(f"revision= and cache_dir= are for Hugging Face Hub ids ('org/name'); {str(source)!r} is "
                          f"{'a URL' if is_url(source) else 'a local path'}")
    return fetch_directory(str(source), sha256) if is_url(source) else Path(source)


def _verify_manifest(directory: Path) -> None:
    """A training checkpoint (it has a manifest) is verified file by file before anything loads."""
    if (directory / MANIFEST_NAME).is_file():
        problem = manifest_problem(directory, MANIFEST_NAME)
        if problem is not None:
            raise CheckpointError(f"corrupted checkpoint: {problem}")


def _attach_tokenizer(model, directory: Path) -> None:
    tokenizer = load_tokenizer(directory)
    if tokenizer is None:
        return
    vocab = model.config.text.vocab_size
    if tokenizer.vocab_size > vocab:
        raise CheckpointError(f"{directory}: the tokenizer has {tokenizer.vocab_size} tokens but the model's "
                              f"vocabulary holds {vocab}: the tokenizer belongs to another model")
    model.tokenizer = tokenizer


def load_weights_into(model, weights: str | Path, sha256: Optional[str] = None) -> None:
    """Strictly load a checkpoint directory, weights file or URL into an existing model."""
    path = Path(download(str(weights), sha256)) if is_url(weights) else Path(weights)
    if str(weights).endswith((".tar.gz", ".tgz", ".zip")):
        path = fetch_directory(str(weights), sha256)
    if path.is_dir():
        _verify_manifest(path)
        file = find_weights(path)
        load_state_strict(model, read_weights(file), str(file))
        _attach_tokenizer(model, path)
    else:
        load_state_strict(model, read_weights(path), str(path))


def resolve_pretrained(entry_weights) -> Path:
    if entry_weights.url is None:
        raise CheckpointError("this entry's weights have no URL")
    if entry_weights.url.endswith((".tar.gz", ".tgz", ".zip")):
        return fetch_directory(entry_weights.url, entry_weights.sha256)
    return download(entry_weights.url, entry_weights.sha256)
