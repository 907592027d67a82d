"""Loading any checkpoint: :func:`from_pretrained` builds the model a babelzoo checkpoint holds,
whatever its class, or converts a Hugging Face one.

The checkpoint files themselves (reading, writing, strict loading) are
:mod:`babelzoo.zoo.checkpoint_io`, below the model classes; their names are also found here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import CheckpointError  # noqa: F401  (raised by what loads; caught by name here too)
from .build import build_model
from .checkpoint_io import (  # noqa: F401  (the checkpoint API, found here as well)
    CONFIG_NAME,
    MANIFEST_NAME,
    PICKLE_NAMES,
    QUANTIZATION_NAME,
    SHARD_OFFSETS_KEY,
    SHARDED_DIR,
    SHARDED_MODEL_PREFIX,
    SHARDED_SHAPES,
    WEIGHTS_NAME,
    Checkpointed,
    check_state,
    find_weights,
    load_checkpoint,
    load_state_strict,
    load_weights_into,
    model_state,
    open_checkpoint,
    read_config,
    read_sharded,
    read_weights,
    replace_directory,
    resolve_pretrained,
    resolve_source,
    save_pretrained,
    save_weights,
    shard_files,
    slice_names,
    tied_keys,
)
from .config import ConfigError
from .convert import import_hf


def from_pretrained(source: str | Path, sha256: Optional[str] = None, weights_only: bool = True, *,
                    revision: Optional[str] = None, cache_dir: str | Path | None = None):
    """Load a model from a checkpoint directory, a Hugging Face directory, the URL of an
    archived checkpoint directory (``.tar.gz``/``.zip``, verified against ``sha256``), or a
    Hugging Face Hub id (``org/name``, at ``revision``: a branch, tag or commit)::

        model = babelzoo.from_pretrained("FacebookAI/xlm-roberta-base")

    A Hub id resolves through ``huggingface_hub``'s cache (``cache_dir``, else ``HF_HUB_CACHE``
    or ``HF_HOME/hub``; nothing is downloaded with ``HF_HUB_OFFLINE=1``), every file is checked
    against its hash (:mod:`babelzoo.zoo.hub_ids`), and a Hugging Face checkpoint converts
    through the interop maps (:mod:`babelzoo.zoo.convert`).

    ``weights_only`` must stay True: babelzoo never unpickles arbitrary objects.
    """
    if not weights_only:
        raise ConfigError("weights_only=False is not supported: checkpoints must not execute code")
    directory, raw = open_checkpoint(source, sha256, revision=revision, cache_dir=cache_dir)
    if "model_type" in raw:  # a Hugging Face directory
        return import_hf(directory)
    return load_checkpoint(directory, raw, build_model)
