"""babelzoo: multilingual, multimodal and knowledge-enhanced encoders, composed from parts and
pre-trained on one mixed-precision trainer.

    >>> import babelzoo
    >>> babelzoo.list_models("xlm*")
    ['xlm_base', 'xlm_tiny', 'xlmr_base', 'xlmr_tiny']
    >>> model = babelzoo.create_model("xlmr_tiny")

Attributes load on first use, so ``import babelzoo`` stays fast.
"""

from __future__ import annotations

from ._lazy import lazy_getattr

__version__ = "0.1.0"

_API = {
    "create_model": "babelzoo.zoo.factory",
    "list_models": "babelzoo.zoo.factory",
    "register_model": "babelzoo.zoo.entries",
    "model_config": "babelzoo.zoo.factory",
    "PretrainedWeights": "babelzoo.zoo.entries",
    "from_pretrained": "babelzoo.zoo.pretrained",
    "CheckpointError": "babelzoo.errors",
    "BabelModel": "babelzoo.zoo.model",
    "EncoderOutput": "babelzoo.zoo.model",
    "Seq2SeqModel": "babelzoo.zoo.families.seq2seq.model",
    "Seq2SeqOutput": "babelzoo.zoo.families.seq2seq.model",
    "Seq2SeqConfig": "babelzoo.zoo.families.seq2seq.config",
    "EncoderDecoderConfig": "babelzoo.zoo.config",
    "ModelConfig": "babelzoo.zoo.model_config",
    "EncoderConfig": "babelzoo.zoo.config",
    "TransformerConfig": "babelzoo.zoo.families.transformer.config",
    "VisionConfig": "babelzoo.zoo.model_config",
    "AudioConfig": "babelzoo.zoo.model_config",
    "KnowledgeConfig": "babelzoo.zoo.model_config",
    "FusionConfig": "babelzoo.zoo.model_config",
    "ConfigError": "babelzoo.errors",
    "Tokenizer": "babelzoo.datasets.tokenizer",
    "load_tokenizer": "babelzoo.datasets.tokenizer",
    "Registry": "babelzoo.registry",
    "SentencePieceTokenizer": "babelzoo.datasets.spm",
    "WordPieceTokenizer": "babelzoo.datasets.wordpiece",
    "UnigramTokenizer": "babelzoo.datasets.unigram",
    "BPETokenizer": "babelzoo.datasets.bpe",
    "gettext_corpus": "babelzoo.offline.catalogs",
    "Mixture": "babelzoo.objectives.mixture",
    "build_objective": "babelzoo.objectives.mixture",
    "Trainer": "babelzoo.train.trainer",
    "TrainConfig": "babelzoo.train.config",
    "load_recipe": "babelzoo.train.config",
}

__all__ = ["__version__", *_API]


__getattr__ = lazy_getattr(__name__, _API, relative=False)


def __dir__() -> list[str]:
    return sorted(__all__)
