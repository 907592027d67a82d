"""Architectures: configs, layers, encoders, the model registry and checkpoints."""

from .config import AudioConfig, ConfigError, FusionConfig, KnowledgeConfig, ModelConfig, TextConfig, VisionConfig
from .factory import MODELS, PretrainedWeights, create_model, list_models, model_config, register_model
from .model import BabelModel, EncoderOutput

__all__ = ["AudioConfig", "BabelModel", "ConfigError", "EncoderOutput", "FusionConfig", "KnowledgeConfig",
           "MODELS", "ModelConfig", "PretrainedWeights", "TextConfig", "VisionConfig", "create_model",
           "list_models", "model_config", "register_model"]
