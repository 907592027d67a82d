"""The Transformer family's modules: token embeddings, the block stack (post/pre-LN, ALBERT
sharing, T5/NEZHA relative positions) and the MLM head, composed from
:mod:`babelzoo.zoo.layers`. Its config and entries are in
:mod:`babelzoo.zoo.families.transformer.config`."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ...model_config import KnowledgeConfig
from ...family import TextParts
from ...layers import (
    LayerStack,
    LayerState,
    MLMHead,
    NezhaRelativePositions,
    Packing,
    T5RelativeBias,
    TokenEmbeddings,
    TransformerBlock,
    build_attention_mask,
)
from ...layers.entities import EntityFusion
from ...layers.knn_attention import KNNAttention
from .config import TransformerConfig


class TransformerEncoder(LayerStack):
    """The block stack; with ``entities``, the layers in its ``fusion_layers`` are ERNIE
    aggregators (their feed-forward fuses the entity stream); the config's ``memory_layers``
    attend with kNN-augmented attention."""

    def __init__(self, config: TransformerConfig, entities: Optional[EntityFusion] = None):
        super().__init__()
        self.config = config
        self.num_layers = config.num_layers
        fusion_layers = entities.fusion_layers if entities is not None else ()

        def block(index: int) -> TransformerBlock:
            ffn = (entities.feed_forward(index, config.hidden_size, config.intermediate_size, config.activation,
                                         config.dropout, config.layer_norm_eps) if index in fusion_layers else None)
            attention = (KNNAttention(config.hidden_size, config.num_heads, config.attention_dropout,
                                      top_k=config.memory_top_k, capacity=config.memory_capacity)
                         if index in config.memory_layers else None)
            return TransformerBlock(config.hidden_size, config.heads_in(index), config.intermediate_size,
                                    config.activation, config.dropout, config.attention_dropout,
                                    config.layer_norm_eps, pre_norm=config.norm_position == "pre", ffn=ffn,
                                    attention=attention, head_dim=config.head_dim)

        # ALBERT shares one block across all layers; the forward pass still runs num_layers times.
        self.layers = nn.ModuleList([block(0)] if config.share_layers else [block(i) for i in range(config.num_layers)])
        self.final_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                           if config.norm_position == "pre" else None)
        self.t5_bias = None
        self.nezha = None
        if config.relative_attention == "t5":
            self.t5_bias = T5RelativeBias(config.num_heads, config.relative_buckets, config.relative_max_distance)
        elif config.relative_attention == "nezha":
            self.nezha = NezhaRelativePositions(config.head_dim, config.relative_max_distance)

    def layer(self, index: int) -> TransformerBlock:
        return self.layers[0 if self.config.share_layers else index]

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None) -> LayerState:
        """Every layer's inputs: the SDPA mask and the relative positions (T5 bias, NEZHA table)."""
        mask = build_attention_mask(attention_mask, visible, causal or self.config.causal, length,
                                    next(self.parameters()).device)
        bias = self.t5_bias(length) if self.t5_bias is not None else None
        relative = self.nezha(length) if self.nezha is not None else None
        return LayerState(mask=mask, bias=bias, relative=relative)

    def layer_state(self, state: LayerState, index: int, rows: Optional[torch.Tensor],
                    packing: Optional[Packing]) -> LayerState:
        if rows is None and packing is None:
            return state
        return LayerState(mask=state.mask, bias=state.bias, relative=state.relative, rows=rows, packing=packing)

    def skips(self, index: int, rows: Optional[torch.Tensor]) -> bool:
        # LayerDrop: a dropped layer passes its input on; a call that selects rows runs them all
        return (self.training and self.config.layerdrop > 0 and rows is None and
                bool(torch.rand(()) < self.config.layerdrop))

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        return self.final_norm(x) if self.final_norm is not None else x

    def can_pack(self) -> bool:
        # Packing needs row-wise layers: ERNIE's entity fusion mixes tokens with their entities.
        return all(self.layer(i).row_wise for i in range(self.num_layers))

    def can_select_rows(self) -> bool:
        # Row-wise pruning needs a row-wise last layer and no per-pair table (NEZHA).
        return self.nezha is None and self.layer(self.num_layers - 1).row_wise

    def reset_memory(self) -> None:
        """Empty the memory of every kNN-augmented layer (between independent streams)."""
        for block in self.layers:
            if isinstance(block.attention, KNNAttention):
                block.attention.reset_memory()


def build(config: TransformerConfig, knowledge: Optional[KnowledgeConfig] = None) -> TextParts:
    """The parts of a Transformer-family model; a knowledge part with ERNIE fusion gives the
    entity table and fusion feed-forwards in its ``fusion_layers``."""
    embeddings = TokenEmbeddings(
        config.vocab_size, config.embedding_dim, config.hidden_size, config.pad_token_id,
        positions=config.position_embedding, max_positions=config.max_positions,
        position_offset=config.position_offset, segment_vocab_size=config.segment_vocab_size,
        num_languages=config.num_languages, norm="layer" if config.embedding_layer_norm else None,
        eps=config.layer_norm_eps, dropout=config.dropout)
    lm_head = (MLMHead(config.hidden_size, config.embedding_dim, config.vocab_size, config.activation,
                       config.layer_norm_eps) if config.mlm_head else None)
    entities = None
    if knowledge is not None and knowledge.fusion == "ernie":
        entities = EntityFusion(knowledge.entity_vocab_size, knowledge.entity_dim, knowledge.fusion_layers)
    return TextParts(embeddings, TransformerEncoder(config, entities), lm_head, entities)
