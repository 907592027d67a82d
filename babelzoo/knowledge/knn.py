"""Reading a retrieval memory on top of the encoder (the memory inside it, kNN-augmented
attention, is a block part: :mod:`babelzoo.zoo.layers.knn_attention`, chosen by
``TransformerConfig.memory_layers`` and importable from here).

- :class:`KNNLM` (Khandelwal et al., "Generalization through Memorization", ICLR 2020) for masked
  LM at inference: p(y | x) = λ p_kNN(y | x) + (1 − λ) p_LM(y | x), with
  p_kNN(y | x) ∝ Σ_{(k_i, v_i) ∈ kNN(q)} 1[v_i = y] exp(−d(q, k_i) / T) over a datastore of
  (context representation → token) pairs.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from ..zoo.config import ConfigError
from ..zoo.layers.knn_attention import KNNAttention
from .memory import RetrievalMemory

__all__ = ["KNNAttention", "KNNLM"]


class KNNLM:
    """kNN-LM interpolation for masked LM at inference (module docstring). The datastore is a
    :class:`RetrievalMemory` whose values are token ids."""

    def __init__(self, memory: RetrievalMemory, vocab_size: int, k: int = 16, lam: float = 0.25,
                 temperature: float = 1.0):
        if not 0.0 <= lam <= 1.0:
            raise ConfigError(f"lam={lam} must be in [0, 1]")
        self.memory, self.vocab_size, self.k, self.lam, self.temperature = memory, vocab_size, k, lam, temperature

    def add(self, keys: torch.Tensor, tokens: torch.Tensor) -> None:
        """Add context representations [N, H] with the tokens [N] they predict."""
        self.memory.add(keys.detach().float(), values=tokens.detach().long().cpu())

    @torch.no_grad()
    def build(self, model: nn.Module, batches: Iterable[dict[str, torch.Tensor]]) -> int:
        """Fill the datastore from masked-LM batches (``input_ids`` with mask tokens, ``labels``
        with the original ids at masked positions and -100 elsewhere): the key is the final
        hidden state at each masked position, the value its original token. Returns how many
        pairs were added."""
        added = 0
        for batch in batches:
            positions = batch["labels"] != -100
            out = model(batch["input_ids"], attention_mask=batch.get("attention_mask"))
            self.add(out.last_hidden[positions], batch["labels"][positions])
            added += int(positions.sum())
        return added

    def knn_probs(self, queries: torch.Tensor) -> torch.Tensor:
        """p_kNN [N, V] for query representations [N, H]."""
        scores, ids = self.memory.search(queries.detach().float(), self.k)
        # a similarity (ip, cosine) is −distance; faiss's l2 is the squared distance, as in the paper
        logits = (-scores if self.memory.metric == "l2" else scores) / self.temperature
        logits = logits.masked_fill(ids < 0, float("-inf"))
        weights = torch.softmax(logits, dim=-1).nan_to_num(0.0)
        tokens = self.memory.values(ids.clamp(min=-1)).long().clamp(min=0)
        probs = torch.zeros(len(queries), self.vocab_size)
        probs.scatter_add_(1, tokens, weights)
        return probs.to(queries.device)

    def log_probs(self, lm_logits: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """log(λ p_kNN + (1 − λ) p_LM) for [N, V] LM logits and the [N, H] states that produced
        them (e.g. ``model.mlm_logits(h, positions)`` and ``h[positions]``)."""
        p_lm = torch.softmax(lm_logits.float(), dim=-1)
        if len(self.memory) == 0 or self.lam == 0.0:
            return p_lm.log()
        return (self.lam * self.knn_probs(hidden) + (1 - self.lam) * p_lm).log()
