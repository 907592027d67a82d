"""Reading a retrieval memory from inside and on top of the encoder.

- :class:`KNNAttention` (Memorizing Transformers; Wu et al., ICLR 2022): each head attends over
  the local context and, separately, over the top-k (key, value) pairs retrieved from its
  external memory by its query; a learned per-head gate mixes the two,
  V = g ⊙ V_mem + (1 − g) ⊙ V_local with g = σ(b_g). Keys and values of past segments are
  added to the memory (without gradient) after each forward pass.
- :class:`KNNLM` (Khandelwal et al., "Generalization through Memorization", ICLR 2020) for masked
  LM at inference: p(y | x) = λ p_kNN(y | x) + (1 − λ) p_LM(y | x), with
  p_kNN(y | x) ∝ Σ_{(k_i, v_i) ∈ kNN(q)} 1[v_i = y] exp(−d(q, k_i) / T) over a datastore of
  (context representation → token) pairs.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional

import torch
from torch import nn

from ..errors import InputError
from ..zoo.config import ConfigError
from ..zoo.layers import SelfAttention, attend
from .memory import RetrievalMemory


class KNNAttention(nn.Module):
    """Drop-in for :class:`~babelzoo.zoo.layers.SelfAttention` (same ``qkv``/``out`` weights and
    call signature) with one retrieval memory per head. Replace a block's attention with
    ``block.attention = KNNAttention.from_attention(block.attention)``.

    One memory serves the whole batch (a corpus or a long document read in order); call
    :meth:`reset_memory` between independent streams. Retrieval uses the raw inner product q·k,
    so the top-k retrieved pairs are exactly the k largest attention logits in the memory
    (for an exact ``"Flat"`` index).
    """

    def __init__(self, hidden_size: int, num_heads: int, top_k: int = 32, dropout: float = 0.0,
                 index: str = "Flat", memorize: bool = True, max_memory: Optional[int] = None):
        super().__init__()
        self.num_heads, self.head_dim, self.dropout = num_heads, hidden_size // num_heads, dropout
        self.top_k, self.index, self.memorize, self.max_memory = top_k, index, memorize, max_memory
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size)
        self.out = nn.Linear(hidden_size, hidden_size)
        self.gate = nn.Parameter(torch.zeros(num_heads))  # b_g: σ(0) = ½ at the start
        self.memories: list[RetrievalMemory] = []
        self.reset_memory()

    @classmethod
    def from_attention(cls, attention: SelfAttention, **kwargs) -> "KNNAttention":
        hidden = attention.qkv.in_features
        layer = cls(hidden, attention.num_heads, dropout=attention.dropout, **kwargs)
        layer.qkv, layer.out = attention.qkv, attention.out  # reuse the trained projections
        return layer

    def reset_memory(self) -> None:
        self.memories = [RetrievalMemory(self.head_dim, self.index, metric="ip") for _ in range(self.num_heads)]

    def memory_size(self) -> int:
        return len(self.memories[0])

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
                relative: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, length, width = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if relative is not None:
            raise InputError("KNNAttention does not take NEZHA relative positions")
        local = attend(q, k, v, mask, bias, None, self.dropout if self.training else 0.0)
        context = local
        if self.memory_size() > 0:
            gate = torch.sigmoid(self.gate).to(q.dtype)[None, :, None, None]
            context = gate * self.retrieve(q) + (1 - gate) * local
        if self.memorize:
            self.add_to_memory(k, v, mask)
        return self.out(context.transpose(1, 2).reshape(b, length, width))

    def retrieve(self, q: torch.Tensor) -> torch.Tensor:
        """Attention of each query over its head's top-k memory entries → [B, H, L, D]."""
        b, heads, length, dim = q.shape
        outputs = []
        for h in range(heads):
            queries = q[:, h].reshape(-1, dim)
            _, ids = self.memories[h].search(queries.detach(), min(self.top_k, self.memory_size()))
            pairs = self.memories[h].values(ids).to(q.device, q.dtype)  # [N, k, 2, D]
            keys, values = pairs[:, :, 0], pairs[:, :, 1]
            logits = torch.einsum("nd,nkd->nk", queries, keys) / math.sqrt(dim)
            logits = logits.masked_fill(ids.to(q.device) < 0, float("-inf"))
            weights = torch.softmax(logits, dim=-1)
            outputs.append(torch.einsum("nk,nkd->nd", weights, values).view(b, length, dim))
        return torch.stack(outputs, 1)

    @torch.no_grad()
    def add_to_memory(self, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Store this segment's (key, value) pairs of real tokens; drop the oldest beyond
        ``max_memory``."""
        keep = _real_tokens(mask, k.shape[0], k.shape[2], k.device)
        for h, memory in enumerate(self.memories):
            keys, values = k[:, h][keep], v[:, h][keep]
            memory.add(keys.float(), values=torch.stack([keys, values], 1).float().cpu())
            if self.max_memory is not None and len(memory) > self.max_memory:
                memory.remove(memory.ids()[: len(memory) - self.max_memory])


def _real_tokens(mask: Optional[torch.Tensor], batch: int, length: int, device) -> torch.Tensor:
    """[B, L] bool of positions that are real tokens, from an SDPA bool mask [B, 1, Lq|1, Lk]."""
    if mask is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    keys = mask.expand(batch, 1, mask.shape[2], length)[:, 0].any(dim=1)
    return keys


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
