"""Multi-head cross-attention: queries from a decoder, keys and values from an encoder's output."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .attention import attend


class CrossAttention(nn.Module):
    """softmax(q·kᵀ·scale + mask)·v with q = W_q·x (decoder) and [k; v] = W_kv·m (encoder
    output ``m``). The keys and values of the memory depend on the encoder alone, so a decoding
    loop computes them once (:meth:`memory`) and passes them to every step."""

    def __init__(self, hidden_size: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 scale: Optional[float] = None):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.dropout = dropout
        self.scale = scale
        self.query = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.kv = nn.Linear(hidden_size, 2 * hidden_size, bias=bias)
        self.out = nn.Linear(hidden_size, hidden_size, bias=bias)

    def memory(self, encoded: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [B, H, S, D] of the encoder's output ``encoded`` [B, S, H·D]."""
        b, s = encoded.shape[:2]
        k, v = self.kv(encoded).view(b, s, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return k, v

    def forward(self, x: torch.Tensor, memory: tuple[torch.Tensor, torch.Tensor],
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``x`` [B, L, H] attends over ``memory`` (from :meth:`memory`); ``mask`` is a bool
        [B, 1, 1, S] key mask (True = attend) or None."""
        b, length = x.shape[:2]
        q = self.query(x).view(b, length, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = memory
        context = attend(q, k, v, mask=mask, dropout=self.dropout if self.training else 0.0, scale=self.scale)
        return self.out(context.transpose(1, 2).reshape(b, length, -1))
