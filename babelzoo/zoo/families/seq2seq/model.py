"""The encoder–decoder family's modules: BART, mBART and T5 composed from
:mod:`babelzoo.zoo.layers` (encoder blocks, decoder blocks with cross-attention, the key/value
cache, T5 buckets). Its config and entries are in :mod:`babelzoo.zoo.families.seq2seq.config`.

An encoder–decoder is not an encoder with parts (:class:`~babelzoo.zoo.family.TextParts`): it
takes two sequences and returns next-token logits, and it generates. So the family builds its
own model class, :class:`Seq2SeqModel`, which saves and loads through the same checkpoint code
as every other model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ....errors import ConfigError, InputError
from ...model_config import ModelConfig
from ...generation import Generates, GenerationSettings
from ...layers import (
    DecoderBlock,
    DecoderLayerState,
    Dropout,
    KVCache,
    LayerStack,
    LayerState,
    SelfAttention,
    T5RelativeBias,
    TransformerBlock,
    build_attention_mask,
    init_weights,
    make_norm,
)
from ...layers.masks import check_mask_shapes
from ...checkpoint_io import Checkpointed
from ...sentences import EncoderDecoderReadsText, encode_or_states
from .config import Seq2SeqConfig


@dataclass
class Seq2SeqOutput:
    """``logits`` [B, T, V] of the next target token at each decoder position;
    ``encoder_last_hidden`` [B, S, H]; ``last_hidden`` [B, T, H], the decoder's output;
    ``encoder_mask`` [B, S] (1 = real source token)."""

    logits: torch.Tensor
    encoder_last_hidden: torch.Tensor
    last_hidden: torch.Tensor
    encoder_mask: Optional[torch.Tensor] = None


class _Stack(nn.Module):
    """What the encoder and the decoder share: the embedding of looked-up word vectors
    (×√H when scaled, + learned positions, LayerNorm, dropout) and the final norm."""

    def __init__(self, config: Seq2SeqConfig, causal: bool, name: str):
        super().__init__()
        self.config = config
        self.name = name
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        self.position = (nn.Embedding(config.max_positions + config.position_offset, config.hidden_size)
                         if config.position_embedding == "learned" else None)
        self.relative_bias = (T5RelativeBias(config.num_heads, config.relative_buckets, config.relative_max_distance,
                                             bidirectional=not causal)
                              if config.relative_attention == "t5" else None)
        self.embedding_norm = (make_norm(config.norm, config.hidden_size, config.layer_norm_eps)
                               if config.embedding_layer_norm else None)
        self.final_norm = (make_norm(config.norm, config.hidden_size, config.layer_norm_eps)
                           if config.final_layer_norm else None)
        self.dropout = Dropout(config.dropout)

    def embed(self, words: torch.Tensor, start: int = 0) -> torch.Tensor:
        """``words`` [B, L, H] (looked-up word vectors) at positions ``start .. start+L-1``."""
        end = start + words.shape[1]
        if end > self.config.max_positions:
            raise InputError(f"the {self.name} input has {end} positions but the model holds "
                             f"{self.config.max_positions} (Seq2SeqConfig.max_positions); shorten it")
        x = words * self.embed_scale if self.embed_scale != 1.0 else words
        if self.position is not None:
            offset = self.config.position_offset
            x = x + self.position.weight[start + offset:end + offset]
        if self.embedding_norm is not None:
            x = self.embedding_norm(x)
        return self.dropout(x)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.dropout(x)


@dataclass
class DecoderState:
    """One decoder pass's inputs to every layer: self-attention's mask and bias, the encoder's
    keys and values for each layer (``memory``) with their key mask, and the cache (None: a
    teacher-forced pass)."""

    mask: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]
    memory: list[tuple[torch.Tensor, torch.Tensor]]
    memory_mask: Optional[torch.Tensor]
    cache: Optional[KVCache]


class Seq2SeqEncoder(_Stack, LayerStack):
    """Bidirectional encoder blocks over the source."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__(config, causal=False, name="source")
        self.num_layers = config.num_layers
        self.layers = nn.ModuleList([self._block(config) for _ in range(config.num_layers)])

    @staticmethod
    def _block(c: Seq2SeqConfig) -> TransformerBlock:
        attention = SelfAttention(c.hidden_size, c.num_heads, c.attention_dropout, bias=c.bias,
                                  scale=c.attention_scale)
        return TransformerBlock(c.hidden_size, c.num_heads, c.intermediate_size, c.activation, c.dropout,
                                c.attention_dropout, c.layer_norm_eps, pre_norm=c.norm_position == "pre", bias=c.bias,
                                norm=c.norm, gated=c.gated, attention=attention)

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None) -> LayerState:
        bias = self.relative_bias(length) if self.relative_bias is not None else None
        return LayerState(mask=build_attention_mask(attention_mask, visible, causal, length), bias=bias)

    def forward(self, words: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """The source's states [B, S, H] from its word vectors ``words`` [B, S, H]."""
        return self.finish(self.run(self.embed(words), self.prepare(attention_mask, words.shape[1])))


class Seq2SeqDecoder(_Stack, LayerStack):
    """Causal decoder blocks with cross-attention over the encoder's output; with a
    :class:`~babelzoo.zoo.layers.KVCache`, one call runs the new positions only."""

    def __init__(self, config: Seq2SeqConfig):
        super().__init__(config, causal=True, name="target")
        c = config
        self.num_layers = c.num_decoder_layers
        self.layers = nn.ModuleList([
            DecoderBlock(c.hidden_size, c.num_heads, c.intermediate_size, c.activation, c.dropout, c.attention_dropout,
                         c.layer_norm_eps, pre_norm=c.norm_position == "pre", bias=c.bias, norm=c.norm, gated=c.gated,
                         scale=c.attention_scale)
            for _ in range(c.num_decoder_layers)])

    def memory(self, encoded: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Every layer's cross-attention keys and values of the encoder's output (once per source)."""
        return [layer.cross_attention.memory(encoded) for layer in self.layers]

    def new_cache(self, batch: int, max_length: int, dtype: torch.dtype, device) -> KVCache:
        first = self.layers[0].attention
        return KVCache(self.num_layers, batch, first.num_heads, max_length, first.head_dim, dtype, device)

    def forward(self, words: torch.Tensor, memory: list[tuple[torch.Tensor, torch.Tensor]],
                memory_mask: Optional[torch.Tensor], attention_mask: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None) -> torch.Tensor:
        """``words`` [B, T, H]: the target's word vectors (with ``cache``: the new positions only,
        after ``cache.length`` cached ones); ``attention_mask`` [B, T] marks real target tokens
        (without a cache only); ``memory_mask`` [B, 1, 1, S] the source's key mask."""
        start = 0 if cache is None else cache.length
        x = self.embed(words, start)
        state = self.prepare(attention_mask, words.shape[1], memory=memory, memory_mask=memory_mask, cache=cache)
        x = self.run(x, state)
        if cache is not None:
            cache.advance(words.shape[1])
        return self.finish(x)

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = True,
                position_ids: Optional[torch.Tensor] = None, *,
                memory: list[tuple[torch.Tensor, torch.Tensor]], memory_mask: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None) -> DecoderState:
        """The state of a pass over ``length`` new positions (after ``cache.length`` cached ones)
        that reads the encoder's ``memory``; the decoder attends causally."""
        device = memory[0][0].device
        start = 0 if cache is None else cache.length
        if cache is None:
            mask = build_attention_mask(attention_mask, visible, True, length, device)
        else:
            if attention_mask is not None:
                raise InputError("a cached decoder step takes no target attention mask (decoding has no padding)")
            # query start+i sees keys 0 .. start+i; one new position sees every cached key
            keys = torch.arange(start + length, device=device)
            queries = start + torch.arange(length, device=device)
            mask = None if length == 1 else (keys[None, :] <= queries[:, None])[None, None]
        bias = (self.relative_bias(length, start + length, offset=start)
                if self.relative_bias is not None else None)
        return DecoderState(mask, bias, memory, memory_mask, cache)

    def layer_state(self, state: DecoderState, index: int, rows, packing) -> DecoderLayerState:
        cache = None if state.cache is None else state.cache.layer(index)
        return DecoderLayerState(mask=state.mask, bias=state.bias, memory=state.memory[index],
                                 memory_mask=state.memory_mask, cache=cache)


