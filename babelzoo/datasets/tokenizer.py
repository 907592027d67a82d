"""The :class:`Tokenizer` interface: text → ids with special-token framing, batching with padding
and truncation, decoding, whole-word boundaries, and saving beside a model checkpoint.

Backends: :class:`~babelzoo.datasets.wordpiece.WordPieceTokenizer` (BERT ``vocab.txt``),
:class:`~babelzoo.datasets.unigram.UnigramTokenizer` (a unigram vocabulary of pieces and scores,
e.g. multilingual-e5's) and :class:`~babelzoo.datasets.bpe.BPETokenizer` (pieces and merges), all
run by the Rust ``tokenizers`` library, and
:class:`~babelzoo.datasets.spm.SentencePieceTokenizer` (unigram or BPE, trained by babelzoo, or
imported from XLM-R or ALBERT). :func:`load_tokenizer` reads a tokenizer saved by
:meth:`~babelzoo.datasets.tokenizer_files.TokenizerFiles.save` (the files are described in
:mod:`babelzoo.datasets.tokenizer_files`; directories saved before kept the metadata in
``tokenizer.json``, and they load as before) or a Hugging Face tokenizer directory.

    >>> tok = load_tokenizer("checkpoints/xlm_tiny")
    >>> batch = tok.batch_encode(["Hallo Welt", "Bonjour"], langs=["de", "fr"], max_length=32)
    >>> batch["input_ids"].shape, batch["language_ids"][1, 0].item() == tok.specials.languages["fr"]
"""

from __future__ import annotations

import importlib
import json
import re
import warnings
from abc import abstractmethod
from pathlib import Path
from typing import ClassVar, Optional, Sequence, Union

import torch

from ..errors import BabelzooError, InputTypeError
from ._batching import as_list as _as_list
from ._batching import check_options as _check_options
from ._batching import check_texts as _check_texts
from ._batching import expand_langs as _expand_langs
from ._batching import framed_rows as _framed_rows
from ._batching import padded as _padded
from ._batching import single_rows as _single_rows
from .specials import SpecialIds, language_tag
from .tokenizer_files import FORMAT, HF_TOKENIZER_FILE, META_FILE, VERSION, TokenizerFiles

LEGACY_META_FILE = "tokenizer.json"  # where directories saved before kept the metadata
# backend type (the "type" field of the metadata) -> "module:class", imported on demand
BACKENDS = {
    "sentencepiece": "babelzoo.datasets.spm:SentencePieceTokenizer",
    "wordpiece": "babelzoo.datasets.wordpiece:WordPieceTokenizer",
    "unigram": "babelzoo.datasets.unigram:UnigramTokenizer",
    "bpe": "babelzoo.datasets.bpe:BPETokenizer",
}
PAIR_STYLES = ("bert", "roberta")

Lang = Union[str, None]


class TokenizerError(BabelzooError, ValueError):
    """A tokenizer directory or file that cannot be read, or an unusable request."""


class TrimmedVocabularyWarning(UserWarning):
    """Text encoded by a trimmed tokenizer (:func:`~babelzoo.compression.trim_vocabulary`) fell
    outside the pieces it kept and became ``<unk>``."""


