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
    "register_model": "babelzoo.zoo.factory",
    "model_config": "babelzoo.zoo.factory",
    "PretrainedWeights": "babelzoo.zoo.factory",
    "from_pretrained": "babelzoo.zoo.pretrained",
    "CheckpointError": "babelzoo.zoo.pretrained",
    "BabelModel": "babelzoo.zoo.model",
    "EncoderOutput": "babelzoo.zoo.model",
    "Seq2SeqModel": "babelzoo.zoo.seq2seq",
    "Seq2SeqOutput": "babelzoo.zoo.seq2seq",
    "Seq2SeqConfig": "babelzoo.zoo.seq2seq_config",
    "EncoderDecoderConfig": "babelzoo.zoo.config",
    "ModelConfig": "babelzoo.zoo.config",
    "EncoderConfig": "babelzoo.zoo.config",
    "TextConfig": "babelzoo.zoo.transformer_config",
    "VisionConfig": "babelzoo.zoo.config",
    "AudioConfig": "babelzoo.zoo.config",
    "KnowledgeConfig": "babelzoo.zoo.config",
    "FusionConfig": "babelzoo.zoo.config",
    "ConfigError": "babelzoo.zoo.config",
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
