"""Re-ranking by the words of the entities' own texts.

In a graph whose entities read ``name, description`` (WordNet's lemma and gloss, a Wikidata label
and description), a definition often names its entity's neighbours: "dog, a member of the genus
Canis ..." names the genus, a part's gloss names its whole. A sentence vector blurs that exact
mention and a structure model never reads it. :class:`NameMatches` finds, for every entity, the
entities whose name its description holds as whole words, each match weighted by how rare the
name is among the descriptions (its idf, scaled to [0, 1]). :class:`MatchRanker` adds two
features of the question's entity and each candidate to another ranker's standardised scores,
each with a weight per relation and side (tail or head prediction):

- ``forward``: the candidate's name is in the question entity's description;
- ``backward``: the question entity's name is in the candidate's description;
- ``forward_early``, ``backward_early``: the same, the sooner the name comes the more it weighs;
- ``shared``: the cosine of the two texts' idf-weighted word sets (:class:`SharedWords`).

:func:`fit_name_matches` chooses the weights on the valid split, relation by relation (a relation
with too few valid questions shares the weights fitted on all of them), as StAR's self-adaptive
ensemble (Wang et al., WWW 2021) is fitted on the dev split: coordinate ascent over a grid, one
feature at a time, from all weights 0.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Optional, Sequence

import torch

from .base import KBError
from .kge import LinkPredictionData
from .link_prediction import KnownTriples

WORD = re.compile(r"\w+(?:['-]\w+)*")
SIDES = ("tail", "head")
WEIGHTS = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
FEATURES = ("forward", "backward", "forward_early", "backward_early", "shared")


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
    """A sparse [n, width] matrix (width n unless given) kept as CSR arrays, whose rows are read
    out dense a batch at a time."""

    def __init__(self, rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor, n: int,
                 width: Optional[int] = None):
        self.n = n if width is None else width
        order = torch.argsort(rows * self.n + cols)
        self.cols, self.values = cols[order], values[order]
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
    seen from the candidate (``q``'s name in the candidate's description). ``forward(q, early=True)``
    and ``backward(q, early=True)`` divide each weight by 1 + the word the name starts at: a
    definition names its entity's kind first ("a member of the genus ...")."""

    def __init__(self, names: Sequence[str], descriptions: Sequence[str], max_words: int = 6):
        if len(names) != len(descriptions):
            raise KBError(f"{len(names)} names and {len(descriptions)} descriptions: give one of each per entity")
        n = len(names)
        by_name: dict[tuple[str, ...], list[int]] = {}
        for index, name in enumerate(names):
            key = words(name)
            if 0 < len(key) <= max_words:
                by_name.setdefault(key, []).append(index)
        found: dict[tuple[str, ...], dict[int, int]] = {}  # name -> {holder: the word its first mention starts at}
        for index, description in enumerate(descriptions):
            tokens = words(description)
            for size in range(1, max_words + 1):
                for start in range(len(tokens) - size + 1):
                    gram = tokens[start:start + size]
                    if gram in by_name:
                        first = found.setdefault(gram, {})
                        first[index] = min(first.get(index, start), start)
        rows, cols, values, starts = [], [], [], []
        scale = math.log(max(n, 2))
        for name, holders in found.items():
            idf = math.log(n / len(holders)) / scale
            for holder, start in holders.items():
                for entity in by_name[name]:
                    if entity != holder:
                        rows.append(holder)
                        cols.append(entity)
                        values.append(idf)
                        starts.append(start)
        rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
        values_t = torch.tensor(values, dtype=torch.float32)
        early_t = values_t / (1.0 + torch.tensor(starts, dtype=torch.float32))
        self.num_entities, self.num_matches = n, len(values)
        self._rows = {(False, False): _Rows(rows_t, cols_t, values_t, n), (False, True): _Rows(rows_t, cols_t, early_t, n),
                      (True, False): _Rows(cols_t, rows_t, values_t, n), (True, True): _Rows(cols_t, rows_t, early_t, n)}

    @classmethod
    def from_kb(cls, kb, data: LinkPredictionData, lang: str = "en") -> "NameMatches":
        return cls(*names_and_descriptions(kb, data, lang))

    def forward(self, entities: torch.Tensor, early: bool = False) -> torch.Tensor:
        return self._rows[(False, early)].dense(entities)

    def backward(self, entities: torch.Tensor, early: bool = False) -> torch.Tensor:
        return self._rows[(True, early)].dense(entities)