class Tokenizer(TokenizerFiles):
    """Base class: subclasses provide the vocabulary and the text → piece step; framing,
    batching, truncation, padding and decoding of special tokens live here, once, and saving in
    :class:`~babelzoo.datasets.tokenizer_files.TokenizerFiles`.

    Framing (``pair_style``):

    - ``"bert"``: ``[CLS] A [SEP]`` and ``[CLS] A [SEP] B [SEP]``, segment ids 0 for
      ``[CLS] A [SEP]`` and 1 for ``B [SEP]`` (Devlin et al., 2019).
    - ``"roberta"``: ``<s> A </s>`` and ``<s> A </s></s> B </s>``, segment ids all 0
      (Liu et al., 2019; XLM-R, Conneau et al., 2020, has one segment type).

    With ``prefix_language_tag`` a language tag (``[de]``) follows the start token of each
    sentence whose language is given. Independently, any call given languages returns
    ``language_ids`` (indices into ``specials.languages``) for XLM language embeddings
    (Lample & Conneau, 2019).
    """

    kind: ClassVar[str]
    hf_class: ClassVar[str] = "PreTrainedTokenizerFast"  # tokenizer_class in tokenizer_config.json
    pair_style: str = "bert"
    prefix_language_tag: bool = False
    # the vocabulary size before :meth:`subset` (trim_vocabulary), when this tokenizer was trimmed
    trimmed_from: Optional[int] = None

    # ---- what a backend provides -------------------------------------------------------------

    @property
    @abstractmethod
    def specials(self) -> SpecialIds:
        """Special-token ids, vocabulary size and the language → embedding index map."""

    @abstractmethod
    def special_tokens(self) -> dict[str, int]:
        """Every special token string that is matched verbatim in input text, with its id."""

    @abstractmethod
    def _pieces(self, text: str) -> list[str]:
        """Pieces of a text that holds no special token."""

    @abstractmethod
    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        """Ids of texts that hold no special token (batched: backends vectorise this)."""

    @abstractmethod
    def _detokenize(self, ids: list[int]) -> str:
        """Text of a run of ordinary (non-special) ids."""

    @abstractmethod
    def id_to_token(self, index: int) -> str:
        ...

    @abstractmethod
    def token_to_id(self, token: str) -> int:
        """Id of a piece; the unknown id when the piece is not in the vocabulary."""

    @abstractmethod
    def _word_start_flags(self) -> list[bool]:
        ...

    @classmethod
    @abstractmethod
    def _from_saved(cls, directory: Path, meta: dict, meta_path: Path) -> "Tokenizer":
        """The tokenizer of a saved directory; ``meta_path`` (the metadata file) names it in errors."""

    def subset(self, keep: Sequence[int]) -> "Tokenizer":
        """A tokenizer over the pieces ``keep`` (old ids, ascending; new id = rank in ``keep``)
        that segments every text whose pieces all lie in ``keep`` exactly as this one does.
        Backends that can guarantee this override it (see :meth:`subset_required`)."""
        raise TokenizerError(f"{self.kind} tokenizers cannot be restricted to a subset of their pieces "
                             "(supported: unigram and wordpiece vocabularies)")

    def subset_required(self) -> frozenset[int]:
        """The ids every :meth:`subset` must keep: the special tokens, and whatever else the
        backend's segmentation depends on."""
        return self.specials.all_special()

    def with_pieces(self, pieces: Sequence[str], scores: Sequence[float]) -> "Tokenizer":
        """This tokenizer with ``pieces`` added after its last id, each with its segmentation
        score (:func:`~babelzoo.compression.extend_vocabulary`). Backends whose segmentation can
        take scored pieces override it."""
        raise TokenizerError(f"{self.kind} tokenizers cannot take new pieces (supported: unigram vocabularies)")

    def best_path(self, text: str) -> tuple[list[int], float]:
        """The ids of the best segmentation of ``text`` as one stretch of characters (no
        normalisation, no split into words) and its score; backends that score pieces override it."""
        raise TokenizerError(f"{self.kind} tokenizers do not score segmentations (supported: unigram vocabularies)")

    def _trimmed(self, small: "Tokenizer") -> "Tokenizer":
        """``small`` (a :meth:`subset` of this tokenizer), marked as trimmed from the full vocabulary."""
        small.trimmed_from = self.trimmed_from or self.vocab_size
        return small

    def _warn_unknown(self, rows: Sequence[Optional[list[int]]]) -> None:
        """A trimmed tokenizer says how much of a text it could not keep: the share of ``<unk>``
        among the content pieces of this call (one warning per call that has any)."""
        if self.trimmed_from is None:
            return
        rows = [r for r in rows if r is not None]
        unk, total = self.specials.unk, sum(map(len, rows))
        found = sum(r.count(unk) for r in rows)
        if found:
            warnings.warn(f"{found} of {total} pieces ({found / total:.1%}) are {self.id_to_token(unk)}: this "
                          f"tokenizer keeps {self.vocab_size:,} of the {self.trimmed_from:,} pieces of the vocabulary "
                          "it was trimmed from, and the text falls outside them; trim with texts that cover it, "
                          "or encode with the full tokenizer", TrimmedVocabularyWarning, stacklevel=3)

    # ---- derived properties ------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return self.specials.vocab_size

    @property
    def languages(self) -> tuple[str, ...]:
        """Language codes in language-embedding order."""
        langs = self.specials.languages
        return tuple(sorted(langs, key=langs.__getitem__))

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size}, languages={list(self.languages)})"

    # ---- text → pieces / ids -----------------------------------------------------------------

    def _special_pattern(self) -> Optional[re.Pattern]:
        cached = getattr(self, "_special_re", None)
        if cached is None:
            tokens = sorted(self.special_tokens(), key=len, reverse=True)  # longest match first
            cached = re.compile("(" + "|".join(map(re.escape, tokens)) + ")") if tokens else False
            self._special_re = cached
        return cached or None

    def _segments(self, text: str) -> list[str]:
        """Split text around special tokens written verbatim ("a <mask> b"), as HF does."""
        if not isinstance(text, str):
            raise InputTypeError(f"expected text as str, got {type(text).__name__}")
        pattern = self._special_pattern()
        return [text] if pattern is None else [s for s in pattern.split(text) if s]

    def tokenize(self, text: str) -> list[str]:
        """Pieces of ``text`` without framing; special tokens written in the text stay whole."""
        specials = self.special_tokens()
        out: list[str] = []
        for segment in self._segments(text):
            out.extend([segment] if segment in specials else self._pieces(segment))
        return out

    def _content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        specials = self.special_tokens()
        split = [self._segments(t) for t in texts]
        plain = [s for segs in split for s in segs if s not in specials]
        encoded = iter(self._piece_ids(plain)) if plain else iter(())
        out = []
        for segs in split:
            ids: list[int] = []
            for s in segs:
                ids.extend([specials[s]] if s in specials else next(encoded))
            out.append(ids)
        return out

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.token_to_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self.id_to_token(int(i)) for i in _as_list(ids)]

    # ---- framing ------------------------------------------------------------------------------

    def _language_index(self, lang: str) -> int:
        try:
            return self.specials.languages[lang]
        except KeyError:
            known = ", ".join(self.languages) or "none: this tokenizer has no languages"
            raise TokenizerError(f"unknown language {lang!r} (known: {known})") from None

    def _tag(self, lang: Lang) -> list[int]:
        if lang is None:
            return []
        self._language_index(lang)
        if not self.prefix_language_tag:
            return []
        return [self.special_tokens()[language_tag(lang)]]

    def num_special_tokens(self, pair: bool = False, langs: tuple[Lang, Lang] = (None, None)) -> int:
        tags = len(self._tag(langs[0])) + (len(self._tag(langs[1])) if pair else 0)
        if not pair:
            return 2 + tags
        return (4 if self.pair_style == "roberta" else 3) + tags

    def _frame(self, a: list[int], b: Optional[list[int]], lang_a: Lang, lang_b: Lang
               ) -> tuple[list[int], list[int], list[int]]:
        """Return ids, segment ids and language ids (0 where no language is given)."""
        s = self.specials
        first = [s.cls, *self._tag(lang_a), *a, s.sep]
        la = self._language_index(lang_a) if lang_a is not None else 0
        if b is None:
            return first, [0] * len(first), [la] * len(first)
        if self.pair_style == "roberta":
            second = [s.sep, *self._tag(lang_b), *b, s.sep]
            segment = 0
        else:
            second = [*self._tag(lang_b), *b, s.sep]
            segment = 1
        lb = self._language_index(lang_b) if lang_b is not None else 0
        return (first + second, [0] * len(first) + [segment] * len(second),
                [la] * len(first) + [lb] * len(second))

    def encode(self, text: str, lang: Lang = None, add_special_tokens: bool = True) -> list[int]:
        """Ids of one text: ``[CLS] (tag) pieces [SEP]``, or the bare pieces."""
        (ids,) = self._content_ids([text])
        self._warn_unknown([ids])
        if lang is not None:
            self._language_index(lang)
        if not add_special_tokens:
            return ids
        return self._frame(ids, None, lang, None)[0]

    def encode_pair(self, a: str, b: str, lang_a: Lang = None, lang_b: Lang = None
                    ) -> tuple[list[int], list[int]]:
        """Ids and segment ids of a framed pair (see the class docstring for the two styles)."""
        ids_a, ids_b = self._content_ids([a, b])
        self._warn_unknown([ids_a, ids_b])
        ids, segments, _ = self._frame(ids_a, ids_b, lang_a, lang_b)
        return ids, segments

    def batch_encode(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None, langs=None,
                     max_length: Optional[int] = None, padding: Union[bool, str] = True,
                     truncation: bool = True, return_tensors: Optional[str] = "pt",
                     add_special_tokens: bool = True) -> dict:
        """Encode a batch into ``input_ids``, ``attention_mask`` (1 = token) and ``segment_ids``,
        plus ``language_ids`` when ``langs`` is given.

        ``langs``: one code for the whole batch, one per text, or for pairs one ``(a, b)`` tuple
        (or one code) per pair. ``padding``: ``True``/``"longest"`` pads to the longest row,
        ``"max_length"`` to ``max_length``, ``False`` not at all (then ``return_tensors=None``
        unless all rows have the same length). ``truncation`` cuts content tokens, never the
        framing, longest side first for pairs, so that rows fit ``max_length``.
        """
        texts = _check_texts(texts, "texts")
        if pairs is not None:
            pairs = _check_texts(pairs, "pairs")
            if len(pairs) != len(texts):
                raise TokenizerError(f"texts has {len(texts)} entries but pairs has {len(pairs)}")
        _check_options(padding, max_length, return_tensors)
        lang_pairs = _expand_langs(langs, len(texts), pairs is not None)

        ids_a = self._content_ids(texts)
        ids_b = self._content_ids(pairs) if pairs is not None else [None] * len(texts)
        self._warn_unknown(ids_a + ids_b)
        if pairs is None and langs is None and add_special_tokens:
            rows, segs, lang_rows = _single_rows(self, ids_a, max_length, truncation), None, None
        else:
            rows, segs, lang_rows = _framed_rows(self, ids_a, ids_b, lang_pairs, max_length, truncation,
                                                 add_special_tokens)
        return _padded(rows, segs, lang_rows if langs is not None else None, padding, max_length,
                       self.specials.pad, return_tensors)

    # ---- ids → text ---------------------------------------------------------------------------

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Text of a sequence of ids (a list or a 1-D tensor); special tokens dropped or shown."""
        ids = _as_list(ids)
        special = self.specials.all_special() | set(self.special_tokens().values())
        parts: list[str] = []
        run: list[int] = []
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise TokenizerError(f"id {i} is outside the vocabulary (size {self.vocab_size})")
            if i in special and skip_special_tokens:
                continue  # decode what is left as one run, as if the special token were never there
            if i in special:
                if run:
                    parts.append(self._detokenize(run))
                    run = []
                parts.append(self.id_to_token(i))
            else:
                run.append(i)
        if run:
            parts.append(self._detokenize(run))
        return " ".join(p for p in parts if p)

    def batch_decode(self, rows, skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(r, skip_special_tokens) for r in _as_list(rows)]

    def word_starts(self) -> torch.Tensor:
        """``BoolTensor[vocab_size]``, True where a piece begins a word (sentencepiece ``▁``
        prefix; WordPiece: no ``##``). Special tokens count as word starts. Whole-word masking
        (Cui et al., 2019) masks a start piece together with the pieces that follow it."""
        cached = getattr(self, "_word_starts", None)
        if cached is None:
            cached = torch.tensor(self._word_start_flags(), dtype=torch.bool)
            self._word_starts = cached
        return cached

    # ---- loading ------------------------------------------------------------------------------

    @classmethod
    def load(cls, directory: Union[str, Path]) -> "Tokenizer":
        """Load a tokenizer saved by :meth:`~babelzoo.datasets.tokenizer_files.TokenizerFiles.save` (or a
        Hugging Face tokenizer directory)."""
        tokenizer = load_tokenizer(directory)
        if tokenizer is None:
            raise TokenizerError(f"{directory}: no tokenizer files ({META_FILE}, vocab.txt, "
                                 "sentencepiece.bpe.model or spiece.model)")
        if not isinstance(tokenizer, cls):
            raise TokenizerError(f"{directory}: holds a {type(tokenizer).__name__}, not a {cls.__name__}")
        return tokenizer

    def _check_saved(self, meta_path: Path, meta: dict) -> None:
        """Metadata whose specials disagree with the backend's files is corrupt."""
        s, saved = self.specials, meta.get("specials", {})
        actual = {"pad": s.pad, "cls": s.cls, "sep": s.sep, "unk": s.unk, "mask": s.mask,
                  "vocab_size": s.vocab_size}
        wrong = {k: (saved[k], v) for k, v in actual.items() if k in saved and saved[k] != v}
        if wrong:
            detail = ", ".join(f"{k}: file says {a}, backend has {b}" for k, (a, b) in wrong.items())
            raise TokenizerError(f"{meta_path}: specials do not match the vocabulary ({detail})")


def _read_meta(path: Path) -> Optional[dict]:
    """babelzoo's metadata in ``path``, or None when the file holds something else (a Hugging
    Face ``tokenizer.json``)."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise TokenizerError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise TokenizerError(f"{path}: cannot read ({err})") from None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def saved_metadata(directory: Union[str, Path]) -> Optional[Path]:
    """The file holding babelzoo's tokenizer metadata in ``directory`` (``babelzoo_tokenizer.json``,
    or ``tokenizer.json`` in a directory saved before), or None when there is none."""
    directory = Path(directory)
    if (directory / META_FILE).is_file():
        return directory / META_FILE
    legacy = directory / LEGACY_META_FILE
    if legacy.is_file() and _read_meta(legacy) is not None:
        return legacy
    return None


def load_tokenizer(directory: Union[str, Path]) -> Optional[Tokenizer]:
    """The tokenizer saved in ``directory``, or None when it holds no tokenizer files.

    Reads babelzoo's metadata (``babelzoo_tokenizer.json``, or ``tokenizer.json`` as written
    before); without it, a Hugging Face layout: ``vocab.txt`` (+ ``tokenizer_config.json``) as
    WordPiece, ``sentencepiece.bpe.model`` as XLM-R, ``spiece.model`` (+ ``tokenizer_config.json``)
    as ALBERT.
    """
    if not str(directory).strip():  # Path("") is the working directory: never what was meant
        raise TokenizerError("no tokenizer folder given (the path is empty)")
    directory = Path(directory)
    meta_path = saved_metadata(directory)
    if meta_path is not None:
        meta = _read_meta(meta_path)
        if meta is None:
            raise TokenizerError(f"{meta_path}: not babelzoo tokenizer metadata (no \"format\": \"{FORMAT}\")")
        if meta.get("version") != VERSION:
            raise TokenizerError(f"{meta_path}: unsupported version {meta.get('version')!r} (expected {VERSION})")
        kind = meta.get("type")
        if kind not in BACKENDS:
            raise TokenizerError(f"{meta_path}: unknown tokenizer type {kind!r} (known: {', '.join(BACKENDS)})")
        tokenizer = _backend(kind)._from_saved(directory, meta, meta_path)
        tokenizer._check_saved(meta_path, meta)
        trimmed_from = meta.get("options", {}).get("trimmed_from")
        if trimmed_from is not None:
            if type(trimmed_from) is not int or trimmed_from < tokenizer.vocab_size:
                raise TokenizerError(f"{meta_path}: options.trimmed_from must be the vocabulary size before "
                                     f"trimming (an integer >= {tokenizer.vocab_size}), got {trimmed_from!r}")
            tokenizer.trimmed_from = trimmed_from
        return tokenizer
    if (directory / "vocab.txt").is_file():
        return _backend("wordpiece").from_hf(directory)
    if (directory / "sentencepiece.bpe.model").is_file():
        return _backend("sentencepiece").from_xlmr(directory / "sentencepiece.bpe.model")
    if (directory / "spiece.model").is_file():
        return _backend("sentencepiece").from_albert(directory / "spiece.model")
    if (directory / HF_TOKENIZER_FILE).is_file():
        raise TokenizerError(f"{directory / HF_TOKENIZER_FILE}: a Hugging Face tokenizers file without "
                             f"{META_FILE}, vocab.txt, sentencepiece.bpe.model or spiece.model beside it; "
                             "babelzoo reads those files")
    return None


def _backend(kind: str) -> type:
    module, name = BACKENDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def check_subset(tokenizer, keep: Sequence[int]) -> list[int]:
    """``keep`` as a strictly ascending id list that holds every required id."""
    keep = [int(i) for i in keep]
    if any(b <= a for a, b in zip(keep, keep[1:])):
        raise TokenizerError("subset: the ids to keep must be strictly ascending")
    if keep and not 0 <= keep[0] <= keep[-1] < tokenizer.vocab_size:
        raise TokenizerError(f"subset: ids outside the {tokenizer.vocab_size}-piece vocabulary")
    missing = sorted(tokenizer.subset_required() - set(keep))
    if missing:
        raise TokenizerError(f"subset: ids {missing} must be kept ({[tokenizer.id_to_token(i) for i in missing]})")
    return keep
