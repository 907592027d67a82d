"""Vocabulary trimming: keep the pieces a corpus uses.

A multilingual model spends most of its parameters on its vocabulary (multilingual-e5-small:
96 M of 118 M on 250,037 pieces of width 384), and a user of a few languages needs a fraction
of it. Trimming keeps the pieces that ``texts`` segment into (plus the special tokens and what
the tokenizer's segmentation depends on), gives them new ids in their old order, and copies
the matching rows of every vocabulary-indexed weight (the word embeddings, the MLM decoder and
its bias). Any text whose pieces were all kept tokenises to the same pieces and encodes to the
same vectors as before (:meth:`~babelzoo.datasets.tokenizer.Tokenizer.subset` says why for each
tokenizer kind)::

    small = trim_vocabulary(model, {"de": german, "fr": french})
    small.save_pretrained("e5-small-de-fr")          # a normal checkpoint, with its tokenizer

Text outside the kept pieces loses what the dropped pieces held: each ``encode``,
``encode_pair`` or ``batch_encode`` call of the trimmed tokenizer (also once saved and loaded)
whose text yields ``<unk>`` issues a
:class:`~babelzoo.datasets.tokenizer.TrimmedVocabularyWarning` with the share of ``<unk>``
pieces. The texts given to :func:`trim_vocabulary` never do: their pieces are all kept.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence, Union

import torch

from ..datasets.tokenizer import Tokenizer
from ..errors import InputError
from ..zoo.factory import build_model
from ..zoo.checkpoint_io import load_state_strict

Texts = Union[Iterable[str], Mapping[str, Iterable[str]]]
# the state-dict rows indexed by token id (tied decoders share the embedding's storage)
VOCABULARY_KEYS = ("embeddings.word.weight", "lm_head.decoder.weight", "lm_head.bias")


def _text_list(items, where: str, lang: Optional[str], caller: str, by_language: bool = True) -> list[str]:
    """``items`` (``texts``, or the texts of language ``lang``) as a list of texts; one string
    (which would be read one character at a time) or anything but strings is an error, whose fix
    offers ``{language: texts}`` where the caller takes it (``by_language``)."""
    if isinstance(items, (str, bytes)):
        example = items[:40] if isinstance(items, str) else items[:40].decode("utf-8", "replace")
        fix = (f"e.g. {{{lang!r}: [{example!r}]}}" if lang is not None
               else f"e.g. [{example!r}]" + (", or {language: [texts]}" if by_language else ""))
        raise InputError(f"{caller}: {where} is one string ({example!r}); pass an iterable of texts, {fix}")
    if not isinstance(items, Iterable):
        raise InputError(f"{caller}: {where} must be an iterable of texts, got {type(items).__name__}")
    texts = list(items)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"{caller}: {where}[{i}] is {type(text).__name__}, not a text (str)")
    return texts


def text_list(texts: Iterable[str], caller: str) -> list[str]:
    """One language's ``texts`` (an iterable of strings) as a list without blank texts; one
    string or a ``{language: texts}`` mapping is an error."""
    if isinstance(texts, Mapping):
        raise InputError(f"{caller}: texts maps {len(texts)} language(s) to texts; pass one language's texts")
    return [t for t in _text_list(texts, "texts", None, caller, by_language=False) if t.strip()]


def texts_by_language(texts: Texts, caller: str) -> dict[Optional[str], list[str]]:
    """``texts`` (an iterable of strings, or ``{language: strings}``) as ``{language: texts}``
    without blank texts (``{None: texts}`` for a plain iterable). A language with no text is an
    error (it would be silently left out), and so is one string (iterating over it would read
    its characters); ``caller`` names the function in messages."""
    if not isinstance(texts, Mapping):
        return {None: [t for t in _text_list(texts, "texts", None, caller) if t.strip()]}
    streams = {}
    for lang, items in texts.items():
        streams[lang] = [t for t in _text_list(items, f"texts[{lang!r}]", lang, caller) if t.strip()]
        if not streams[lang]:
            raise InputError(f"{caller}: language {lang!r} has no text")
    return streams


def used_pieces(tokenizer: Tokenizer, texts: Texts, batch_size: int = 1024) -> list[int]:
    """The ascending ids of every piece ``texts`` segment into, plus
    :meth:`~babelzoo.datasets.tokenizer.Tokenizer.subset_required`. ``texts``: an iterable of
    strings, or ``{language: strings}`` (a language with no text is an error: it would be silently
    left out). One string is refused: iterating over it would keep the pieces of its characters."""
    texts = [t for items in texts_by_language(texts, "trim_vocabulary").values() for t in items]
    if not texts:
        raise InputError("trim_vocabulary: no text given; the trimmed vocabulary would hold special tokens only")
    used: set[int] = set()
    for start in range(0, len(texts), batch_size):
        rows = tokenizer.batch_encode(texts[start:start + batch_size], padding=False, truncation=False,
                                      return_tensors=None, add_special_tokens=False)["input_ids"]
        for row in rows:
            used.update(row)
    required = tokenizer.subset_required()
    if not used - required:
        raise InputError("trim_vocabulary: the texts use no ordinary piece of the vocabulary "
                         f"({len(texts)} texts, all unknown or special)")
    return sorted(used | required)


def trim_vocabulary(model, texts: Texts, tokenizer: Optional[Tokenizer] = None):
    """A copy of ``model`` whose vocabulary holds the pieces ``texts`` use (see
    :func:`used_pieces`), with its trimmed tokenizer as ``.tokenizer``. ``tokenizer`` defaults
    to ``model.tokenizer`` (a pretrained model's). Include prompt prefixes (e5's ``"query: "``)
    in ``texts``."""
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise InputError("trim_vocabulary: the model carries no tokenizer; pass tokenizer=")
    # a model may have more rows than its tokenizer has pieces (XLM-R pads 250,002 to 250,037);
    # rows no id reaches are dropped with the others
    if tokenizer.vocab_size > model.config.text.vocab_size:
        raise InputError(f"trim_vocabulary: the tokenizer has {tokenizer.vocab_size} pieces, the model only "
                         f"{model.config.text.vocab_size} rows: they do not belong together")
    keep = used_pieces(tokenizer, texts)
    return select_vocabulary(model, tokenizer, keep)


def select_vocabulary(model, tokenizer: Tokenizer, keep: Sequence[int]):
    """``model`` restricted to the token ids ``keep`` (ascending; new id = rank)."""
    small = tokenizer.subset(keep)
    index = torch.tensor(list(keep), dtype=torch.long)
    text = model.config.text
    pad = small.specials.pad if text.pad_token_id is not None else None
    config = model.config.override(vocab_size=len(keep), pad_token_id=pad)
    state = model.state_dict()
    for key in VOCABULARY_KEYS:
        if key in state:
            state[key] = state[key].index_select(0, index)
    with torch.random.fork_rng(devices=[]):
        trimmed = build_model(config)  # every weight is overwritten below
    load_state_strict(trimmed, state, "the trimmed model")
    trimmed.tokenizer = small
    return trimmed.train(model.training)
