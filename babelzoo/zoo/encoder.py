"""Sequence encoders: a Transformer stack (post/pre-LN, ALBERT sharing, T5/NEZHA relative
positions) and bidirectional RNNs (LSTM, GRU)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..errors import InputError
from .config import ConfigError, TextConfig
from .layers import FeedForward, Packing, TransformerBlock, build_attention_mask, select_rows
from .positions import NezhaRelativePositions, T5RelativeBias


class TransformerEncoder(nn.Module):
    def __init__(self, config: TextConfig):
        super().__init__()
        self.config = config

        def block() -> TransformerBlock:
            return TransformerBlock(config.hidden_size, config.num_heads, config.intermediate_size,
                                    config.activation, config.dropout, config.attention_dropout,
                                    config.layer_norm_eps, pre_norm=config.norm_position == "pre")

        # ALBERT shares one block across all layers; the forward pass still runs num_layers times.
        self.layers = nn.ModuleList([block()] if config.share_layers else [block() for _ in range(config.num_layers)])
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

    def forward(self, x: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                output_hidden_states: bool = False,
                output_positions: Optional[torch.Tensor] = None,
                unpad: bool = False) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, ...]]]:
        """``output_positions`` (bool [B, L]): return ``x[output_positions]`` ([N, H]) only, and
        run the last layer's queries, feed-forward and norms at those positions alone.
        ``unpad``: run projections and feed-forward layers on the real tokens only
        (:class:`~babelzoo.zoo.layers.Packing`); states at padding positions are then zeros."""
        length = x.shape[1]
        mask = build_attention_mask(attention_mask, visible, causal or self.config.causal, length)
        bias = self.t5_bias(length) if self.t5_bias is not None else None
        relative = self.nezha(length) if self.nezha is not None else None
        last = self.config.num_layers - 1
        # Packing needs row-wise layers: ERNIE's entity fusion mixes tokens with their entities.
        packing = (Packing(attention_mask) if unpad and attention_mask is not None
                   and all(isinstance(self.layer(i).ffn, FeedForward) for i in range(last + 1)) else None)
        rows = valid = None
        if output_positions is not None:
            if output_hidden_states:
                raise InputError("output_positions returns the selected positions of the last layer only; "
                                 "it cannot be combined with output_hidden_states")
            # Row-wise pruning needs a feed-forward that sees each position alone (not ERNIE's
            # entity fusion) and no per-pair table (NEZHA); otherwise the full layer runs.
            if (packing is None and self.nezha is None and isinstance(self.layer(last).ffn, FeedForward)
                    and bool(output_positions.any())):
                rows, valid = select_rows(output_positions)
        if packing is not None:
            x = packing.pack(x)
        states = [x] if output_hidden_states else None
        for i in range(self.config.num_layers):
            x = self.layer(i)(x, mask, bias, relative, rows if i == last else None, packing)
            if states is not None:
                states.append(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
            if states is not None:
                states[-1] = x
        if packing is not None:
            if output_positions is not None:  # the selected real tokens, in row-major order
                return x[output_positions.reshape(-1)[packing.index].bool()], None
            return packing.unpack(x), tuple(packing.unpack(s) for s in states) if states is not None else None
        if output_positions is not None:
            x = x[valid] if rows is not None else x[output_positions.bool()]
        return x, tuple(states) if states is not None else None


class RNNEncoder(nn.Module):
    """LSTM or GRU over the embeddings; bidirectional RNNs split ``hidden_size`` between the two
    directions so the output width is always ``hidden_size``. Padding is packed away, so padded
    and unpadded copies of a sentence give the same states on their real tokens."""

    def __init__(self, config: TextConfig):
        super().__init__()
        self.config = config
        directions = 2 if config.bidirectional else 1
        if config.hidden_size % directions:
            raise ConfigError(f"TextConfig.hidden_size={config.hidden_size} must be even for a bidirectional RNN")
        rnn = nn.LSTM if config.encoder == "lstm" else nn.GRU
        self.rnn = rnn(config.hidden_size, config.hidden_size // directions, num_layers=config.num_layers,
                       batch_first=True, bidirectional=config.bidirectional,
                       dropout=config.dropout if config.num_layers > 1 else 0.0)

    def forward(self, x: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                output_hidden_states: bool = False,
                output_positions: Optional[torch.Tensor] = None,
                unpad: bool = False) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, ...]]]:
        if visible is not None or causal:
            raise InputError("RNN encoders take no visibility matrix or causal mask; use a Transformer encoder")
        length = x.shape[1]
        if attention_mask is None:
            out, _ = self.rnn(x)
        else:
            lengths = attention_mask.long().sum(dim=1).clamp(min=1).cpu()
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, _ = self.rnn(packed)
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=length)
        states = (x, out) if output_hidden_states else None
        return (out if output_positions is None else out[output_positions.bool()]), states


def build_encoder(config: TextConfig) -> nn.Module:
    return TransformerEncoder(config) if config.encoder == "transformer" else RNNEncoder(config)
