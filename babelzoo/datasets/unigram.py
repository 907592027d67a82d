"""Unigram-LM segmentation over a shipped vocabulary (pieces + log-probabilities), run by the
Rust ``tokenizers`` library.

Kudo (2018), "Subword Regularization: Improving Neural Network Translation Models with Multiple
Subword Candidates": a sentence x is segmented into the pieces (x_1..x_m) that maximise
Σ log p(x_i), found by Viterbi over character positions. This module runs XLM-R's sentencepiece
unigram vocabulary (multilingual-e5's) exactly as Hugging Face's ``XLMRobertaTokenizer`` does,
the tokenizer the model was trained with:

1. the special tokens ``<s> </s> <pad> <unk> <mask>`` written in the text are taken out whole;
2. every codepoint of the rest goes through a per-codepoint normalisation map (NFKC folds,
   control characters removed, exotic spaces to U+0020), compiled into sentencepiece's
   character-map format for ``tokenizers``' ``Precompiled`` normaliser;
3. the text is split at whitespace (which disappears: an empty or all-space text has no
   pieces) and each word gets a leading metaspace ``▁`` (U+2581);
4. Viterbi picks the best path through each word; a run of characters no piece covers becomes
   one ``<unk>`` (score min(scores) − 10, sentencepiece's unknown penalty).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .fast import FastTokenizer, read_vocabulary, write_vocabulary
from .specials import SpecialIds
from .tokenizer import TokenizerError, check_subset

METASPACE = "\u2581"
VOCAB_FILE = "unigram.json"


def unigram_model(pieces: Sequence[str], scores: Sequence[float], unk: int, byte_fallback: bool = False):
    from tokenizers import models

    return models.Unigram([(p, float(s)) for p, s in zip(pieces, scores)], unk, byte_fallback)


class UnigramTokenizer(FastTokenizer):
    """A :class:`Tokenizer` over a shipped unigram vocabulary (XLM-R's, as in multilingual-e5),
    framed RoBERTa-style: ``<s> A </s>`` and ``<s> A </s></s> B </s>``.

    The saved ``tokenizer.json`` is this tokenizer's own pipeline, so ``AutoTokenizer`` gives
    the same ids on every text.

        >>> tok = UnigramTokenizer(pieces, scores, normalisation, bos=0, eos=2, pad=1, unk=3)
        >>> tok.encode("query: Hello world")
        [0, 41, 1294, 12, 35378, 8999, 2]
    """

    kind = "unigram"
    pair_style = "roberta"
    # tokenizer.json is read as written (an XLMRobertaTokenizerFast would be rebuilt from the
    # vocabulary by transformers: the same pipeline, but only for XLM-R's own special ids)
    hf_class = "PreTrainedTokenizerFast"

    def __init__(self, pieces: Sequence[str], scores: Sequence[float] | np.ndarray,
                 normalisation: Mapping[int, Sequence[int]], bos: int, eos: int, pad: int, unk: int,
                 mask: int | None = None, max_length: int = 512):
        if len(pieces) != len(scores):
            raise TokenizerError(f"{len(pieces)} pieces but {len(scores)} scores")
        self.vocab = list(pieces)
        self.scores = np.asarray(scores, dtype=np.float32).astype(np.float64).tolist()  # exact float32 values
        n = len(self.vocab)
        for name, value in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
            if not isinstance(value, int) or not 0 <= value < n:
                raise TokenizerError(f"{name} id {value!r} is outside the {n}-piece vocabulary")
        # piece -> id; the lowest id wins when two pieces share a string, as in the reference's lookup
        self.index: dict[str, int] = {}
        for i, piece in enumerate(self.vocab):
            if i != unk:
                self.index.setdefault(piece, i)
        if mask is None:
            if "<mask>" not in self.index:
                raise TokenizerError("the vocabulary has no '<mask>' piece; pass mask=ID")
            mask = self.index["<mask>"]
        self.normalisation = {int(cp): tuple(int(c) for c in out) for cp, out in normalisation.items()}
        self.bos, self.eos, self.pad, self.unk, self.mask = bos, eos, pad, unk, mask
        self.max_length = max_length
        self._specials = SpecialIds(pad=pad, cls=bos, sep=eos, unk=unk, mask=mask, vocab_size=n,
                                    special=frozenset({bos, eos, pad, unk, mask}))
        self._charsmap = None
        self._set_backend(self.hf_pipeline())

    def hf_pipeline(self):
        from ._spm_model import compile_charsmap, whitespace_split_pipeline

        if self._charsmap is None:
            self._charsmap = compile_charsmap(self.normalisation)
        return whitespace_split_pipeline(unigram_model(self.vocab, self.scores, self.unk), self._charsmap)

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        return {self.vocab[i]: i for i in (self.bos, self.pad, self.eos, self.unk, self.mask)}

    def normalize(self, text: str) -> str:
        """The words Viterbi runs over, each with its leading ``▁``, joined by nothing."""
        words = self.backend.pre_tokenizer.pre_tokenize_str(self.backend.normalizer.normalize_str(text))
        return "".join(word for word, _ in words)

    def _detokenize(self, ids: list[int]) -> str:
        text = "".join(self.vocab[i] for i in ids).replace(METASPACE, " ")
        return text[1:] if text.startswith(" ") else text

    def id_to_token(self, index: int) -> str:
        if not 0 <= index < len(self.vocab):
            raise TokenizerError(f"id {index} is outside the vocabulary (size {len(self.vocab)})")
        return self.vocab[index]

    def token_to_id(self, token: str) -> int:
        return self.index.get(token, self.unk)

    def _word_start_flags(self) -> list[bool]:
        special = self._specials.all_special()
        return [p.startswith(METASPACE) or i in special for i, p in enumerate(self.vocab)]

    def subset_required(self) -> frozenset[int]:
        # Viterbi scores an unknown character min(scores) − 10, so the lowest-scoring piece stays
        # (a smaller vocabulary would make <unk> paths more attractive)
        lowest = min((i for i in range(len(self.vocab)) if i != self.unk), key=self.scores.__getitem__)
        return super().subset_required() | {lowest}

    def subset(self, keep: Sequence[int]) -> "UnigramTokenizer":
        """The pieces ``keep`` with their scores. Viterbi over fewer pieces finds the same best
        path for any text whose best path uses kept pieces only (every other path it could take
        was a candidate before), and the unknown penalty is unchanged (:meth:`subset_required`)."""
        keep = check_subset(self, keep)
        new = {old: i for i, old in enumerate(keep)}
        small = UnigramTokenizer([self.vocab[i] for i in keep], [self.scores[i] for i in keep], self.normalisation,
                                 bos=new[self.bos], eos=new[self.eos], pad=new[self.pad], unk=new[self.unk],
                                 mask=new[self.mask], max_length=self.max_length)
        return self._trimmed(small)

    @functools.cached_property
    def lowest_score(self) -> float:
        """The lowest score of a piece; Viterbi scores an unknown character 10 below it
        (sentencepiece's unknown penalty)."""
        return min(s for i, s in enumerate(self.scores) if i != self.unk)

    def best_path(self, text: str) -> tuple[list[int], float]:
        """The ids Viterbi picks for ``text`` taken as one word's characters (no normalisation,
        no whitespace split: a leading ``▁`` is matched as written) and their summed score, an
        unknown run scoring :attr:`lowest_score` − 10 per character."""
        tokens = self.backend.model.tokenize(text)
        unknown = self.lowest_score - 10.0
        return ([t.id for t in tokens],
                sum(len(t.value) * unknown if t.id == self.unk else self.scores[t.id] for t in tokens))

    def with_pieces(self, pieces: Sequence[str], scores: Sequence[float]) -> "UnigramTokenizer":
        """This vocabulary with ``pieces`` appended (ids from :attr:`vocab_size` on), Viterbi
        scoring each with its entry of ``scores``. A word whose characters hold none of the new
        pieces segments exactly as before: its lattice is unchanged, and so is the unknown
        penalty, which is why a score below the lowest old one is refused."""
        pieces, scores = list(pieces), [float(s) for s in scores]
        if len(pieces) != len(scores):
            raise TokenizerError(f"with_pieces: {len(pieces)} pieces but {len(scores)} scores")
        lowest = self.lowest_score
        taken = set(self.vocab)
        for piece, score in zip(pieces, scores):
            if not isinstance(piece, str) or not piece or any(c.isspace() for c in piece):
                raise TokenizerError(f"with_pieces: {piece!r} is not a piece (a non-empty text without whitespace)")
            if piece in taken:
                raise TokenizerError(f"with_pieces: {piece!r} is already in the vocabulary")
            if not lowest <= score <= 0.0:
                raise TokenizerError(f"with_pieces: {piece!r} has score {score}; a score lies in [{lowest:.4f}, 0] "
                                     "(below the lowest old score the unknown penalty would move)")
            taken.add(piece)
        grown = UnigramTokenizer(self.vocab + pieces, self.scores + scores, self.normalisation, bos=self.bos,
                                 eos=self.eos, pad=self.pad, unk=self.unk, mask=self.mask, max_length=self.max_length)
        if self.trimmed_from is not None:  # the trimmed-away pieces are still missing
            grown.trimmed_from = self.trimmed_from + len(pieces)
        return grown

    # ---- persistence ----------------------------------------------------------------------------

    def _save_backend(self, directory: Path) -> dict:
        data = {"pieces": self.vocab, "scores": self.scores,
                "normalisation": {str(cp): list(out) for cp, out in sorted(self.normalisation.items())},
                "bos": self.bos, "eos": self.eos, "pad": self.pad, "unk": self.unk, "mask": self.mask}
        write_vocabulary(directory, VOCAB_FILE, data)
        return {"vocab_file": VOCAB_FILE, "max_length": self.max_length}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict, meta_path: Path) -> "UnigramTokenizer":
        options = meta.get("options", {})
        path, data = read_vocabulary(directory, options.get("vocab_file", VOCAB_FILE), "unigram", meta_path)
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

