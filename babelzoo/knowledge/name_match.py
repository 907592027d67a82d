"""Re-ranking by the words of the entities' own texts.

In a graph whose entities read ``name, description`` (WordNet's lemma and gloss, a Wikidata label
and description), a definition often names its entity's neighbours: "dog, a member of the genus
Canis ..." names the genus, a part's gloss names its whole. A sentence vector blurs that exact
mention and a structure model never reads it. :class:`NameMatches` finds, for every entity, the
entities whose name its description holds as whole words, each match weighted by how rare the
name is among the descriptions (its idf, scaled to [0, 1]). :class:`MatchRanker` adds two
features to another ranker's standardised scores, each with a weight per relation and side:

- ``forward``: the candidate's name is in the question entity's description;
- ``backward``: the question entity's name is in the candidate's description.

:func:`fit_name_matches` chooses the weights on the valid split, relation by relation (a relation
with too few valid questions shares the weights fitted on all of them), as StAR's self-adaptive
ensemble (Wang et al., WWW 2021) is fitted on the dev split.
"""

from __future__ import annotations

import math
import re
from itertools import product
from typing import Optional, Sequence

import torch

from .base import KBError
from .kge import LinkPredictionData
from .link_prediction import KnownTriples, filtered_ranks

WORD = re.compile(r"\w+(?:['-]\w+)*")
SIDES = ("tail", "head")
WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


def words(text: str) -> tuple[str, ...]:
    """``text`` as lower-cased whole words (a hyphen or apostrophe inside a word keeps it whole)."""
    return tuple(WORD.findall(text.lower()))


def names_and_descriptions(kb, data: LinkPredictionData, lang: str = "en") -> tuple[list[str], list[str]]:
    """Every entity's name and description, in index order: the description is its text after the
    name (``name, description``); an entity whose text is its name alone has none."""
    text_of = getattr(kb, "entity_text", None) or kb.label
    name_of = getattr(kb, "entity_name", None) or kb.label
    names, descriptions = [], []
    for entity in data.entities:
        name, text = name_of(entity, lang), text_of(entity, lang)
        names.append(name)
        descriptions.append(text[len(name):].lstrip(" ,;:") if text.startswith(name) and text != name else "")
    return names, descriptions


class _Rows:
    """A sparse [N, N] matrix kept as CSR arrays, whose rows are read out dense a batch at a time."""

    def __init__(self, rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n: int):
        order = torch.argsort(rows * n + cols)
        self.cols, self.values, self.n = cols[order], values[order], n
        self.starts = torch.zeros(n + 1, dtype=torch.long)
        self.starts[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)

    def dense(self, index: torch.Tensor) -> torch.Tensor:
        begin, end = self.starts[index], self.starts[index + 1]
        counts = end - begin
        row = torch.repeat_interleave(torch.arange(len(index)), counts)
        first = torch.repeat_interleave(begin - (torch.cumsum(counts, 0) - counts), counts)
        at = first + torch.arange(int(counts.sum()))
        out = torch.zeros(len(index), self.n)
        out[row, self.cols[at]] = self.values[at]
        return out


class NameMatches:
    """``forward(q)`` [B, N]: for each entity of ``q``, the idf weight of every entity whose name
    its description holds as whole words (0 elsewhere, and at itself); ``backward(q)``: the same
    seen from the candidate (``q``'s name in the candidate's description)."""

    def __init__(self, names: Sequence[str], descriptions: Sequence[str], max_words: int = 6):
        if len(names) != len(descriptions):
            raise KBError(f"{len(names)} names and {len(descriptions)} descriptions: give one of each per entity")
        n = len(names)
        by_name: dict[tuple[str, ...], list[int]] = {}
        for index, name in enumerate(names):
            key = words(name)
            if 0 < len(key) <= max_words:
                by_name.setdefault(key, []).append(index)
        found: dict[tuple[str, ...], set[int]] = {}  # name -> the entities whose description holds it
        for index, description in enumerate(descriptions):
            tokens = words(description)
            for size in range(1, max_words + 1):
                for start in range(len(tokens) - size + 1):
                    gram = tokens[start:start + size]
                    if gram in by_name:
                        found.setdefault(gram, set()).add(index)
        rows, cols, values = [], [], []
        scale = math.log(max(n, 2))
        for name, holders in found.items():
            idf = math.log(n / len(holders)) / scale
            for holder in holders:
                for entity in by_name[name]:
                    if entity != holder:
                        rows.append(holder)
                        cols.append(entity)
                        values.append(idf)
        rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
        values_t = torch.tensor(values, dtype=torch.float32)
        self.num_entities, self.num_matches = n, len(values)
        self._forward = _Rows(rows_t, cols_t, values_t, n)
        self._backward = _Rows(cols_t, rows_t, values_t, n)

    @classmethod
    def from_kb(cls, kb, data: LinkPredictionData, lang: str = "en") -> "NameMatches":
        return cls(*names_and_descriptions(kb, data, lang))

    def forward(self, entities: torch.Tensor) -> torch.Tensor:
        return self._forward.dense(entities)

    def backward(self, entities: torch.Tensor) -> torch.Tensor:
        return self._backward.dense(entities)


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    return (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True).clamp(min=1e-12)


