"""Link prediction in one graph helped by graphs in other languages, through aligned entities:
KEnS's ensemble inference (Chen et al., 2020) over babelzoo's own per-graph rankers.

A question (h, r, ?) in graph L is also asked in every other graph L' that knows h's counterpart
h' (a seed alignment, or a pair ``babelzoo kb align`` found): L' ranks its own entities for
(h', r, ?), and each of L's entities with a counterpart in L' receives that counterpart's
standardised score. The answer is ``z_L + weight × Σ_L' z_L'`` (an entity without a counterpart
in L' gets 0 from it: the mean of a standardised score), the weight chosen on L's valid split.
The graphs share their relations (DBP-5L's one vocabulary); a relation that L' lacks asks
nothing of L'.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .base import KBError
from .kge import LinkPredictionData


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    """Per-question z-scores over the entities: scales of different rankers made comparable."""
    finite = torch.where(torch.isfinite(scores), scores, torch.nan)
    mean = finite.nanmean(1, keepdim=True)
    std = ((finite - mean) ** 2).nanmean(1, keepdim=True).sqrt().clamp_min(1e-6)
    return torch.nan_to_num((scores - mean) / std, nan=0.0, neginf=-1e4, posinf=1e4)


class Counterpart:
    """Another graph's ranker, and how ``data``'s entities and relations map into its own:
    ``entity[i]`` the index of entity i's counterpart (-1: none), ``relation[j]`` likewise."""

    def __init__(self, ranker, data: LinkPredictionData, other: LinkPredictionData,
                 pairs: Sequence[tuple[str, str]], name: str = ""):
        self.ranker, self.name = ranker, name
        mine = {e: i for i, e in enumerate(data.entities)}
        theirs = {e: i for i, e in enumerate(other.entities)}
        self.entity = torch.full((data.num_entities,), -1, dtype=torch.long)
        for a, b in pairs:
            if a not in mine or b not in theirs:
                raise KBError(f"alignment pair ({a!r}, {b!r}) names an entity neither graph {name!r} nor this one has")
            self.entity[mine[a]] = theirs[b]
        other_relations = {r: i for i, r in enumerate(other.relations)}
        self.relation = torch.tensor([other_relations.get(r, -1) for r in data.relations], dtype=torch.long)

    def scores(self, entities: torch.Tensor, relations: torch.Tensor, heads: bool, size: int) -> torch.Tensor:
        """[B, size] standardised scores of this graph's answers moved onto the asking graph's
        entities; 0 where it cannot answer."""
        out = torch.zeros(len(entities), size)
        asked = self.entity[entities]
        rel = self.relation[relations]
        ok = (asked >= 0) & (rel >= 0)
        if not ok.any():
            return out
        if heads:
            theirs = self.ranker.score_heads(rel[ok], asked[ok])
        else:
            theirs = self.ranker.score_tails(asked[ok], rel[ok])
        z = _standardised(theirs.float())
        known = (self.entity >= 0).nonzero().squeeze(1)
        rows = ok.nonzero().squeeze(1)
        out[rows[:, None], known[None, :]] = z[:, self.entity[known]]
        return out


class AlignedEnsemble:
    """``z_main + weight × Σ z_counterpart`` (module docstring); ``weight=0`` is the main ranker."""

    def __init__(self, main, data: LinkPredictionData, counterparts: Sequence[Counterpart], weight: float = 0.5):
        self.main, self.data, self.counterparts, self.weight = main, data, list(counterparts), float(weight)

    def _combine(self, own: torch.Tensor, entities: torch.Tensor, relations: torch.Tensor, heads: bool) -> torch.Tensor:
        total = _standardised(own.float())
        if self.weight:
            for other in self.counterparts:
                total = total + self.weight * other.scores(entities, relations, heads, self.data.num_entities)
        return total

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._combine(self.main.score_tails(h, r), h, r, heads=False)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._combine(self.main.score_heads(r, t), t, r, heads=True)


def fit_aligned_ensemble(main, data: LinkPredictionData, counterparts: Sequence[Counterpart],
                         weights: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 1.0)) -> tuple[AlignedEnsemble, float, list]:
    """The :class:`AlignedEnsemble` whose weight gives the best filtered MRR on ``data``'s valid
    split, with ``[(weight, valid MRR), ...]``."""
    from .link_prediction import KnownTriples, evaluate

    filters = KnownTriples(data)
    tried = []
    for weight in weights:
        ensemble = AlignedEnsemble(main, data, counterparts, weight)
        tried.append((weight, evaluate(ensemble, data, "valid", filters=filters)["mrr"]))
    best = max(tried, key=lambda x: (x[1], -x[0]))[0]
    return AlignedEnsemble(main, data, counterparts, best), best, tried
