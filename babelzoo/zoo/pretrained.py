"""Loading any checkpoint: :func:`from_pretrained` builds the model a babelzoo checkpoint holds,
whatever its class, or converts a Hugging Face one.

The checkpoint files themselves (reading, writing, strict loading) are
:mod:`babelzoo.zoo.checkpoint_io`, below the model classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .build import build_model
from .checkpoint_io import load_checkpoint, open_checkpoint
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
    against its hash (:mod:`babelzoo.zoo._hub_ids`), and a Hugging Face checkpoint converts
    through the interop maps (:mod:`babelzoo.zoo.convert`).

    ``weights_only`` must stay True: babelzoo never unpickles arbitrary objects.
    """
    if not weights_only:
        raise ConfigError("weights_only=False is not supported: checkpoints must not execute code")
    directory, raw = open_checkpoint(source, sha256, revision=revision, cache_dir=cache_dir)
    if "model_type" in raw:  # a Hugging Face directory
        return import_hf(directory)
    return load_checkpoint(directory, raw, build_model)
