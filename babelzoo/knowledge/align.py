"""Cross-lingual entity alignment: which entities of two graphs, in two languages, are the same.

Two kinds of evidence, summed into one score per pair ``(a, b)``:

- **names**: the cosine of the two entities' texts through a multilingual sentence encoder
  (multilingual-e5-small by default), which already places "Μαγδεβούργο" near "Magdeburg";
- **structure**: the seed pairs (anchors) carry each entity's neighbourhood across: ``a`` is
  described by ``(relation, direction, anchor partner in B)`` of every neighbour of ``a`` that is
  an anchor, ``b`` by the same of its own neighbours, and the structure score is the cosine of the
  two binary descriptions (relation-free features too, since graphs in two languages seldom use
  a relation the same way; relation-specific ones only over relations both graphs have).

``score = names + weight × structure``, the weight chosen on a fifth of the seeds held out from
the anchors (never on the pairs being evaluated). Self-training then adds the pairs that are each
other's best match, with a clear margin over the runner-up, as anchors for ``rounds`` rounds
(kept only if the held-out seeds say it helps), as bootstrapping aligners (BootEA, Sun et al.,
2018) do. Where both graphs hold each entity once, a one-to-one assignment (the Hungarian method
over the candidates) replaces each entity's best match.

Evaluation (:meth:`EntityAligner.evaluate`) follows the alignment literature (DBP15K): each test
pair's source is ranked against the targets of all test pairs; Hits@1, Hits@10 and MRR (ties at
the mean rank), and the Hits@1 of the one-to-one assignment over the same candidates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from .base import KBError

WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)


def read_pairs(path: str | Path, kb_a, kb_b) -> list[tuple[str, str]]:
    """Entity pairs of a file, ``id in A<TAB>id in B`` a line (more fields, e.g. a score, are
    ignored; an index written as a float, ``12.0``, names entity ``12``). An id neither graph
    knows is refused by file and line."""
    from .graph_files import _lines

    path = Path(path)
    if not path.is_file():
        raise KBError(f"{path}: no such pair file")
    known = (set(kb_a.entities()), set(kb_b.entities()))
    pairs = []
    for number, text in _lines(path):
        fields = text.split("\t")
        if len(fields) < 2:
            raise KBError(f"{path}:{number}: expected 'entity in A<TAB>entity in B', got {text!r}")
        pair = []
        for value, ids, side in zip(fields[:2], known, "AB"):
            value = value.strip()
            if value not in ids and value.endswith(".0") and value[:-2] in ids:
                value = value[:-2]
            if value not in ids:
                raise KBError(f"{path}:{number}: {value!r} is no entity of graph {side}")
            pair.append(value)
        pairs.append((pair[0], pair[1]))
    return pairs


def split_pairs(pairs: Sequence[tuple[str, str]], train_fraction: float, seed: int = 0
                ) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A seeded shuffle of ``pairs`` cut into (train, test): the literature's 30% / 70%."""
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    cut = round(train_fraction * len(shuffled))
    return shuffled[:cut], shuffled[cut:]


