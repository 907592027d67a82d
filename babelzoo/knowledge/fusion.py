"""ERNIE knowledgeable fusion (Zhang et al., "ERNIE: Enhanced Language Representation with
Informative Entities", ACL 2019) and :func:`attach_knowledge`, which plugs a knowledge base into a
:class:`~babelzoo.zoo.model.BabelModel`.

An ERNIE aggregator layer has a token stream and an entity stream. The tokens go through the
block's own multi-head attention; the entities (KG embeddings aligned to the first token of their
mention) through their own attention; then the block's feed-forward becomes the information
fusion of eq. (5)-(6)::

    h_j = σ(W̃_t w̃_j + W̃_e ẽ_k + b̃)        tokens j aligned with an entity k
    h_j = σ(W̃_t w̃_j + b̃)                   tokens with no entity
    w_j = LN(w̃_j + W_t h_j + b_t),   e_k = LN(ẽ_k + W_e h_j + b_e)

as in the reference implementation (residual + LayerNorm outputs). W̃_t, b̃, W_t, b_t are the
block's pre-trained feed-forward weights (``up``, ``down``), so a sentence without entities
gives exactly the output of the original block. :class:`ErnieFeedForward` replaces
``block.ffn`` in place: state-dict keys of the block stay as they were, and the new weights
appear as ``ffn.entity_*``.

    fusion = attach_knowledge(model, kb, entity_embeddings=transe)   # a KGEModel or [N, E] tensor
    entities = fusion.entity_ids(mentions, length=input_ids.shape[1])  # [B, L], 0 = no entity
    with fusion.bind(entities):
        out = model(input_ids)
    out = model(input_ids, entities=entities)    # the same, through the model's forward
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

import torch
from torch import nn

from ..errors import InputError
from ..zoo.layers import Dropout, SelfAttention
from ..zoo.transformer_config import TextConfig
from .base import KBError


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


class ErnieFeedForward(nn.Module):
    """A block's feed-forward turned into ERNIE's information fusion (module docstring)."""

    def __init__(self, ffn: nn.Module, entity_dim: int, num_entity_heads: int, stream: EntityStream,
                 dropout: float = 0.1, eps: float = 1e-12, init_std: float = 0.02,
                 index: int = 0, source: Optional[int] = None):
        super().__init__()
        self.index, self.source = index, source  # this layer, and the fusion layer whose entities it reads
        self.up, self.act, self.down = ffn.up, ffn.act, ffn.down  # W̃_t, b̃, σ, W_t, b_t: pre-trained
        inner = ffn.up.out_features
        self.entity_attention = SelfAttention(entity_dim, num_entity_heads, dropout)
        self.entity_attention_norm = nn.LayerNorm(entity_dim, eps=eps)
        self.entity_up = nn.Linear(entity_dim, inner, bias=False)  # W̃_e (b̃ is up.bias)
        self.entity_down = nn.Linear(inner, entity_dim)  # W_e, b_e
        self.entity_norm = nn.LayerNorm(entity_dim, eps=eps)
        self.dropout = Dropout(dropout)
        self.stream = stream
        for linear in (self.entity_attention.qkv, self.entity_attention.out, self.entity_up, self.entity_down):
            nn.init.normal_(linear.weight, std=init_std)  # BERT-style, new weights only
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)

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


class KnowledgeFusion(nn.Module):
    """The entity table and the ERNIE fusion layers of one model, plus the knowledge base,
    linker and memory attached to it. Built by :func:`attach_knowledge` (or by the model from
    its :class:`~babelzoo.zoo.config.KnowledgeConfig`)."""

    def __init__(self, model: nn.Module, config):
        super().__init__()
        text = model.config.text
        if not isinstance(text, TextConfig):
            raise KBError(f"ERNIE fusion needs a Transformer-family encoder (this model's family is {text.family!r})")
        layers = model.encoder.layers
        if text.share_layers:
            raise KBError("ERNIE fusion needs distinct layers; this model shares one block across layers (ALBERT)")
        bad = [i for i in config.fusion_layers if not 0 <= i < len(layers)]
        if bad:
            raise KBError(f"KnowledgeConfig.fusion_layers {bad} out of range: the encoder has {len(layers)} layers")
        heads = _entity_heads(config.entity_dim)
        self.config = config
        self.stream = EntityStream()
        self.entity_embeddings = nn.Embedding(config.entity_vocab_size, config.entity_dim, padding_idx=0)
        nn.init.normal_(self.entity_embeddings.weight, std=text.init_std)
        with torch.no_grad():
            self.entity_embeddings.weight[0] = 0.0
        source = None
        for i in sorted(set(config.fusion_layers)):
            block = layers[i]
            if not isinstance(block.ffn, ErnieFeedForward):
                block.ffn = ErnieFeedForward(block.ffn, config.entity_dim, heads, self.stream, text.dropout,
                                             text.layer_norm_eps, text.init_std, index=i, source=source)
            source = i
        self.kb = None
        self.entity_index: dict[str, int] = {}
        self.memory = None
        self._linker = None
        self._linker_languages = None

    @contextlib.contextmanager
    def bind(self, entities: torch.Tensor) -> Iterator[EntityStream]:
        """Within the block, forward passes fuse ``entities`` ([B, L] entity indices aligned with
        the tokens, 0 = none). Yields the stream, whose ``states`` hold the last fusion layer's
        entity outputs after the forward pass."""
        if entities.dim() != 2:
            raise InputError(f"entities must be [batch, length] entity indices, got shape {tuple(entities.shape)}")
        if entities.numel() and not 0 <= int(entities.min()) <= int(entities.max()) < self.config.entity_vocab_size:
            bad = int(entities.max()) if int(entities.min()) >= 0 else int(entities.min())
            raise InputError(f"entity index {bad} out of range: the entity table has "
                             f"{self.config.entity_vocab_size} rows (0 = no entity)")
        stream = self.stream
        outer = (stream.inputs, stream.mask, stream.outputs)  # a bind around this one (nested calls)
        stream.mask, stream.inputs, stream.outputs = entities > 0, self.entity_embeddings(entities), {}
        try:
            yield stream
        finally:
            stream.inputs, stream.mask, stream.outputs = outer

    # --- linking -------------------------------------------------------------------------------
    @property
    def linker(self):
        if self._linker is None:
            if self.kb is None:
                raise KBError("no knowledge base attached; call attach_knowledge(model, kb)")
            from .linker import EntityLinker

            self._linker = EntityLinker.from_kb(self.kb, self._linker_languages)
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
                    raise KBError(f"entity {m.entity!r} is not in the attached knowledge base")
                start, end = (m.start, m.end) if offsets is None else (offsets[b][m.start], offsets[b][m.end])
                if start >= length:
                    continue  # the mention was truncated away with its tokens
                out[b, start:min(end, length) if align == "all" else start + 1] = index
        return out

    def knn_lm(self, vocab_size: int, k: int = 16, lam: float = 0.25, temperature: float = 1.0):
        """kNN-LM interpolation over the attached memory (values = token ids); see
        :class:`babelzoo.knowledge.knn.KNNLM`."""
        if self.memory is None:
            raise KBError("no retrieval memory attached; pass memory= to attach_knowledge")
        from .knn import KNNLM

        return KNNLM(self.memory, vocab_size, k=k, lam=lam, temperature=temperature)

    def link(self, batch: Sequence[Sequence[str]], length: int, lang: Optional[str] = None,
             offsets: Optional[Sequence[Sequence[int]]] = None) -> torch.Tensor:
        """Link tokenised sentences and return aligned entity indices [B, length]."""
        return self.entity_ids(self.linker(batch, lang), length, offsets=offsets)


def _entity_heads(dim: int) -> int:
    """Heads of the entity stream's attention: 4 when the entity width allows (ERNIE: 100 = 4 × 25)."""
    return next(h for h in (4, 2, 1) if dim % h == 0)