class SharedWords:
    """``similarity(q)`` [B, N]: the cosine between each entity of ``q``'s text and every entity's,
    each text its set of words weighted by idf (log N / the texts holding the word); itself 0."""

    def __init__(self, texts: Sequence[str]):
        n = len(texts)
        vocabulary: dict[str, int] = {}
        rows, cols = [], []
        for index, text in enumerate(texts):
            for word in set(words(text)):
                rows.append(index)
                cols.append(vocabulary.setdefault(word, len(vocabulary)))
        rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
        idf = torch.log(n / torch.bincount(cols_t, minlength=len(vocabulary)).clamp(min=1).float())
        values = idf[cols_t]
        norms = torch.zeros(n).index_add_(0, rows_t, values * values).sqrt().clamp(min=1e-12)
        values = values / norms[rows_t]
        self.num_entities, self.num_words = n, len(vocabulary)
        self._texts = _Rows(rows_t, cols_t, values, n, width=len(vocabulary))
        self._matrix = torch.sparse_coo_tensor(torch.stack([rows_t, cols_t]), values, (n, len(vocabulary)),
                                               check_invariants=True).coalesce()

    def similarity(self, entities: torch.Tensor) -> torch.Tensor:
        out = torch.sparse.mm(self._matrix, self._texts.dense(entities).T).T.contiguous()
        out[torch.arange(len(entities)), entities] = 0.0
        return out


class TextFeatures:
    """The features :class:`MatchRanker` weighs, of a graph's entities: :class:`NameMatches` both
    ways and :class:`SharedWords`; ``of(entities)`` [F, B, N] in the order of :data:`FEATURES`."""

    def __init__(self, names: Sequence[str], descriptions: Sequence[str], texts: Sequence[str]):
        self.matches, self.shared = NameMatches(names, descriptions), SharedWords(texts)
        self.num_entities = len(names)
        m = self.matches
        self.compute: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
            "forward": m.forward, "backward": m.backward, "forward_early": lambda q: m.forward(q, early=True),
            "backward_early": lambda q: m.backward(q, early=True), "shared": self.shared.similarity}

    @classmethod
    def from_kb(cls, kb, data: LinkPredictionData, lang: str = "en") -> "TextFeatures":
        names, descriptions = names_and_descriptions(kb, data, lang)
        texts = [f"{n} {d}" for n, d in zip(names, descriptions)]
        return cls(names, descriptions, texts)

    def of(self, entities: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.compute[name](entities) for name in FEATURES])


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    return (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True).clamp(min=1e-12)


Weights = dict[tuple[str, Optional[int]], tuple[float, ...]]


