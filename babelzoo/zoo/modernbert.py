"""The ModernBERT family's modules, composed from :mod:`babelzoo.zoo.layers`: token embeddings
with a bias-free LayerNorm, a stack of bias-free pre-LN GeGLU blocks whose attention rotates
queries and keys (rotary positions) and alternates global and sliding-window layers, a final
norm, and the bias-free MLM head. Config and entries: :mod:`babelzoo.zoo.modernbert_config`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .family import TextParts
from .layers import (
    LayerStack,
    MLMHead,
    Packing,
    RotaryEmbedding,
    TokenEmbeddings,
    TransformerBlock,
    build_attention_mask,
    make_norm,
    sliding_window_visibility,
)
from .modernbert_config import ModernBertConfig


@dataclass
class AttentionKind:
    """What the layers of one attention kind (global or local) read in one forward pass."""

    mask: Optional[torch.Tensor]
    rotary: tuple[torch.Tensor, torch.Tensor]


@dataclass
class StackState:
    global_: AttentionKind
    local: AttentionKind


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
            AttentionKind(build_attention_mask(attention_mask, visible, causal, length, device),
                          self.global_rotary(position_ids)),
            AttentionKind(build_attention_mask(attention_mask, local_visible, causal, length, device),
                          self.local_rotary(position_ids)))

    def run(self, x: torch.Tensor, state: StackState, start: int = 0, end: Optional[int] = None,
            rows: Optional[torch.Tensor] = None, packing: Optional[Packing] = None,
            states: Optional[list[torch.Tensor]] = None) -> torch.Tensor:
        end = self.num_layers if end is None else end
        for i in range(start, end):
            kind = state.global_ if self.config.is_global(i) else state.local
            x = self.layers[i](x, kind.mask, None, None, None, packing, kind.rotary)
            if states is not None:
                states.append(x)
        return x

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
