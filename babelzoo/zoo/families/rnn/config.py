"""The RNN family's config and zoo entries: bidirectional LSTM and GRU encoders over token
embeddings (:mod:`babelzoo.zoo.families.rnn.model` holds the modules), cheap baselines for the same
objectives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from ...config import ConfigError, EncoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class RNNConfig(EncoderConfig):
    """An LSTM or GRU (``cell``) stack of ``num_layers`` over the token embeddings (positions
    ``position_embedding``: an RNN needs none). A bidirectional RNN splits ``hidden_size``
    between its two directions, so the output is always ``hidden_size`` wide. ``num_heads`` and
    ``intermediate_size`` size the MLM head's defaults only.

    ``pooling`` fixes how the architecture's sentence vector is read off the last layer
    (``"max"``: InferSent's max over time; ``"final"``: the states the directions end in, as
    skip-thoughts reads them; ``"cls"``, ``"mean"``), for every objective, head and evaluation
    that takes sentence vectors (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`);
    None (the default, and every config written before the field existed) fixes none."""

    family: ClassVar[str] = "rnn"

    cell: str = "lstm"
    bidirectional: bool = True
    position_embedding: str = "none"
    embedding_layer_norm: bool = True
    pooling: Optional[str] = None

    _choices: ClassVar = {**EncoderConfig._choices, "cell": ("lstm", "gru"),
                          "position_embedding": ("learned", "sinusoidal", "none"),
                          "pooling": (None, "cls", "mean", "max", "final")}

    @property
    def sentence_pooling(self) -> Optional[str]:
        return self.pooling

    @property
    def output_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def validate(self) -> None:
        super().validate()
        if self.bidirectional:
            _check(self.hidden_size % 2 == 0, type(self).__name__, "hidden_size", self.hidden_size,
                   "must be even for a bidirectional RNN (each direction gets half)")

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Each direction of each layer: 2·gates·W·(inputs + W) for its input and recurrent
        matmuls (W = width per direction; 4 gates for an LSTM, 3 for a GRU)."""
        directions = 2 if self.bidirectional else 1
        width = self.hidden_size // directions
        gates = 4 if self.cell == "lstm" else 3
        total = 0
        for layer in range(self.num_layers):
            inputs = self.hidden_size if layer == 0 else width * directions
            total += directions * 2 * gates * width * (inputs + width)
        return float(total)

    @classmethod
    def migrate(cls, data: dict[str, Any], where: str) -> dict[str, Any]:
        # Before families, an RNN config was the Transformer's field set with encoder='lstm'|'gru'.
        # Fields of Transformer parts an RNN never built meant nothing and are dropped; the two
        # embedding fields it did read must be at the values this family builds.
        data = dict(data)
        data["cell"] = data.pop("encoder")
        for name in ("relative_attention", "relative_buckets", "relative_max_distance", "norm_position",
                     "share_layers", "causal"):
            data.pop(name, None)
        for name, default in (("embedding_size", None), ("position_offset", 0)):
            value = data.pop(name, default)
            if value != default:
                raise ConfigError(f"{where or 'text'}: {name}={value!r}: the rnn family has no such field "
                                  f"(its embeddings are hidden_size wide, positions count from 0)")
        return data


FAMILY = register_family(TextFamily("rnn", RNNConfig, build="babelzoo.zoo.families.rnn.model:build",
                                           encoder="babelzoo.zoo.families.rnn.model:RNNEncoder"))


@register_model
def bilstm_base() -> ModelConfig:
    """A 2-layer bidirectional LSTM encoder (ELMo-style, Peters et al. 2018) over learned token
    embeddings; a cheap baseline for the same objectives."""
    return ModelConfig(text=RNNConfig(cell="lstm", num_layers=2, segment_vocab_size=0))


@register_model
def bilstm_tiny() -> ModelConfig:
    """The bidirectional LSTM baseline at tiny size (2 layers, width 128), for tests and demos."""
    return bilstm_base().override(**TINY)


@register_model
def bigru_tiny() -> ModelConfig:
    """A bidirectional GRU (Cho et al. 2014) encoder at tiny size (2 layers, width 128)."""
    return bilstm_base().override(**TINY, cell="gru")


@register_model
def infersent_base() -> ModelConfig:
    """InferSent's sentence encoder (Conneau et al. 2017, "Supervised Learning of Universal
    Sentence Representations from Natural Language Inference Data"): one bidirectional LSTM
    layer of 2048 units per direction over the word vectors (no LayerNorm between them) and
    max pooling over time, u = max_t [→h_t; ←h_t] (4096 wide). The paper trains it on NLI pairs
    through [u; v; |u − v|; u ∗ v] and an MLP (the ``infersent`` objective does so on translation
    pairs); every objective, head and evaluation reads its sentence vectors by max pooling. The
    paper's fixed 300-d GloVe inputs are replaced by learned embeddings as wide as the LSTM; the
    family's MLM head is kept, so token-level objectives train it too."""
    return ModelConfig(text=RNNConfig(cell="lstm", num_layers=1, hidden_size=4096, num_heads=16, bidirectional=True,
                                      pooling="max", pooler=False, embedding_layer_norm=False,
                                      segment_vocab_size=0))


@register_model
def infersent_tiny() -> ModelConfig:
    """The InferSent encoder at tiny size: one BiLSTM layer of 64 units per direction (width
    128) with max pooling over time, for tests and demos."""
    return infersent_base().override(**{**TINY, "num_layers": 1})