class MatchRanker:
    """``ranker``'s standardised scores plus Σ_f w_f · feature_f(question entity, candidate)
    (:class:`TextFeatures`), with the weights w from ``weights[(side, relation)]``, else
    ``weights[(side, None)]``, one per feature of :data:`FEATURES`."""

    def __init__(self, ranker, features: TextFeatures, weights: Weights):
        missing = [side for side in SIDES if (side, None) not in weights]
        if missing:
            raise KBError(f"weights need a default for each side, (side, None): missing {missing}")
        wrong = [key for key, w in weights.items() if len(w) != len(FEATURES)]
        if wrong:
            raise KBError(f"weights {wrong}: give one per feature, {', '.join(FEATURES)}")
        self.ranker, self.features, self.weights = ranker, features, dict(weights)

    def _add(self, scores: torch.Tensor, side: str, entities: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
        w = torch.tensor([self.weights.get((side, r), self.weights[(side, None)]) for r in relations.tolist()])
        out = _standardised(scores.float())
        for f, name in enumerate(FEATURES):
            if w[:, f].any():
                out = out + w[:, f, None] * self.features.compute[name](entities)
        return out

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._add(self.ranker.score_tails(h, r), "tail", h, r)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._add(self.ranker.score_heads(r, t), "head", t, r)


class _Feature:
    """One feature's values for the questions [Q, N], kept as CSR rows when mostly 0 (a name match
    holds a handful of candidates of the tens of thousands): :meth:`add_to` adds w · feature to a
    block of rows, touching only the non-zero entries, which gives the dense sum exactly (x + w·0 is x)."""

    def __init__(self, values: torch.Tensor, max_density: float = 0.05):
        self.sparse = bool((values != 0).sum() <= max_density * values.numel())
        if self.sparse:
            rows, self.columns = values.nonzero(as_tuple=True)  # row-major: each row's entries together
            self.values = values[rows, self.columns]
            self.pointers = torch.cat([torch.zeros(1, dtype=torch.long),
                                       torch.bincount(rows, minlength=len(values)).cumsum(0)])
        else:
            self.dense = values

    def add_to(self, scores: torch.Tensor, weights: torch.Tensor, start: int) -> None:
        """scores[i] += weights[i] · feature[start + i] for each row i of ``scores``, in place."""
        if not self.sparse:
            scores.addcmul_(weights[:, None], self.dense[start:start + len(scores)])
            return
        begin, end = int(self.pointers[start]), int(self.pointers[start + len(scores)])
        counts = self.pointers[start + 1:start + len(scores) + 1] - self.pointers[start:start + len(scores)]
        rows = torch.repeat_interleave(torch.arange(len(scores)), counts)
        scores.index_put_((rows, self.columns[begin:end]), weights[rows] * self.values[begin:end], accumulate=True)


def _reciprocal_sums(z: torch.Tensor, features: Sequence[_Feature], weights: torch.Tensor, targets: torch.Tensor,
                     groups: torch.Tensor, num_groups: int, chunk: int = 128) -> torch.Tensor:
    """For the questions' scores z [Q, N] (-inf at every other known answer, which no rank counts)
    plus Σ_f weights[:, f] · features[f] [Q, N], the summed reciprocal filtered rank of each group
    of questions [num_groups]; ties count half, as :func:`~.link_prediction.filtered_ranks`. Scored
    ``chunk`` questions at a time in one reused buffer: a [Q, N] temporary per trial would cost
    more in page faults than in arithmetic."""
    out = torch.zeros(num_groups, dtype=torch.float64)
    used = [f for f in range(len(features)) if weights[:, f].any()]
    buffer = torch.empty(min(chunk, len(z)), z.shape[1], dtype=z.dtype)
    for start in range(0, len(z), chunk):
        rows = slice(start, start + chunk)
        scores = buffer[:len(z[rows])].copy_(z[rows])
        for f in used:
            features[f].add_to(scores, weights[rows, f], start)
        target = scores.gather(1, targets[rows, None])
        higher = (scores > target).sum(1, dtype=torch.int32)  # int32: several times faster than int64
        ties = (scores == target).sum(1, dtype=torch.int32) - 1
        out.index_add_(0, groups[rows], 1.0 / (1.0 + higher.double() + ties.double() / 2))
    return out


def _questions(ranker, data: LinkPredictionData, features: "TextFeatures", filters: KnownTriples, side: str,
               batch_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The valid split's questions of one side: standardised scores [Q, N] with -inf at every other
    known answer, features [F, Q, N] and the answers [Q]."""
    triples = data.split("valid")
    z, feats = [], []
    for i in range(0, len(triples), batch_size):
        h, r, t = triples[i:i + batch_size].unbind(1)
        if side == "tail":
            asked, answer, keys, scores = h, t, list(zip(h.tolist(), r.tolist())), ranker.score_tails(h, r)
        else:
            asked, answer, keys, scores = t, h, list(zip(r.tolist(), t.tolist())), ranker.score_heads(r, t)
        known = filters.mask(keys, side, data.num_entities)
        known[torch.arange(len(answer)), answer] = False
        z.append(_standardised(scores.float()).masked_fill_(known, float("-inf")))
        feats.append(features.of(asked))
    return torch.cat(z), torch.cat(feats, 1), triples[:, 2] if side == "tail" else triples[:, 0]


@torch.no_grad()
def fit_name_matches(ranker, data: LinkPredictionData, features: TextFeatures, grid: Sequence[float] = WEIGHTS,
                     min_questions: int = 20, rounds: int = 2, batch_size: int = 256
                     ) -> tuple[MatchRanker, Weights, float]:
    """The weights of :class:`MatchRanker` with the best valid MRR: for each side and relation
    with at least ``min_questions`` valid questions its own, for the rest those fitted on all the
    side's questions; each set found by ``rounds`` of coordinate ascent over ``grid`` from all 0
    (one feature's weight at a time, the others held; of equal sums the first of the grid wins).
    Returns (the ranker, the weights, valid MRR)."""
    if features.num_entities != data.num_entities:
        raise KBError(f"the text features cover {features.num_entities} entities, the graph {data.num_entities}")
    filters = KnownTriples(data)
    triples = data.split("valid")
    if len(triples) == 0:
        raise KBError("the 'valid' split is empty: the weights are chosen on it")
    relations = triples[:, 1]
    ids = relations.unique()
    groups = torch.searchsorted(ids, relations.contiguous())  # each question's relation, as an index into ids
    own = torch.bincount(groups, minlength=len(ids)) >= min_questions
    values = torch.tensor(grid, dtype=torch.float32)
    weights: Weights = {}
    reciprocal_sum = 0.0
    for side in SIDES:
        z, dense, targets = _questions(ranker, data, features, filters, side, batch_size)
        feats = [_Feature(values) for values in dense]
        del dense

        def sums(w: torch.Tensor) -> torch.Tensor:  # w [groups, F] -> each group's summed reciprocal rank
            return _reciprocal_sums(z, feats, w[groups], targets, groups, len(ids))

        # coordinate ascent, each relation on its own (relations are disjoint: one pass scores all)
        # and the pool of every question with one set of weights
        each, pooled = torch.zeros(len(ids), len(FEATURES)), torch.zeros(1, len(FEATURES))
        for _ in range(rounds):
            for f in range(len(FEATURES)):
                by_value, pooled_by_value = [], []
                for value in grid:
                    trial = each.clone()
                    trial[:, f] = value
                    by_value.append(sums(trial))
                    trial = pooled.clone()
                    trial[:, f] = value
                    pooled_by_value.append(sums(trial.expand(len(ids), -1)).sum())
                each[:, f] = values[torch.stack(by_value).argmax(0)]  # argmax: the first of equal maxima
                pooled[:, f] = values[torch.stack(pooled_by_value).argmax()]
        final = torch.where(own[:, None], each, pooled)
        reciprocal_sum += float(sums(final).sum())
        weights[(side, None)] = tuple(float(w) for w in pooled[0])
        for g, relation in enumerate(ids.tolist()):
            if own[g]:
                weights[(side, relation)] = tuple(float(w) for w in each[g])
    return MatchRanker(ranker, features, weights), weights, reciprocal_sum / (2 * len(triples))
