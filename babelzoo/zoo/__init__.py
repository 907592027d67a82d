"""Architectures: configs, layers, encoders, the model registry and checkpoints.

Names load on first use so that listing the registry (``hubconf.py``) does not import torch."""

from __future__ import annotations

from .._lazy import lazy_getattr

_API = {
    "ConfigError": "config",
    "EncoderConfig": "config",
    **dict.fromkeys(["AudioConfig", "FusionConfig", "HeadConfig", "KnowledgeConfig", "ModelConfig", "VisionConfig"],
                    "model_config"),
    "TransformerConfig": "families.transformer.config",
    **dict.fromkeys(["MODELS", "PretrainedWeights", "register_model"], "entries"),
    **dict.fromkeys(["create_model", "list_models", "model_config", "build_model"], "factory"),
    **dict.fromkeys(["BabelModel", "EncoderOutput"], "model"),
}

__all__ = sorted(_API)


__getattr__ = lazy_getattr(__name__, _API)
