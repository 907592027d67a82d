"""Entity-level masking (ERNIE 1.0; Sun et al., "ERNIE: Enhanced Representation through
Knowledge Integration", 2019): a linked entity mention is masked as one unit, so the model must
recover the whole entity from context rather than one sub-word from its neighbours.

Masking units are the given spans (entity mentions, or phrases) plus every remaining
maskable token on its own. Units are drawn in random order until ``probability`` of the
maskable tokens is covered (a unit that would overshoot is skipped, as in whole-word masking);
each chosen unit is, as a whole, replaced by the mask token (80%), by random tokens (10%) or
kept (10%), as BERT does per token.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import torch

from ..errors import InputError

IGNORE = -100


def entity_mask(input_ids: torch.Tensor, spans: Sequence[Sequence[tuple[int, int]]], mask_id: int,
                vocab_size: int, special_ids: Iterable[int] = (), probability: float = 0.15,
                generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask ``input_ids`` [B, L] by units. ``spans[b]``: [start, end) token spans of item ``b``
    (e.g. ``(m.start, m.end)`` of linked mentions). Returns (masked ids, labels) where labels
    hold the original id at masked positions and -100 elsewhere."""
    if input_ids.dim() != 2 or len(spans) != input_ids.shape[0]:
        raise InputError(f"input_ids must be [B, L] with one span list per row; got {tuple(input_ids.shape)} "
                         f"and {len(spans)} span lists")
    special = torch.tensor(sorted(set(special_ids)), dtype=input_ids.dtype)
    maskable = ~torch.isin(input_ids, special)
    masked = input_ids.clone()
    labels = torch.full_like(input_ids, IGNORE)
    length = input_ids.shape[1]
    for b in range(input_ids.shape[0]):
        covered = torch.zeros(length, dtype=torch.bool)
        units: list[list[int]] = []
        for start, end in sorted(spans[b]):
            start, end = max(0, int(start)), min(length, int(end))
            positions = [i for i in range(start, end) if maskable[b, i] and not covered[i]]
            if positions:
                units.append(positions)
                covered[positions] = True
        units += [[i] for i in range(length) if maskable[b, i] and not covered[i]]
        budget = max(1, round(probability * int(maskable[b].sum()))) if units else 0
        chosen = 0
        for u in torch.randperm(len(units), generator=generator).tolist():
            unit = units[u]
            if chosen >= budget:
                break
            if chosen + len(unit) > budget and chosen > 0:
                continue
            chosen += len(unit)
            index = torch.tensor(unit)
            labels[b, index] = input_ids[b, index]
            draw = float(torch.rand((), generator=generator))
            if draw < 0.8:
                masked[b, index] = mask_id
            elif draw < 0.9:
                masked[b, index] = torch.randint(vocab_size, (len(unit),), generator=generator, dtype=input_ids.dtype)
    return masked, labels
