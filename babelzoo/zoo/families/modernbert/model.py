"""The ModernBERT family's modules, composed from :mod:`babelzoo.zoo.layers`: token embeddings
with a bias-free LayerNorm, a stack of bias-free pre-LN GeGLU blocks whose attention rotates
queries and keys (rotary positions) and alternates global and sliding-window layers, a final
norm, and the bias-free MLM head. Config and entries: :mod:`babelzoo.zoo.families.modernbert.config`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ...family import TextParts
from ...layers import (
    LayerStack,
    LayerState,
    MLMHead,
    Packing,
    RotaryEmbedding,
    TokenEmbeddings,
    TransformerBlock,
    build_attention_mask,
    make_norm,
    sliding_window_visibility,
)
from .config import ModernBertConfig


@dataclass
class StackState:
    """What the layers of each attention kind (global, local) read in one forward pass: their
    SDPA mask and rotary angles."""

    global_: LayerState
    local: LayerState


class ModernBertEncoder(LayerStack):
    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.num_layers = config.num_layers
        # The first layer reads the embeddings' own norm, so it has no attention norm.
        self.layers = nn.ModuleList(
            TransformerBlock(config.hidden_size, config.num_heads, config.intermediate_size, config.activation,
                             config.attention_dropout, config.attention_dropout, config.layer_norm_eps,
                             pre_norm=True, bias=False, norm_bias=False, gated=True, attention_norm=i > 0,
                             ffn_dropout=config.dropout)
            for i in range(config.num_layers))
        self.final_norm = make_norm("layer", config.hidden_size, config.layer_norm_eps, bias=False)
        self.global_rotary = RotaryEmbedding(config.head_dim, config.global_rope_theta)
        self.local_rotary = RotaryEmbedding(config.head_dim, config.local_rope_theta)

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None) -> StackState:
        device = self.global_rotary.inv_freq.device
        if position_ids is None:
            position_ids = torch.arange(length, device=device)[None]
        window = sliding_window_visibility(length, self.config.local_window // 2, device)
        local_visible = window if visible is None else visible.bool() & window
        return StackState(
            LayerState(mask=build_attention_mask(attention_mask, visible, causal, length, device),
                       rotary=self.global_rotary(position_ids)),
            LayerState(mask=build_attention_mask(attention_mask, local_visible, causal, length, device),
                       rotary=self.local_rotary(position_ids)))

    def layer_state(self, state: StackState, index: int, rows: Optional[torch.Tensor],
                    packing: Optional[Packing]) -> LayerState:
        # ``rows`` never come (can_select_rows is False): every layer computes every position.
        kind = state.global_ if self.config.is_global(index) else state.local
        return kind if packing is None else LayerState(mask=kind.mask, packing=packing, rotary=kind.rotary)

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        return self.final_norm(x)

    def can_select_rows(self) -> bool:
        # Rotary angles are per position; the last layer runs in full and the rows are taken after.
        return False


def build(config: ModernBertConfig, knowledge=None) -> TextParts:
    # ``knowledge`` asks for nothing here: the config's check_knowledge refuses fusion layers.
    embeddings = TokenEmbeddings(config.vocab_size, config.hidden_size, config.hidden_size, config.pad_token_id,
                                 positions="none", segment_vocab_size=config.segment_vocab_size,
                                 num_languages=config.num_languages, norm="layer", norm_bias=False,
                                 eps=config.layer_norm_eps, dropout=config.embedding_dropout)
    lm_head = (MLMHead(config.hidden_size, config.hidden_size, config.vocab_size, config.head_activation,
                       config.layer_norm_eps, dense_bias=False, norm_bias=False) if config.mlm_head else None)
    return TextParts(embeddings, ModernBertEncoder(config), lm_head)
