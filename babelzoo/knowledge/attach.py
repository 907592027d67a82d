"""Plugging a knowledge base into a model: :func:`attach_knowledge`, and a recipe's ``knowledge:``
section (:func:`attach_from_recipe`, the ``knowledge`` model attachment).

ERNIE's fusion layers and entity table are parts of the model, built from its config's
knowledge part (:mod:`babelzoo.zoo.layers.entities`); attaching a knowledge base builds a model
whose config has that part and binds the knowledge base (its entity index, linker and retrieval
memory) to the model's entity table::

    model = attach_knowledge(model, kb, entity_embeddings=transe)   # a KGEModel or [N, E] tensor
    entities = model.knowledge.entity_ids(mentions, length=input_ids.shape[1])  # [B, L], 0 = none
    out = model(input_ids, entities=entities)
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from .._files import expand_path
from ..train.config import KnowledgeSpec
from ..typed import Where
from ..zoo.config import ConfigError
from ..zoo.model_config import KnowledgeConfig
from ..zoo.factory import build_model
from ..zoo.layers.entities import EntityFusion, EntityStream, ErnieFeedForward
from ..zoo.sentences import share_tokenizer
from .base import KBError
from .kb_sources import shared_kb
from .kge import load_kge

__all__ = ["EntityFusion", "EntityStream", "ErnieFeedForward", "KnowledgeFusion", "attach_from_recipe", "attach_knowledge"]

KnowledgeFusion = EntityFusion  # the name ``model.knowledge``'s class had before it became a model part


def attach_knowledge(model: nn.Module, kb, memory=None, *, entity_embeddings=None,
                     fusion_layers: Optional[Sequence[int]] = None, entity_dim: Optional[int] = None,
                     freeze_entities: bool = True, languages: Optional[Sequence[str]] = None) -> nn.Module:
    """A model with ERNIE fusion over ``kb`` in ``fusion_layers`` (default: the model's
    ``KnowledgeConfig.fusion_layers``, else the upper half of the encoder, as ERNIE's K-encoder),
    and the knowledge base bound to it.

    The result is built from ``model.config`` with the knowledge part added, and ``model``'s
    weights are loaded into it (strictly: only the entity table and the fusion weights are new);
    a ``model`` that already has this knowledge part is returned as is, with ``kb`` bound.
    Entity index i + 1 is ``kb.entities()[i]`` (0 = no entity). ``entity_embeddings`` — a
    trained :class:`~babelzoo.knowledge.kge.KGEModel` over the same entities or an [N, E] tensor
    in that order — initialises the entity table (frozen unless ``freeze_entities=False``; ERNIE
    keeps its TransE vectors fixed). ``languages`` limits the linker's names; ``memory`` is kept
    as ``model.knowledge.memory``.
    """
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
    if current is not None and current.fusion == "ernie" and current != config:
        raise KBError(f"the model already has knowledge fusion {current} and cannot take {config}; "
                      f"build the model from a config with the knowledge part you need")
    if current != config:
        try:
            extended = model.config.override(knowledge=config)
        except ConfigError as err:  # a family without fusion layers, ALBERT's shared block, a layer out of range
            raise KBError(str(err)) from None
        model = _with_weights_of(build_model(extended), model)
    fusion = model.knowledge
    if vectors is not None:
        with torch.no_grad():
            fusion.entity_embeddings.weight[1:] = vectors.to(fusion.entity_embeddings.weight)
            fusion.entity_embeddings.weight[0] = 0.0
        fusion.entity_embeddings.weight.requires_grad_(not freeze_entities)

    def make_linker():
        from .linker import EntityLinker

        return EntityLinker.from_kb(kb, languages)

    fusion.bind_source(kb, {e: i + 1 for i, e in enumerate(entities)}, memory, make_linker)
    return model


def _with_weights_of(new: nn.Module, old: nn.Module) -> nn.Module:
    """``new`` with every weight of ``old`` (same names; only knowledge weights may be new), on
    ``old``'s device and in its mode, with its frozen parameters frozen."""
    missing, unexpected = new.load_state_dict(old.state_dict(), strict=False)
    fresh = [k for k in missing if not (k.startswith("knowledge.") or ".ffn.entity_" in k)]
    if fresh or unexpected:
        raise KBError(f"cannot carry the weights over to the model with knowledge fusion: missing {fresh[:10]}, "
                      f"unexpected {unexpected[:10]}")
    frozen = {name for name, param in old.named_parameters() if not param.requires_grad}
    for name, param in new.named_parameters():
        if name in frozen:
            param.requires_grad_(False)
    first = next(old.parameters(), None)
    if first is not None:
        new = new.to(first.device)
    new.train(old.training)
    share_tokenizer(old, new)
    return new


def attach_from_recipe(model, knowledge: KnowledgeSpec, where: Where):
    """The model with the recipe's knowledge base attached (:func:`attach_knowledge`)."""
    kb, embeddings = shared_kb(knowledge.kb), None
    if knowledge.entity_embeddings is not None:
        embeddings, entities, _ = load_kge(expand_path(knowledge.entity_embeddings, str(where.key("entity_embeddings"))))
        if list(entities) != list(kb.entities()):
            raise ConfigError(f"{where.key('entity_embeddings')}: {knowledge.entity_embeddings} embeds "
                              f"{len(entities)} entities that are not {knowledge.kb!r}'s entities in its order")
    return attach_knowledge(model, kb, entity_embeddings=embeddings,
                            fusion_layers=knowledge.fusion_layers, entity_dim=knowledge.entity_dim,
                            freeze_entities=knowledge.freeze_entities, languages=knowledge.languages)