class MatchRanker:
    """``ranker``'s standardised scores plus ``a · forward + b · backward`` (:class:`NameMatches`),
    with (a, b) from ``weights[(side, relation)]``, else ``weights[(side, None)]``."""

    def __init__(self, ranker, matches: NameMatches, weights: dict[tuple[str, Optional[int]], tuple[float, float]]):
        missing = [side for side in SIDES if (side, None) not in weights]
        if missing:
            raise KBError(f"weights need a default for each side, (side, None): missing {missing}")
        self.ranker, self.matches, self.weights = ranker, matches, dict(weights)

    def _add(self, scores: torch.Tensor, side: str, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        pairs = [self.weights.get((side, r), self.weights[(side, None)]) for r in relations.tolist()]
        a, b = (torch.tensor(column, dtype=torch.float32)[:, None] for column in zip(*pairs))
        out = _standardised(scores.float())
        if a.any():
            out = out + a * self.matches.forward(entities)
        if b.any():
            out = out + b * self.matches.backward(entities)
        return out

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._add(self.ranker.score_tails(h, r), "tail", h, r)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._add(self.ranker.score_heads(r, t), "head", t, r)


def _best(z: torch.Tensor, forward: torch.Tensor, backward: torch.Tensor, targets: torch.Tensor,
          known: torch.Tensor, grid: Sequence[float]) -> tuple[tuple[float, float], float]:
    """The (a, b) of ``grid``² whose scores give the highest summed reciprocal rank, and that sum."""
    best, best_sum = (0.0, 0.0), -1.0
    for a, b in product(grid, grid):
        ranks = filtered_ranks(z + a * forward + b * backward, targets, known)
        total = float((1.0 / ranks).sum())
        if total > best_sum + 1e-9:
            best, best_sum = (float(a), float(b)), total
    return best, best_sum


@torch.no_grad()
def fit_name_matches(ranker, data: LinkPredictionData, matches: NameMatches, grid: Sequence[float] = WEIGHTS,
                     min_questions: int = 20, batch_size: int = 256
                     ) -> tuple[MatchRanker, dict[tuple[str, Optional[int]], tuple[float, float]], float]:
    """The weights of :class:`MatchRanker` with the best valid MRR: for each side and relation
    with at least ``min_questions`` valid questions its own (a, b) of ``grid``², for the rest
    those fitted on all the side's questions. Returns (the ranker, the weights, valid MRR)."""
    if matches.num_entities != data.num_entities:
        raise KBError(f"the name matches cover {matches.num_entities} entities, the graph {data.num_entities}")
    filters = KnownTriples(data)
    triples = data.split("valid")
    if len(triples) == 0:
        raise KBError("the 'valid' split is empty: the weights are chosen on it")
    weights: dict[tuple[str, Optional[int]], tuple[float, float]] = {}
    reciprocal_sum = 0.0
    for side in SIDES:
        parts: dict[str, list[torch.Tensor]] = {"z": [], "forward": [], "backward": [], "known": []}
        for i in range(0, len(triples), batch_size):
            h, r, t = triples[i:i + batch_size].unbind(1)
            asked, keys = (h, list(zip(h.tolist(), r.tolist()))) if side == "tail" else (t, list(zip(r.tolist(), t.tolist())))
            scores = ranker.score_tails(h, r) if side == "tail" else ranker.score_heads(r, t)
            parts["z"].append(_standardised(scores.float()))
            parts["forward"].append(matches.forward(asked))
            parts["backward"].append(matches.backward(asked))
            parts["known"].append(filters.mask(keys, side, data.num_entities))
        z, forward, backward, known = (torch.cat(parts[k]) for k in ("z", "forward", "backward", "known"))
        targets = triples[:, 2] if side == "tail" else triples[:, 0]
        relations = triples[:, 1]
        weights[(side, None)], _ = _best(z, forward, backward, targets, known, grid)
        shared = set()
        for relation in relations.unique().tolist():
            rows = (relations == relation).nonzero().squeeze(1)
            if len(rows) < min_questions:
                shared.add(relation)
                continue
            weights[(side, relation)], total = _best(z[rows], forward[rows], backward[rows], targets[rows],
                                                     known[rows], grid)
            reciprocal_sum += total
        if shared:
            rows = torch.isin(relations, torch.tensor(sorted(shared))).nonzero().squeeze(1)
            a, b = weights[(side, None)]
            ranks = filtered_ranks(z[rows] + a * forward[rows] + b * backward[rows], targets[rows], known[rows])
            reciprocal_sum += float((1.0 / ranks).sum())
    return MatchRanker(ranker, matches, weights), weights, reciprocal_sum / (2 * len(triples))
