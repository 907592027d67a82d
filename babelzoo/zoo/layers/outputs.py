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


POOLINGS = ("cls", "mean", "max", "final")


def pool(hidden: torch.Tensor, mask: Optional[torch.Tensor], mode: str = "cls", directions: int = 1) -> torch.Tensor:
    """Sentence vectors [B, H] from the states [B, L, H] of real tokens (``mask`` 1) by ``mode``:

    * ``cls``: the first token;
    * ``mean``: the mean over real tokens;
    * ``max``: the element-wise maximum over real tokens (InferSent's max pooling); padding
      never wins, even where every real value is negative;
    * ``final``: the state each direction of a recurrent encoder ends in. With ``directions=1``
      the state at the last real token; with 2 (a bidirectional RNN, forward states in the first
      half of H, backward states in the second) the forward half at the last real token beside
      the backward half at the first token.
    """
    if mode == "cls":
        return hidden[:, 0]
    real = (torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device) if mask is None
            else mask.bool())
    if mode == "mean":
        weights = real.to(hidden.dtype).unsqueeze(-1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
    if mode == "max":
        floor = torch.finfo(hidden.dtype).min
        best = hidden.masked_fill(~real.unsqueeze(-1), floor).max(1).values
        return torch.where(real.any(1, keepdim=True), best, torch.zeros_like(best))  # an empty row: zeros
    if mode == "final":
        if directions not in (1, 2) or hidden.shape[-1] % directions:
            raise ConfigError(f"pooling 'final' needs 1 or 2 directions that split the width {hidden.shape[-1]}; "
                              f"got directions={directions}")
        last = (real.long().sum(1) - 1).clamp(min=0)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        forward = hidden[rows, last]
        if directions == 1:
            return forward
        half = hidden.shape[-1] // 2
        return torch.cat([forward[:, :half], hidden[:, 0, half:]], dim=-1)
    raise ConfigError(f"unknown pooling {mode!r}; choose one of {', '.join(map(repr, POOLINGS))}")


class Pooler(nn.Module):
    """tanh(W h_0 + b) over the first token, as in BERT's next-sentence head."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))
