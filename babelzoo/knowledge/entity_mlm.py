"""``entity_mlm``: masked LM where whole entity mentions are the masked units (ERNIE 1.0; Sun et
al. 2019, "ERNIE: Enhanced Representation through Knowledge Integration", §3.2.2), so the model
must recover an entity from its context instead of a sub-word from its neighbours.

Examples are :class:`~babelzoo.knowledge.facts.EntityExample` (ids, token spans of mentions,
language), e.g. from :class:`~babelzoo.knowledge.facts.FactDataset` (verbalised KB triples) or
from text linked by :class:`~babelzoo.knowledge.linker.EntityLinker`.

``units="entities"`` (default) masks one mention per example, chosen uniformly: on a
verbalised triple ``Japon · uses currency · yen japonais`` that asks for the tail given the head
and the relation, or the head given the tail (knowledge-graph completion as an LM task).
``units="mixed"`` is ERNIE's phrase-and-entity masking: mentions and the remaining single tokens
are the units, drawn until ``rate`` of the tokens is covered (:func:`entity_mask`). A chosen unit
is, as a whole, replaced by [MASK] (80%), random tokens (10%) or kept (10%).
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..objectives.base import Loss, register_objective
from ..objectives.batching import IGNORE, check_vocab, language_index, languages_known, pad
from ..objectives.examples import ExampleError, require_nonempty
from ..objectives.mlm import MaskingObjective
from ..zoo.config import ConfigError
from .entity_masking import entity_mask


def _as_entity_example(example: Any, index: int) -> tuple[list[int], list[tuple[int, int]], Any]:
    if not (isinstance(example, tuple) and len(example) in (2, 3)):
        raise ExampleError(f"example {index}: expected (ids, spans[, lang]), got {type(example).__name__}")
    ids, spans = list(example[0]), [tuple(s) for s in example[1]]
    lang = example[2] if len(example) == 3 else None
    for start, end in spans:
        if not 0 <= start < end <= len(ids):
            raise ExampleError(f"example {index}: mention span ({start}, {end}) is outside its {len(ids)} tokens")
    return ids, spans, lang


def mask_units(input_ids: torch.Tensor, spans: Sequence[Sequence[tuple[int, int]]], special_table: torch.Tensor,
               replacements: torch.Tensor, mask_id: int, entities_only: bool, rate: float,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(masked ids, labels). With ``entities_only`` one mention per row is the unit; a row whose
    mentions were all cut falls back to ERNIE's mixed units so it still trains."""
    if not entities_only:
        special = special_table.nonzero().squeeze(1).tolist()
        return entity_mask(input_ids, spans, mask_id, len(special_table), special, rate, generator)
    masked, labels = input_ids.clone(), torch.full_like(input_ids, IGNORE)
    special = special_table.nonzero().squeeze(1).tolist()
    for b, row in enumerate(spans):
        if not row:
            m, lab = entity_mask(input_ids[b:b + 1], [[]], mask_id, len(special_table), special, rate, generator)
            masked[b], labels[b] = m[0], lab[0]
            continue
        start, end = row[int(torch.randint(len(row), (), generator=generator))]
        labels[b, start:end] = input_ids[b, start:end]
        draw = float(torch.rand((), generator=generator))
        if draw < 0.8:
            masked[b, start:end] = mask_id
        elif draw < 0.9:
            pick = torch.randint(len(replacements), (end - start,), generator=generator)
            masked[b, start:end] = replacements[pick]
    return masked, labels


@register_objective
class EntityMLM(MaskingObjective):
    """Entity-level masked LM over ``[CLS] X [SEP]`` (see the module docstring)."""

    name = "entity_mlm"
    consumes = "entity_mentions"
    from_run = ()  # it masks whole entity mentions, not words: no word-start table

    def __init__(self, specials: SpecialIds, *, units: Literal["entities", "mixed"] = "entities",
                 rate: float = 0.15, max_length: int = 64, use_language_ids: bool = True):
        super().__init__(specials, max_length=max_length, use_language_ids=use_language_ids)
        if units not in ("entities", "mixed"):
            raise ConfigError(f"entity_mlm: units must be 'entities' or 'mixed', got {units!r}")
        if not 0.0 < rate < 1.0:
            raise ConfigError(f"entity_mlm: rate must be in (0, 1), got {rate}")
        self.units, self.rate = units, rate

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        s = self.specials
        rows, spans, langs, truncated = [], [], [], 0
        for i, example in enumerate(examples):
            ids, mentions, lang = _as_entity_example(example, i)
            keep = self.max_length - 2
            truncated += max(0, len(ids) - keep)
            ids = ids[:keep]
            rows.append([s.cls, *ids, s.sep])
            # Shift past [CLS]; a mention cut by truncation is dropped as a unit (its tokens
            # that remain are still ordinary tokens).
            spans.append([(a + 1, b + 1) for a, b in mentions if b <= keep])
            langs.append(lang)
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids, s, "entity example")
        lengths = torch.tensor([len(r) for r in rows])
        attention_mask = (torch.arange(input_ids.shape[1])[None] < lengths[:, None]).long()
        masked, labels = mask_units(input_ids, spans, self.masker.special_table, self.masker.replacements,
                                    s.mask, entities_only=self.units == "entities", rate=self.rate)
        batch = {"input_ids": masked, "attention_mask": attention_mask, "labels": labels,
                 "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known(langs, self.name):
            lang = torch.tensor([language_index(s, x, f"example {i}") for i, x in enumerate(langs)])
            batch["language_ids"] = lang[:, None].expand_as(input_ids) * attention_mask
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        loss = self.masked_lm(model, batch)
        loss.metrics["masked_per_row"] = batch["labels"].ne(IGNORE).sum() / batch["labels"].shape[0]
        return loss