def attach_knowledge(model: nn.Module, kb, memory=None, *, entity_embeddings=None,
                     fusion_layers: Optional[Sequence[int]] = None, entity_dim: Optional[int] = None,
                     freeze_entities: bool = True, languages: Optional[Sequence[str]] = None) -> KnowledgeFusion:
    """Attach a knowledge base (and optionally a :class:`~babelzoo.knowledge.memory.RetrievalMemory`)
    to ``model`` and add ERNIE fusion to ``fusion_layers`` (default: the model's
    ``KnowledgeConfig.fusion_layers``, else the upper half of the encoder, as ERNIE's K-encoder).

    Entity index i + 1 is ``kb.entities()[i]`` (0 = no entity). ``entity_embeddings`` — a
    trained :class:`~babelzoo.knowledge.kge.KGEModel` over the same entities or an [N, E] tensor
    in that order — initialises the entity table (frozen unless ``freeze_entities=False``; ERNIE
    keeps its TransE vectors fixed). The model's config gains the matching ``KnowledgeConfig`` so
    that ``save_pretrained`` records it; a model rebuilt from that config has the same fusion
    layers, and attaching the same knowledge base again only binds it. ``languages`` limits the
    linker's names; ``memory`` is kept as ``model.knowledge.memory`` (see :meth:`KnowledgeFusion.knn_lm`).
    Returns ``model.knowledge``.
    """
    from ..zoo.config import KnowledgeConfig

    entities = list(kb.entities())
    if not entities:
        raise KBError("the knowledge base has no entities")
    vectors = None
    if entity_embeddings is not None:
        vectors = (entity_embeddings.entity_embeddings() if hasattr(entity_embeddings, "entity_embeddings")
                   else torch.as_tensor(entity_embeddings)).detach().float()
        if vectors.dim() != 2 or vectors.shape[0] != len(entities):
            raise KBError(f"entity_embeddings has shape {tuple(vectors.shape)}, expected [{len(entities)}, dim] "
                          f"(one row per kb.entities(), in that order)")
        if entity_dim is not None and entity_dim != vectors.shape[1]:
            raise KBError(f"entity_dim={entity_dim} disagrees with the embeddings' width {vectors.shape[1]}")
    current = model.config.knowledge
    layers = fusion_layers if fusion_layers is not None else (
        current.fusion_layers if current is not None and current.fusion_layers else
        tuple(range(model.config.text.num_layers // 2, model.config.text.num_layers)))
    dim = vectors.shape[1] if vectors is not None else entity_dim or (current.entity_dim if current else 100)
    config = KnowledgeConfig(entity_vocab_size=len(entities) + 1, entity_dim=dim,
                             fusion_layers=tuple(int(i) for i in layers), fusion="ernie")
    existing = getattr(model, "knowledge", None)
    if existing is not None and existing.config != config:
        raise KBError(f"the model already has knowledge fusion {existing.config} and cannot take {config}; "
                      f"build the model from a config with the knowledge part you need")
    model.config = model.config.override(knowledge=config)
    fusion = existing if existing is not None else KnowledgeFusion(model, config)
    if existing is None:
        model.knowledge = fusion
    if vectors is not None:
        with torch.no_grad():
            fusion.entity_embeddings.weight[1:] = vectors
            fusion.entity_embeddings.weight[0] = 0.0
        fusion.entity_embeddings.weight.requires_grad_(not freeze_entities)
    fusion.kb = kb
    fusion.entity_index = {e: i + 1 for i, e in enumerate(entities)}
    fusion.memory = memory
    fusion._linker, fusion._linker_languages = None, languages
    return fusion

