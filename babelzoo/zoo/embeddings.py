"""Text embeddings: token + position (learned or sinusoidal) + segment + language (XLM),
LayerNorm, dropout, and ALBERT's factorised projection E → H."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..errors import InputError
from .config import TextConfig
from .dropout import Dropout
from .positions import sinusoidal_table


class TextEmbeddings(nn.Module):
    def __init__(self, config: TextConfig):
        super().__init__()
        self.config = config
        dim = config.embedding_dim
        self.word = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_token_id)
        num_positions = config.max_positions + config.position_offset
        if config.position_embedding == "learned":
            self.position = nn.Embedding(num_positions, dim)
        elif config.position_embedding == "sinusoidal":
            self.register_buffer("position_table", sinusoidal_table(num_positions, dim), persistent=False)
        self.segment = nn.Embedding(config.segment_vocab_size, dim) if config.segment_vocab_size else None
        self.language = nn.Embedding(config.num_languages, dim) if config.num_languages else None
        self.norm = nn.LayerNorm(dim, eps=config.layer_norm_eps) if config.embedding_layer_norm else None
        self.dropout = Dropout(config.dropout)
        self.project = nn.Linear(dim, config.hidden_size) if dim != config.hidden_size else None

    def default_positions(self, input_ids: Optional[torch.Tensor], shape: torch.Size, device) -> torch.Tensor:
        """0..L-1, shifted by ``position_offset``. With an offset (RoBERTa/XLM-R), real tokens
        count from the offset and padding tokens sit at ``offset - 1``, exactly as RoBERTa does."""
        offset = self.config.position_offset
        if offset and input_ids is not None:
            real = input_ids.ne(self.config.pad_token_id).long()
            return real.cumsum(dim=1) * real + (offset - 1)
        return torch.arange(shape[1], device=device).expand(shape[0], -1) + offset

    def forward(self, input_ids: Optional[torch.Tensor] = None,
                position_ids: Optional[torch.Tensor] = None,
                segment_ids: Optional[torch.Tensor] = None,
                language_ids: Optional[torch.Tensor] = None,
                inputs_embeds: Optional[torch.Tensor] = None, project: bool = True) -> torch.Tensor:
        """``inputs_embeds`` ([B, L, E]) replaces the token lookup (CLWR feeds recovered vectors).
        ``position_ids`` count from 0 (TLM restarts them on the second sentence, K-BERT's soft
        positions); a model with a ``position_offset`` (RoBERTa, XLM-R) shifts them itself.
        ``project=False`` returns the E-wide embeddings before ALBERT's E → H projection (an
        ELECTRA generator shares them and applies a projection of its own)."""
        x = self.word(input_ids) if inputs_embeds is None else inputs_embeds
        shape, device = x.shape[:2], x.device
        if self.config.position_embedding != "none":
            limit = self.config.max_positions + self.config.position_offset
            # Default positions never exceed L - 1 + offset, so the shape alone clears them: no
            # device-to-host read of the ids (a GPU sync, a torch.compile graph break) per forward.
            check = position_ids is not None or shape[1] + self.config.position_offset > limit
            if position_ids is None:
                position_ids = self.default_positions(input_ids, shape, device)
            elif self.config.position_offset:
                position_ids = position_ids + self.config.position_offset
            if check and int(position_ids.max()) >= limit:
                raise InputError(f"position id {int(position_ids.max()) - self.config.position_offset} is out of "
                                 f"range: this model has "
                                 f"max_positions={self.config.max_positions}; truncate the input")
            if self.config.position_embedding == "learned":
                x = x + self.position(position_ids)
            else:
                x = x + self.position_table[position_ids].to(x.dtype)
        if self.segment is not None:
            # A single segment embedding (RoBERTa, XLM-R) is added to every token, whatever
            # segment an objective assigns: such a model has no second segment to tell apart.
            one = segment_ids is None or self.segment.num_embeddings == 1
            x = x + (self.segment.weight[0] if one else self.segment(segment_ids))
        if language_ids is not None:
            if self.language is None:
                raise InputError("language_ids given, but this model has no language embeddings "
                                 "(create it with num_languages > 0)")
            x = x + self.language(language_ids)
        if self.norm is not None:
            x = self.norm(x)
        x = self.dropout(x)
        return self.project(x) if project and self.project is not None else x
