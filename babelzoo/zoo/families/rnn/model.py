"""The RNN family's modules: token embeddings, a bidirectional LSTM or GRU, the MLM head
(config and entries: :mod:`babelzoo.zoo.families.rnn.config`)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ....errors import InputError
from ...family import TextParts
from ...layers import MLMHead, TokenEmbeddings
from .config import RNNConfig


class RNNEncoder(nn.Module):
    """LSTM or GRU over the embeddings; bidirectional RNNs split ``hidden_size`` between the two
    directions so the output width is always ``hidden_size``. Padding is packed away, so padded
    and unpadded copies of a sentence give the same states on their real tokens."""

    # Why :func:`babelzoo.deploy.export_onnx` refuses this encoder.
    not_exportable = ("torch.export cannot trace its packed sequences, whose batch size per step depends on the "
                      "lengths in the batch")

    def __init__(self, config: RNNConfig):
        super().__init__()
        self.config = config
        directions = 2 if config.bidirectional else 1
        rnn = nn.LSTM if config.cell == "lstm" else nn.GRU
        self.rnn = rnn(config.hidden_size, config.hidden_size // directions, num_layers=config.num_layers,
                       batch_first=True, bidirectional=config.bidirectional,
                       dropout=config.dropout if config.num_layers > 1 else 0.0)

    def forward(self, x: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, *,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                output_hidden_states: bool = False,
                output_positions: Optional[torch.Tensor] = None,
                unpad: bool = False,
                position_ids: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, ...]]]:
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


def build(config: RNNConfig, knowledge=None) -> TextParts:
    # ``knowledge`` asks for nothing here: the config's check_knowledge refuses fusion layers.
    embeddings = TokenEmbeddings(
        config.vocab_size, config.hidden_size, config.hidden_size, config.pad_token_id,
        positions=config.position_embedding, max_positions=config.max_positions,
        segment_vocab_size=config.segment_vocab_size, num_languages=config.num_languages,
        norm="layer" if config.embedding_layer_norm else None, eps=config.layer_norm_eps, dropout=config.dropout)
    lm_head = (MLMHead(config.hidden_size, config.hidden_size, config.vocab_size, config.activation,
                       config.layer_norm_eps) if config.mlm_head else None)
    return TextParts(embeddings, RNNEncoder(config), lm_head)
