"""CoVe's family: an attentional LSTM encoder–decoder for translation (McCann et al. 2017, "Learned
in Translation: Contextualized Word Vectors"), whose encoder's states are the contextual word
vectors (:mod:`babelzoo.zoo.families.cove.model` holds the modules)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...config import EncoderDecoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class CoVeConfig(EncoderDecoderConfig):
    """A bidirectional LSTM encoder of ``num_layers`` layers over ``embedding_size``-wide word
    vectors (``hidden_size`` wide: half per direction), and an LSTM decoder of
    ``decoder_layers`` layers, ``hidden_size`` wide, that reads its previous token and its
    previous attentional state (input feeding); its output layer is its own (no tied
    embeddings). ``num_heads`` and ``intermediate_size`` are unused. Ids follow babelzoo's tokenizers: pad 0, start 1, end 2."""

    family: ClassVar[str] = "cove"

    vocab_size: int = 32000
    hidden_size: int = 600
    num_layers: int = 2
    num_heads: int = 1
    intermediate_size: int = 600
    dropout: float = 0.2
    attention_dropout: float = 0.0
    pad_token_id: int = 0
    bos_token_id: int = 1
    decoder_start_token_id: int = 1
    eos_token_id: int = 2
    embedding_size: int = 300
    tie_word_embeddings: bool = False

    _positive: ClassVar = EncoderDecoderConfig._positive + ("embedding_size",)

    def validate(self) -> None:
        super().validate()
        name = type(self).__name__
        _check(self.hidden_size % 2 == 0, name, "hidden_size", self.hidden_size,
               "must be even (each direction of the encoder gets half)")
        _check(not self.tie_word_embeddings, name, "tie_word_embeddings", self.tie_word_embeddings,
               "must be false: CoVe's output layer reads the decoder's states, not word vectors")

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """Each direction of each encoder layer: 2·4 gates·W·(inputs + W), W = hidden_size / 2."""
        width = self.hidden_size // 2
        total = 0
        for layer in range(self.num_layers):
            inputs = self.embedding_size if layer == 0 else self.hidden_size
            total += 2 * 2 * 4 * width * (inputs + width)
        return float(total)


FAMILY = register_family(TextFamily("cove", CoVeConfig, build="babelzoo.zoo.families.cove.model:build",
                                    encoder="babelzoo.zoo.families.cove.model:build", model="babelzoo.zoo.families.cove.model:CoVeModel"))


@register_model
def cove_base() -> ModelConfig:
    """CoVe's MT-LSTM (McCann et al. 2017, "Learned in Translation: Contextualized Word
    Vectors"): a 2-layer bidirectional LSTM encoder (300 per direction) over 300-wide word
    vectors and a 2-layer attentional LSTM decoder with input feeding, trained to translate; the
    encoder's states are contextual word vectors for other tasks."""
    return ModelConfig(text=CoVeConfig())


@register_model
def cove_tiny() -> ModelConfig:
    """CoVe's attentional LSTM encoder–decoder at tiny size (2+2 layers, width 128, word
    vectors 64 wide)."""
    sizes = {k: v for k, v in TINY.items() if k not in ("num_heads", "intermediate_size")}
    return cove_base().override(**sizes, embedding_size=64)
