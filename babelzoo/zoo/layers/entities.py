"""ERNIE's knowledgeable fusion as a block part (Zhang et al., "ERNIE: Enhanced Language
Representation with Informative Entities", ACL 2019), and the entity table that feeds it.

An ERNIE aggregator layer has a token stream and an entity stream. The tokens go through the
block's own multi-head attention; the entities (KG embeddings aligned to the first token of their
mention) through their own attention; then the block's feed-forward is the information fusion of
eq. (5)-(6)::

    h_j = σ(W̃_t w̃_j + W̃_e ẽ_k + b̃)        tokens j aligned with an entity k
    h_j = σ(W̃_t w̃_j + b̃)                   tokens with no entity
    w_j = LN(w̃_j + W_t h_j + b_t),   e_k = LN(ẽ_k + W_e h_j + b_e)

as in the reference implementation (residual + LayerNorm outputs). W̃_t, b̃, W_t, b_t are the
block's feed-forward weights (``up``, ``down``), so a sentence without entities gives exactly the
output of a plain block with those weights. A family builds :class:`ErnieFeedForward` in the
layers its config's knowledge part names; the model holds one :class:`EntityFusion` (the entity
table and the stream its fusion layers share)::

    model = create_model("mbert_tiny", knowledge={"entity_vocab_size": 6, "entity_dim": 8})
    out = model(input_ids, entities=entities)       # [B, L] entity indices, 0 = none
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional, Sequence

import torch
from torch import nn

from ...errors import InputError
from .attention import SelfAttention
from .dropout import Dropout
from .ffn import activation


class EntityStream:
    """The entity stream of one forward pass, shared by the fusion layers: ``inputs`` [B, L, E]
    (the bound entities' embeddings), ``mask`` [B, L] (True where a token carries an entity) and
    each fusion layer's entity output. Every fusion layer reads the output of the fusion layer
    before it (the first reads ``inputs``), so a second forward pass within one ``bind`` starts
    again from ``inputs`` and gives the same result."""

    def __init__(self) -> None:
        self.inputs: Optional[torch.Tensor] = None
        self.mask: Optional[torch.Tensor] = None
        self.outputs: dict[int, torch.Tensor] = {}

    @property
    def states(self) -> Optional[torch.Tensor]:
        """The last fusion layer's entity output of the latest forward pass (``inputs`` before one)."""
        if self.inputs is None:
            return None
        return self.outputs[max(self.outputs)] if self.outputs else self.inputs

    def read(self, source: Optional[int]) -> torch.Tensor:
        if source is None:
            return self.inputs
        if source not in self.outputs:
            raise RuntimeError(f"fusion layer {source} has not run in this pass: the fusion layers must run in order")
        return self.outputs[source]


def entity_heads(dim: int) -> int:
    """Heads of the entity stream's attention: 4 when the entity width allows (ERNIE: 100 = 4 × 25)."""
    return next(h for h in (4, 2, 1) if dim % h == 0)


class ErnieFeedForward(nn.Module):
    """A block's feed-forward as ERNIE's information fusion (module docstring). ``index`` is
    this layer, ``source`` the fusion layer whose entity output it reads (None: the inputs)."""

    def __init__(self, hidden_size: int, intermediate_size: int, act: str, entity_dim: int, stream: EntityStream,
                 dropout: float = 0.1, eps: float = 1e-12, index: int = 0, source: Optional[int] = None):
        super().__init__()
        self.index, self.source = index, source
        self.up = nn.Linear(hidden_size, intermediate_size)  # W̃_t, b̃
        self.act = activation(act)  # σ
        self.down = nn.Linear(intermediate_size, hidden_size)  # W_t, b_t
        self.entity_attention = SelfAttention(entity_dim, entity_heads(entity_dim), dropout)
        self.entity_attention_norm = nn.LayerNorm(entity_dim, eps=eps)
        self.entity_up = nn.Linear(entity_dim, intermediate_size, bias=False)  # W̃_e (b̃ is up.bias)
        self.entity_down = nn.Linear(intermediate_size, entity_dim)  # W_e, b_e
        self.entity_norm = nn.LayerNorm(entity_dim, eps=eps)
        self.dropout = Dropout(dropout)
        self.stream = stream

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stream = self.stream
        if stream.inputs is None:
            return self.down(self.act(self.up(x)))
        e, has = stream.read(self.source), stream.mask
        if e.shape[:2] != x.shape[:2]:
            raise InputError(f"entities are aligned to {tuple(e.shape[:2])} tokens, but the batch has "
                             f"{tuple(x.shape[:2])}; give one entity index per input token")
        # entities attend to the sentence's other entities; a token without one sees itself only
        eye = torch.eye(has.shape[1], dtype=torch.bool, device=has.device)
        visible = (has[:, None, :] | eye)[:, None]
        e_tilde = self.entity_attention_norm(e + self.dropout(self.entity_attention(e, visible)))
        h = self.act(self.up(x) + self.entity_up(e_tilde) * has[..., None].to(x.dtype))
        e_out = self.entity_norm(e_tilde + self.dropout(self.entity_down(h)))
        stream.outputs[self.index] = torch.where(has[..., None], e_out, e)
        return self.down(h)


class EntityFusion(nn.Module):
    """The entity table and stream of a model with ERNIE fusion layers (``model.knowledge``),
    plus what :func:`babelzoo.knowledge.attach_knowledge` binds to it: the knowledge base
    (``kb``), entity index of each KB entity (``entity_index``, 1-based), a retrieval
    ``memory`` and a linker."""

    def __init__(self, entity_vocab_size: int, entity_dim: int, fusion_layers: Sequence[int]):
        super().__init__()
        self.entity_vocab_size, self.fusion_layers = entity_vocab_size, tuple(fusion_layers)
        self.stream = EntityStream()
        self.entity_embeddings = nn.Embedding(entity_vocab_size, entity_dim, padding_idx=0)
        self.kb = None
        self.entity_index: dict[str, int] = {}
        self.memory = None
        self._make_linker: Optional[Callable[[], Callable]] = None
        self._linker = None

    def feed_forward(self, index: int, hidden_size: int, intermediate_size: int, act: str, dropout: float,
                     eps: float) -> ErnieFeedForward:
        """The fusion feed-forward of layer ``index`` (one of ``fusion_layers``), reading the
        entity output of the fusion layer below it."""
        below = [i for i in self.fusion_layers if i < index]
        return ErnieFeedForward(hidden_size, intermediate_size, act, self.entity_embeddings.embedding_dim,
                                self.stream, dropout, eps, index=index, source=max(below) if below else None)

    @contextlib.contextmanager
    def bind(self, entities: torch.Tensor) -> Iterator[EntityStream]:
        """Within the block, forward passes fuse ``entities`` ([B, L] entity indices aligned with
        the tokens, 0 = none). Yields the stream, whose ``states`` hold the last fusion layer's
        entity outputs after the forward pass."""
        if entities.dim() != 2:
            raise InputError(f"entities must be [batch, length] entity indices, got shape {tuple(entities.shape)}")
        if entities.numel() and not 0 <= int(entities.min()) <= int(entities.max()) < self.entity_vocab_size:
            bad = int(entities.max()) if int(entities.min()) >= 0 else int(entities.min())
            raise InputError(f"entity index {bad} out of range: the entity table has "
                             f"{self.entity_vocab_size} rows (0 = no entity)")
        stream = self.stream
        outer = (stream.inputs, stream.mask, stream.outputs)  # a bind around this one (nested calls)
        stream.mask, stream.inputs, stream.outputs = entities > 0, self.entity_embeddings(entities), {}
        try:
            yield stream
        finally:
            stream.inputs, stream.mask, stream.outputs = outer

    # --- what attach_knowledge binds -----------------------------------------------------------
    def bind_source(self, kb, entity_index: dict[str, int], memory=None,
                    make_linker: Optional[Callable[[], Callable]] = None) -> None:
        """Bind a knowledge base: its entity → index map, a memory, and a function that builds
        its linker on first use."""
        self.kb, self.entity_index, self.memory = kb, dict(entity_index), memory
        self._make_linker, self._linker = make_linker, None

    @property
    def linker(self):
        if self._linker is None:
            if self._make_linker is None:
                raise InputError("no knowledge base attached; call babelzoo.knowledge.attach_knowledge(model, kb)")
            self._linker = self._make_linker()
        return self._linker

    def entity_ids(self, mentions: Sequence[Sequence], length: int, align: str = "first",
                   offsets: Optional[Sequence[Sequence[int]]] = None) -> torch.Tensor:
        """[B, length] entity indices from linked mentions (token offsets). ``align="first"``
        puts the entity on the mention's first token (ERNIE), ``"all"`` on all its tokens.
        ``offsets[b][w]``, when given, maps word ``w`` of item ``b`` to its first model token
        (and ``offsets[b][len(words)]`` to the end), for mentions found on words."""
        out = torch.zeros(len(mentions), length, dtype=torch.long)
        for b, items in enumerate(mentions):
            for m in items:
                index = self.entity_index.get(m.entity)
                if index is None:
                    raise InputError(f"entity {m.entity!r} is not in the attached knowledge base")
                start, end = (m.start, m.end) if offsets is None else (offsets[b][m.start], offsets[b][m.end])
                if start >= length:
                    continue  # the mention was truncated away with its tokens
                out[b, start:min(end, length) if align == "all" else start + 1] = index
        return out

    def link(self, batch: Sequence[Sequence[str]], length: int, lang: Optional[str] = None,
             offsets: Optional[Sequence[Sequence[int]]] = None) -> torch.Tensor:
        """Link tokenised sentences and return aligned entity indices [B, length]."""
        return self.entity_ids(self.linker(batch, lang), length, offsets=offsets)
