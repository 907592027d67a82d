"""Architectures: configs, layers, encoders, the model registry and checkpoints.

Names load on first use so that listing the registry (``hubconf.py``) does not import torch."""

from __future__ import annotations

import importlib

_API = {
    **dict.fromkeys(["AudioConfig", "ConfigError", "FusionConfig", "KnowledgeConfig", "ModelConfig", "TextConfig",
                     "VisionConfig"], "config"),
    **dict.fromkeys(["MODELS", "PretrainedWeights", "create_model", "list_models", "model_config",
                     "register_model", "build_model"], "factory"),
    **dict.fromkeys(["BabelModel", "EncoderOutput"], "model"),
}

__all__ = sorted(_API)


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'babelzoo.zoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
