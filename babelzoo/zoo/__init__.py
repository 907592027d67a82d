"""Architectures: configs, layers, encoders, the model registry and checkpoints.

Names load on first use so that listing the registry (``hubconf.py``) does not import torch."""

from __future__ import annotations

from .._lazy import lazy_getattr

_API = {
    **dict.fromkeys(["AudioConfig", "ConfigError", "EncoderConfig", "FusionConfig", "KnowledgeConfig", "ModelConfig",
                     "VisionConfig"], "config"),
    "TextConfig": "transformer_config",
    **dict.fromkeys(["MODELS", "PretrainedWeights", "create_model", "list_models", "model_config",
                     "register_model", "build_model"], "factory"),
    **dict.fromkeys(["BabelModel", "EncoderOutput"], "model"),
}

__all__ = sorted(_API)


__getattr__ = lazy_getattr(__name__, _API)
