"""Byte-pair encoding (Sennrich et al., 2016) over a vocabulary of pieces and an ordered list of
merges, run by the Rust ``tokenizers`` library, with sentencepiece's text handling (Kudo &
Richardson, 2018): the model's compiled character map, extra spaces removed, a ``▁`` before
every word. :meth:`BPETokenizer.from_sentencepiece` takes the pieces, the merges and the
normaliser of a sentencepiece BPE model (trained by babelzoo or imported) and gives its ids.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Optional, Sequence

from ._spm_model import ModelSpec, metaspace_pipeline, model_spec
from .fast import FastTokenizer, read_vocabulary, write_vocabulary
from .specials import SpecialIds, reserved_ids
from .tokenizer import PAIR_STYLES, TokenizerError

VOCAB_FILE = "bpe.json"
SPACE = "\u2581"


def merges_from_pieces(pieces: Sequence[str], scores: Sequence[float], skip: frozenset[int] = frozenset()
                       ) -> list[tuple[str, str]]:
    """The merges of a sentencepiece BPE model in priority order. sentencepiece joins the
    adjacent pair whose joined piece scores highest, so every split of a piece into two pieces
    is a merge ranked by the joined piece's score (then by its id and the halves' ids); pieces in
    ``skip`` (control and user-defined symbols) take part in no merge."""
    index: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        if i not in skip:
            index.setdefault(piece, i)
    ranked = []
    for piece, i in index.items():
        for k in range(1, len(piece)):
            left, right = index.get(piece[:k]), index.get(piece[k:])
            if left is not None and right is not None:
                ranked.append((-scores[i], i, left, right))
    ranked.sort()
    return [(pieces[left], pieces[right]) for _, _, left, right in ranked]


def bpe_model(pieces: Sequence[str], merges: Sequence[tuple[str, str]], unk_token: str, byte_fallback: bool):
    from tokenizers import models

    vocab: dict[str, int] = {}
    for i, piece in enumerate(pieces):
        vocab.setdefault(piece, i)
    return models.BPE(vocab, list(merges), unk_token=unk_token, fuse_unk=True, byte_fallback=byte_fallback)


class BPETokenizer(FastTokenizer):
    """A BPE vocabulary behind the :class:`Tokenizer` interface.

    >>> tok = BPETokenizer.from_sentencepiece(SentencePieceTokenizer.train(corpus, 8000, model_type="bpe"))
    >>> tok.tokenize("Guten Morgen")
    ['▁Gut', 'en', '▁Morgen']
    """

    kind = "bpe"

    def __init__(self, pieces: Sequence[str], merges: Sequence[tuple[str, str]], spec: ModelSpec,
                 ids: dict[str, int], special_tokens: dict[str, int], languages: tuple[str, ...] = (),
                 pair_style: str = "bert", prefix_language_tag: bool = False, max_length: Optional[int] = None):
        self.vocab = list(pieces)
        self.merges = [tuple(m) for m in merges]
        self.spec = spec
        n = len(self.vocab)
        wrong = {k: v for k, v in {**ids, **special_tokens}.items() if not (isinstance(v, int) and 0 <= v < n)}
        if wrong or set(ids) != {"pad", "cls", "sep", "unk", "mask"}:
            raise TokenizerError(f"special ids {wrong or ids} do not fit a {n}-piece vocabulary "
                                 "(need pad, cls, sep, unk and mask)")
        if pair_style not in PAIR_STYLES:
            raise TokenizerError(f"unknown pair_style {pair_style!r} (known: {', '.join(PAIR_STYLES)})")
        self.pair_style, self.prefix_language_tag, self.max_length = pair_style, prefix_language_tag, max_length
        self._special_tokens = dict(special_tokens)
        self.index: dict[str, int] = {}
        for i, piece in enumerate(self.vocab):
            self.index.setdefault(piece, i)
        self._specials = SpecialIds(vocab_size=n, languages={lang: i for i, lang in enumerate(languages)},
                                    special=frozenset(self._special_tokens.values()) | set(ids.values()),
                                    **reserved_ids(self._special_tokens, languages), **ids)
        self._set_backend(self.hf_pipeline())

    @classmethod
    def from_sentencepiece(cls, tok) -> "BPETokenizer":
        """The same ids as a :class:`~babelzoo.datasets.spm.SentencePieceTokenizer` over a BPE model."""
        spec = model_spec(tok.model_proto, "sentencepiece model")
        if spec.model_type != "bpe":
            raise TokenizerError(f"a {spec.model_type} sentencepiece model is not BPE")
        if tok.layout == "albert":
            raise TokenizerError("ALBERT's text normalisation has no BPE counterpart here; use the unigram model")
        pieces, scores = tok.pieces_and_scores()
        s = tok.specials
        return cls(pieces, merges_from_pieces(pieces, scores, tok.symbol_ids()), spec,
                   ids={"pad": s.pad, "cls": s.cls, "sep": s.sep, "unk": s.unk, "mask": s.mask},
                   special_tokens=tok.special_tokens(), languages=tok.languages, pair_style=tok.pair_style,
                   prefix_language_tag=tok.prefix_language_tag)

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        return self._special_tokens

    def token_to_id(self, token: str) -> int:
        return self.index.get(token, self._specials.unk)

    def _word_start_flags(self) -> list[bool]:
        special = self._specials.all_special()
        return [i in special or p.startswith(SPACE) for i, p in enumerate(self.vocab)]

    def hf_pipeline(self):
        model = bpe_model(self.vocab, self.merges, self.vocab[self._specials.unk], self.spec.byte_fallback)
        return metaspace_pipeline(model, self.spec)

    # ---- persistence ----------------------------------------------------------------------------

    def _save_backend(self, directory: Path) -> dict:
        s = self._specials
        data = {"pieces": self.vocab, "merges": [list(m) for m in self.merges],
                "ids": {"pad": s.pad, "cls": s.cls, "sep": s.sep, "unk": s.unk, "mask": s.mask},
                "special_tokens": self._special_tokens,
                "normalizer": {"charsmap": base64.b64encode(self.spec.charsmap).decode("ascii"),
                               "add_dummy_prefix": self.spec.add_dummy_prefix,
                               "remove_extra_whitespaces": self.spec.remove_extra_whitespaces,
                               "byte_fallback": self.spec.byte_fallback}}
        write_vocabulary(directory, VOCAB_FILE, data)
        return {"vocab_file": VOCAB_FILE, "max_length": self.max_length}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict, meta_path: Path) -> "BPETokenizer":
        o = meta.get("options", {})
        path, data = read_vocabulary(directory, o.get("vocab_file", VOCAB_FILE), "BPE", meta_path)
        try:
            norm = data["normalizer"]
            spec = ModelSpec("bpe", bool(norm["byte_fallback"]), base64.b64decode(norm["charsmap"]),
                             bool(norm["add_dummy_prefix"]), bool(norm["remove_extra_whitespaces"]))
            return cls(data["pieces"], data["merges"], spec, data["ids"], data["special_tokens"],
                       languages=tuple(meta.get("languages", ())), pair_style=o.get("pair_style", "bert"),
                       prefix_language_tag=o.get("prefix_language_tag", False), max_length=o.get("max_length"))
        except TokenizerError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise TokenizerError(f"{path}: malformed BPE vocabulary ({type(err).__name__}: {err})") from None
