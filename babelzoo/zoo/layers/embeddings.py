"""Token embeddings: token + position (learned or sinusoidal) + segment + language (XLM),
a norm, dropout, and ALBERT's factorised projection E → H."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ...errors import InputError
from .dropout import Dropout
from .norms import make_norm
from .positions import sinusoidal_table

POSITIONS = ("learned", "sinusoidal", "none")


class TokenEmbeddings(nn.Module):
    """Sum of the embeddings a family asks for, then ``norm`` (None: no norm), dropout and, when
    ``dim != hidden_size``, a projection to ``hidden_size``::

        TokenEmbeddings(vocab_size=1000, dim=64, hidden_size=64, pad_token_id=0, max_positions=128)

    ``position_offset`` is RoBERTa's shift of position ids past the padding index.
    """

    def __init__(self, vocab_size: int, dim: int, hidden_size: int, pad_token_id: int, *,
                 positions: str = "learned", max_positions: int = 512, position_offset: int = 0,
                 segment_vocab_size: int = 0, num_languages: int = 0, norm: Optional[str] = "layer",
                 norm_bias: bool = True, eps: float = 1e-12, dropout: float = 0.0):
        super().__init__()
        self.pad_token_id = pad_token_id
        self.positions = positions
        self.max_positions = max_positions
        self.position_offset = position_offset
        self.word = nn.Embedding(vocab_size, dim, padding_idx=pad_token_id)
        num_positions = max_positions + position_offset
        if positions == "learned":
            self.position = nn.Embedding(num_positions, dim)
        elif positions == "sinusoidal":
            self.register_buffer("position_table", sinusoidal_table(num_positions, dim), persistent=False)
        self.segment = nn.Embedding(segment_vocab_size, dim) if segment_vocab_size else None
        self.language = nn.Embedding(num_languages, dim) if num_languages else None
        self.norm = make_norm(norm, dim, eps, norm_bias) if norm is not None else None
        self.dropout = Dropout(dropout)
        self.project = nn.Linear(dim, hidden_size) if dim != hidden_size else None

    def default_positions(self, input_ids: Optional[torch.Tensor], shape: torch.Size, device) -> torch.Tensor:
        """0..L-1, shifted by ``position_offset``. With an offset (RoBERTa/XLM-R), real tokens
        count from the offset and padding tokens sit at ``offset - 1``, exactly as RoBERTa does."""
        offset = self.position_offset
        if offset and input_ids is not None:
            real = input_ids.ne(self.pad_token_id).long()
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
        if self.positions != "none":
            limit = self.max_positions + self.position_offset
            # Default positions never exceed L - 1 + offset, so the shape alone clears them: no
            # device-to-host read of the ids (a GPU sync, a torch.compile graph break) per forward.
            check = position_ids is not None or shape[1] + self.position_offset > limit
            if position_ids is None:
                position_ids = self.default_positions(input_ids, shape, device)
            elif self.position_offset:
                position_ids = position_ids + self.position_offset
            if check and int(position_ids.max()) >= limit:
                raise InputError(f"position id {int(position_ids.max()) - self.position_offset} is out of "
                                 f"range: this model has max_positions={self.max_positions}; truncate the input")
            if self.positions == "learned":
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