def encode_entities(model, kb, prefix: str = "query: ", batch_size: int = 256, max_length: int = 64) -> np.ndarray:
    """L2-normalised vectors of every entity's text (:meth:`entity_text`), in ``kb.entities()`` order."""
    import torch

    texts = [prefix + kb.entity_text(e) for e in kb.entities()]
    with torch.inference_mode():
        vectors = np.asarray(model.encode(texts, batch_size=batch_size, max_length=max_length, normalize_embeddings=True),
                             dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def ranks_of(scores: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """1-based rank of ``gold[i]`` in row ``i`` of ``scores``, ties at the mean rank."""
    right = scores[np.arange(len(gold)), gold][:, None]
    return 1 + (scores > right).sum(1) + ((scores == right).sum(1) - 1) / 2


@dataclass
class EntityAligner:
    """Align the entities of ``kb_a`` to those of ``kb_b`` from their name vectors (rows in
    ``kb.entities()`` order, L2-normalised) and ``seeds`` (module docstring)."""

    kb_a: object
    kb_b: object
    vectors_a: np.ndarray
    vectors_b: np.ndarray
    seeds: list[tuple[str, str]]
    log: Callable[[str], None] = lambda line: None
    weight: float = 1.0
    rounds: int = 0
    anchors: list[tuple[str, str]] = field(default_factory=list)
    choice: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ids_a, self.ids_b = list(self.kb_a.entities()), list(self.kb_b.entities())
        self.index_a = {e: i for i, e in enumerate(self.ids_a)}
        self.index_b = {e: i for i, e in enumerate(self.ids_b)}
        if self.vectors_a.shape[0] != len(self.ids_a) or self.vectors_b.shape[0] != len(self.ids_b):
            raise KBError(f"name vectors for {self.vectors_a.shape[0]} and {self.vectors_b.shape[0]} entities, graphs "
                          f"of {len(self.ids_a)} and {len(self.ids_b)}")
        shared = set(self.kb_a.relations()) & set(self.kb_b.relations())
        self._edges_a = self._edges(self.kb_a, self.index_a, shared)
        self._edges_b = self._edges(self.kb_b, self.index_b, shared)
        self.anchors = list(self.seeds)

    @staticmethod
    def _edges(kb, index: dict[str, int], shared: set) -> list[tuple[int, Optional[str], str, int]]:
        """(entity, relation or None, direction, neighbour) of every triple, both ways."""
        out = []
        for h, r, t in kb.triples():
            rel = r if r in shared else None
            out += [(index[h], rel, "out", index[t]), (index[t], rel, "in", index[h])]
        return out

    # --- scores --------------------------------------------------------------------------------
    def _signatures(self, anchors: Sequence[tuple[str, str]]):
        """Row-normalised sparse descriptions [entities × features] of both graphs' entities by
        their anchored neighbours."""
        from scipy.sparse import csr_matrix

        partner = {self.index_a[a]: self.index_b[b] for a, b in anchors}
        anchored_b = set(partner.values())
        features: dict[tuple, int] = {}

        def matrix(edges, mapped):
            cells = set()
            for entity, rel, direction, neighbour in edges:
                target = mapped(neighbour)
                if target is None:
                    continue
                for key in ((direction, target), (rel, direction, target)) if rel is not None else ((direction, target),):
                    cells.add((entity, features.setdefault(key, len(features))))
            return cells

        cells_a = matrix(self._edges_a, partner.get)
        cells_b = matrix(self._edges_b, lambda n: n if n in anchored_b else None)
        width = max(len(features), 1)
        matrices = []
        for cells, rows in ((cells_a, len(self.ids_a)), (cells_b, len(self.ids_b))):
            r, c = (np.array(x, dtype=np.int64) for x in zip(*cells)) if cells else (np.zeros(0, np.int64),) * 2
            matrices.append(csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(rows, width)))
        # idf: a neighbour many entities share (a country, a genre) says little about which is which
        df = np.asarray(matrices[0].sum(0)).ravel() + np.asarray(matrices[1].sum(0)).ravel()
        idf = np.log((len(self.ids_a) + len(self.ids_b)) / np.maximum(df, 1)).astype(np.float32)
        out = []
        for m in matrices:
            m = csr_matrix(m.multiply(idf[None, :]))
            norms = np.sqrt(np.asarray(m.multiply(m).sum(1)).ravel())
            out.append(csr_matrix(m.multiply(1 / np.maximum(norms, 1e-12)[:, None])))
        return out

    def scores(self, rows: np.ndarray, cols: np.ndarray, weight: Optional[float] = None,
               signatures=None) -> np.ndarray:
        """Combined scores [len(rows), len(cols)] of entities ``rows`` of A against ``cols`` of B."""
        weight = self.weight if weight is None else weight
        names = self.vectors_a[rows] @ self.vectors_b[cols].T
        if weight == 0:
            return names
        sig_a, sig_b = signatures if signatures is not None else self._current()
        return names + weight * (sig_a[rows] @ sig_b[cols].T).toarray()

    def _current(self):
        if getattr(self, "_cache", None) is None or self._cache[0] != len(self.anchors):
            self._cache = (len(self.anchors), self._signatures(self.anchors))
        return self._cache[1]

    # --- fitting -------------------------------------------------------------------------------
    def _pairs_index(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        return (np.array([self.index_a[a] for a, _ in pairs], dtype=np.int64),
                np.array([self.index_b[b] for _, b in pairs], dtype=np.int64))

    def _mrr(self, pairs, anchors, weight) -> float:
        rows, cols = self._pairs_index(pairs)
        scores = self.scores(rows, cols, weight, self._signatures(anchors))
        return float((1 / ranks_of(scores, np.arange(len(rows)))).mean())

    def fit(self, rounds: Sequence[int] = (0, 1, 2, 3), seed: int = 0, valid_fraction: float = 0.2) -> "EntityAligner":
        """Choose ``weight`` and self-training ``rounds`` together on ``valid_fraction`` of the
        seeds held out from the anchors (MRR of each held-out pair among the held-out targets),
        then anchor every seed and run the chosen rounds."""
        if len(self.seeds) < 10:
            self.weight, self.rounds = (1.0 if self.seeds else 0.0), 0
            self.choice = {"weight": self.weight, "rounds": 0, "why": f"{len(self.seeds)} seeds: too few to hold out"}
            self.anchors = list(self.seeds)
            return self
        anchors, valid = split_pairs(self.seeds, 1 - valid_fraction, seed)
        held = {a for a, _ in valid} | {b for _, b in valid}
        grid: dict[tuple[float, int], float] = {}
        for weight in WEIGHTS:
            trial = list(anchors)
            grid[weight, 0] = self._mrr(valid, trial, weight)
            for round_ in range(1, max(rounds) + 1 if weight else 1):
                trial += [p for p in self.mutual_best(trial, weight) if p[0] not in held and p[1] not in held]
                grid[weight, round_] = self._mrr(valid, trial, weight)
        self.weight, self.rounds = max((k for k in grid if k[1] in rounds), key=lambda k: (grid[k], -k[1], -k[0]))
        self.log("  held-out seed MRR by (weight of structure, self-training rounds): "
                 + ", ".join(f"({w:g}, {r}): {m:.4f}" for (w, r), m in grid.items())
                 + f" -> ({self.weight:g}, {self.rounds})")
        self.choice = {"weight": self.weight, "rounds": self.rounds, "held_out_seeds": len(valid),
                       "valid_mrr": {f"{w:g},{r}": round(m, 4) for (w, r), m in grid.items()}}
        self.anchors = list(self.seeds)
        for _ in range(self.rounds):
            added = self.mutual_best(self.anchors)
            self.anchors += added
            self.log(f"  self-training: {len(added)} pairs that are each other's best added as anchors")
        return self

    def mutual_best(self, anchors: Sequence[tuple[str, str]], weight: Optional[float] = None, margin: float = 0.05,
                    chunk: int = 2048) -> list[tuple[str, str]]:
        """Pairs of entities outside ``anchors`` that are each other's best match under
        ``weight`` (default: the aligner's), the best ahead of the runner-up by ``margin`` on
        both sides."""
        taken_a, taken_b = {a for a, _ in anchors}, {b for _, b in anchors}
        rows = np.array([i for i, e in enumerate(self.ids_a) if e not in taken_a], dtype=np.int64)
        cols = np.array([j for j, e in enumerate(self.ids_b) if e not in taken_b], dtype=np.int64)
        if len(rows) < 2 or len(cols) < 2:
            return []
        signatures = self._signatures(anchors)
        best_col, row_gap = np.zeros(len(rows), np.int64), np.zeros(len(rows), np.float32)
        col_best = np.full(len(cols), -np.inf, dtype=np.float32)
        col_second, col_arg = col_best.copy(), np.zeros(len(cols), np.int64)
        for start in range(0, len(rows), chunk):
            block = self.scores(rows[start:start + chunk], cols, weight, signatures)
            top2 = np.sort(np.partition(block, -2, axis=1)[:, -2:], axis=1)
            best_col[start:start + chunk] = block.argmax(1)
            row_gap[start:start + chunk] = top2[:, 1] - top2[:, 0]
            if len(block) > 1:
                pair = np.sort(np.partition(block, -2, axis=0)[-2:], axis=0)
                first, second = pair[1], pair[0]
            else:
                first, second = block[0], np.full(len(cols), -np.inf, dtype=np.float32)
            col_arg = np.where(first > col_best, start + block.argmax(0), col_arg)
            # the runner-up of the union of two top-2 lists
            col_second = np.maximum(np.minimum(col_best, first), np.maximum(col_second, second))
            col_best = np.maximum(col_best, first)
        col_gap = col_best - col_second
        out = []
        for i, j in enumerate(best_col):
            if col_arg[j] == i and row_gap[i] >= margin and col_gap[j] >= margin:
                out.append((self.ids_a[rows[i]], self.ids_b[cols[j]]))
        return out

    # --- results -------------------------------------------------------------------------------
    def evaluate(self, test: Sequence[tuple[str, str]]) -> dict[str, float]:
        """Hits@1/10 and MRR of each test pair's source ranked against every test target, and
        the Hits@1 of the one-to-one assignment over the same candidates (module docstring)."""
        from scipy.optimize import linear_sum_assignment

        if not test:
            raise KBError("no test pairs to evaluate (every gold pair is a seed)")
        rows, cols = self._pairs_index(test)
        scores = self.scores(rows, cols)
        ranks = ranks_of(scores, np.arange(len(rows)))
        assigned_rows, assigned_cols = linear_sum_assignment(scores, maximize=True)
        assigned = float((assigned_rows == assigned_cols).sum() / len(rows))
        return {"hits@1": float((ranks <= 1).mean()), "hits@10": float((ranks <= 10).mean()),
                "mrr": float((1 / ranks).mean()), "assigned_hits@1": assigned, "pairs": len(test)}

    def align(self, one_to_one: bool = True, candidates: int = 20, chunk: int = 2048) -> list[tuple[str, str, float]]:
        """Every entity of A outside the seeds with its match in B outside the seeds, best
        first: each one's best, or (``one_to_one``) a greedy one-to-one matching over each
        entity's ``candidates`` best."""
        taken_a, taken_b = {a for a, _ in self.seeds}, {b for _, b in self.seeds}
        rows = np.array([i for i, e in enumerate(self.ids_a) if e not in taken_a], dtype=np.int64)
        cols = np.array([j for j, e in enumerate(self.ids_b) if e not in taken_b], dtype=np.int64)
        if not len(rows) or not len(cols):
            return []
        k = min(candidates if one_to_one else 1, len(cols))
        found = []
        for start in range(0, len(rows), chunk):
            block = self.scores(rows[start:start + chunk], cols)
            top = np.argpartition(-block, k - 1, axis=1)[:, :k]
            for i, (row, best) in enumerate(zip(rows[start:start + chunk], top)):
                found += [(float(block[i, j]), int(row), int(cols[j])) for j in best]
        found.sort(key=lambda x: -x[0])
        out, used_a, used_b = [], set(), set()
        for score, i, j in found:
            if i in used_a or (one_to_one and j in used_b):
                continue
            used_a.add(i)
            used_b.add(j)
            out.append((self.ids_a[i], self.ids_b[j], score))
        return out