def key_mask(attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """[B, S] (1 = real token) → the [B, 1, 1, S] bool key mask of cross-attention, or None."""
    return build_attention_mask(attention_mask)


class Seq2SeqModel(EncoderDecoderReadsText, Generates, Checkpointed, nn.Module):
    """A Transformer encoder–decoder (BART, mBART, T5). Build one with
    :func:`babelzoo.create_model`::

        model = babelzoo.create_model("bart_tiny", vocab_size=1000)
        out = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt_in)
        out.logits            # [B, T, 1000]: the next target token at each position
        ids = model.generate(src, attention_mask=src_mask, max_new_tokens=20, num_beams=4)
        vectors = model.encode(["Hello", "Bonjour"])   # with a tokenizer: the encoder's states, mean-pooled

    The word embedding (``word``) is shared by the encoder, the decoder and, with
    ``tie_word_embeddings``, the LM head.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        text = config.text
        if not isinstance(text, Seq2SeqConfig):
            raise ConfigError(f"Seq2SeqModel needs a Seq2SeqConfig text part, got {type(text).__name__}")
        for part in ("vision", "audio", "knowledge", "head"):
            if getattr(config, part) is not None:
                raise ConfigError(f"ModelConfig.{part}: an encoder–decoder ({config.architecture!r}) has no {part} part")
        self.config = config
        generator = torch.Generator().manual_seed(int(torch.randint(0, 2 ** 62, ())))
        self.word = nn.Embedding(text.vocab_size, text.hidden_size, padding_idx=text.pad_token_id)
        self.encoder = Seq2SeqEncoder(text)
        self.decoder = Seq2SeqDecoder(text)
        self.lm_head = nn.Linear(text.hidden_size, text.vocab_size, bias=False)
        if text.logits_bias:
            self.register_buffer("final_logits_bias", torch.zeros(1, text.vocab_size))
        else:
            self.final_logits_bias = None
        for module in self.modules():
            init_weights(module, text.init_std, generator)
        self.tie_weights()

    def tie_weights(self) -> None:
        if self.config.text.tie_word_embeddings:
            self.lm_head.weight = self.word.weight

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.word

    # --- forward -------------------------------------------------------------------------------
    def encode(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, **options):
        """The encoder's output [B, S, H] for source ids [B, S]. Given sentences (a str or a list
        of str) instead, their vectors, with :meth:`ReadsText.encode
        <babelzoo.zoo.sentences.ReadsText.encode>`'s keyword options."""
        vectors = encode_or_states(self, input_ids, attention_mask, options)
        if vectors is not None:
            return vectors
        check_mask_shapes(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = self.default_mask(input_ids)
        return self.encoder(self.word(input_ids), attention_mask)

    def default_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        return input_ids.ne(self.config.text.pad_token_id).long()

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits of decoder states: W·h (+ BART's bias); T5 scales h by H^-1/2."""
        if self.config.text.scale_decoder_output:
            hidden = hidden * self.config.text.hidden_size ** -0.5
        bias = None if self.final_logits_bias is None else self.final_logits_bias[0]
        return F.linear(hidden, self.lm_head.weight, bias)  # the bias added inside the matmul: one pass

    def forward(self, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                decoder_input_ids: Optional[torch.Tensor] = None,
                decoder_attention_mask: Optional[torch.Tensor] = None,
                encoder_last_hidden: Optional[torch.Tensor] = None) -> Seq2SeqOutput:
        """Teacher-forced pass: ``input_ids`` [B, S] (source; ``attention_mask`` 1 = real token,
        default: not pad) and ``decoder_input_ids`` [B, T] (the target shifted right behind the
        start token; ``decoder_attention_mask`` 1 = real token) → :class:`Seq2SeqOutput` with the
        logits of each next target token. ``encoder_last_hidden`` [B, S, H] reuses an encoded
        source instead of ``input_ids``."""
        if decoder_input_ids is None:
            raise InputError(f"model {self.config.architecture!r} needs decoder_input_ids (the target shifted right "
                             f"behind the start token; see babelzoo.zoo.families.seq2seq.model.shift_right)")
        check_mask_shapes(decoder_input_ids, decoder_attention_mask,
                          names=("decoder_input_ids", "decoder_attention_mask"))
        if encoder_last_hidden is None:
            if input_ids is None:
                raise InputError("give input_ids (the source) or encoder_last_hidden")
            if attention_mask is None:
                attention_mask = self.default_mask(input_ids)
            encoder_last_hidden = self.encode(input_ids, attention_mask)
        elif attention_mask is not None:
            check_mask_shapes(encoder_last_hidden, attention_mask, names=("encoder_last_hidden", "attention_mask"))
        memory = self.decoder.memory(encoder_last_hidden)
        hidden = self.decoder(self.word(decoder_input_ids), memory, key_mask(attention_mask), decoder_attention_mask)
        return Seq2SeqOutput(self.logits(hidden), encoder_last_hidden, hidden, attention_mask)

    # --- generation ----------------------------------------------------------------------------
    def decoding(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, settings: GenerationSettings):
        """The step and reorder functions of :func:`~babelzoo.zoo.generation.generate` for a
        source batch: the source is encoded once, decoding keeps a key/value cache."""
        encoded = self.encode(input_ids, attention_mask)
        rows = input_ids.shape[0] * settings.num_beams
        cache = self.decoder.new_cache(rows, settings.max_length, encoded.dtype, encoded.device)
        return _Steps(self, self.decoder.memory(encoded), attention_mask, settings.num_beams, cache), cache.reorder


class _Steps:
    """One decoding step of every row (``beams`` rows per source, a source's beams together)
    with the key/value cache. Every beam of a source reads the same source keys and values,
    projected once per source; the first step, the same for every beam of a source (they all
    hold the start token), runs once per source and fills each beam's cache."""

    def __init__(self, model: Seq2SeqModel, memory: list[tuple[torch.Tensor, torch.Tensor]],
                 source_mask: torch.Tensor, beams: int, cache: KVCache):
        self.model, self.beams, self.cache = model, beams, cache
        self.source_memory, self.source_mask = memory, key_mask(source_mask)
        self.memory, self.mask = memory, self.source_mask
        if beams > 1:
            self.memory = [(k.repeat_interleave(beams, dim=0), v.repeat_interleave(beams, dim=0)) for k, v in memory]
            self.mask = key_mask(source_mask.repeat_interleave(beams, dim=0))

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        model = self.model
        if self.beams > 1 and self.cache.length == 0:
            first = model.decoder.new_cache(tokens.shape[0] // self.beams, tokens.shape[1], self.cache.keys.dtype,
                                            tokens.device)
            hidden = model.decoder(model.word(tokens[::self.beams]), self.source_memory, self.source_mask,
                                   cache=first)
            self.cache.extend_repeated(first, self.beams)
            return model.logits(hidden[:, -1]).repeat_interleave(self.beams, dim=0)
        hidden = model.decoder(model.word(tokens), self.memory, self.mask, cache=self.cache)
        return model.logits(hidden[:, -1])


def shift_right(labels: torch.Tensor, start_token_id: int, pad_token_id: int) -> torch.Tensor:
    """Decoder inputs for teacher forcing: ``labels`` [B, T] shifted one position right behind
    ``start_token_id``, ignored labels (-100) read as padding."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 0] = start_token_id
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted.eq(-100), pad_token_id)


def build(config: Seq2SeqConfig, knowledge=None):
    raise ConfigError("family 'seq2seq' builds a Seq2SeqModel (an encoder–decoder), not an encoder with parts; "
                      "it cannot serve as a text tower or an encoder of another model")


def build_encoder(config: Seq2SeqConfig):
    return build(config)
