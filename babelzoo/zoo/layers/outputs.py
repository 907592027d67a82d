"""What sits on the last layer: BERT's masked-LM head, sentence pooling and the pooler."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..config import ConfigError
from .ffn import activation


class MLMHead(nn.Module):
    """BERT's masked-LM head: dense → activation → LayerNorm → decoder tied to the word
    embeddings (+ a free bias). With ALBERT's factorised embedding the decoder works in the
    embedding width E, so the dense layer maps H → E. ModernBERT's head has no bias on the
    dense layer or the norm (``dense_bias``, ``norm_bias``)."""

    def __init__(self, hidden_size: int, embedding_dim: int, vocab_size: int, act: str, eps: float,
                 dense_bias: bool = True, norm_bias: bool = True):
        super().__init__()
        self.dense = nn.Linear(hidden_size, embedding_dim, bias=dense_bias)
        self.act = activation(act)
        self.norm = nn.LayerNorm(embedding_dim, eps=eps, bias=norm_bias)
        self.decoder = nn.Linear(embedding_dim, vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, positions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits for every position, or only where the bool ``positions`` mask is True
        (then [N, V] for the N selected tokens: the vocabulary projection dominates the cost of
        a masked-LM step, and only ~15% of positions carry a label)."""
        if positions is not None:
            hidden = hidden[positions]
        return self.decoder(self.norm(self.act(self.dense(hidden)))) + self.bias


def pool(hidden: torch.Tensor, mask: Optional[torch.Tensor], mode: str = "cls") -> torch.Tensor:
    """Sentence vectors [B, H]: the first ([CLS]) token, or the mean over real tokens."""
    if mode == "cls":
        return hidden[:, 0]
    if mode == "mean":
        if mask is None:
            return hidden.mean(1)
        weights = mask.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
    raise ConfigError(f"unknown pooling {mode!r}; choose 'cls' or 'mean'")


class Pooler(nn.Module):
    """tanh(W h_0 + b) over the first token, as in BERT's next-sentence head."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))
