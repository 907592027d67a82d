"""The raw examples objectives take, and their checked conversion.

Objectives read three shapes of example, produced by the data loaders:

* :class:`Sentence` — token ids (no special tokens) and optionally a language code; a plain
  sequence of ids (list, NumPy array, 1-D integer tensor) is accepted too (MLM, MMLM, CLM).
* :class:`Pair` — a translation pair of token-id lists with optional language codes (TLM, CLWR,
  CLPC, XLCo, translation ranking). Any 4-tuple ``(src, tgt, src_lang, tgt_lang)`` or 2-tuple
  ``(src, tgt)`` is accepted, so the loaders' own named tuples pass unchanged.
* a document — a sequence of sentences (SOP, NSP) or of pairs (CLMLM's parallel documents).

A malformed example is an error that names its index in the batch; nothing is dropped.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple, Optional, Sequence

import torch

from ..errors import BabelzooError


class Sentence(NamedTuple):
    ids: list[int]
    lang: Optional[str] = None


class Pair(NamedTuple):
    src: list[int]
    tgt: list[int]
    src_lang: Optional[str] = None
    tgt_lang: Optional[str] = None


class ExampleError(BabelzooError, ValueError):
    """An example has the wrong shape or content; the message names the example."""


def _is_ids(value: Any) -> bool:
    if isinstance(value, (str, bytes)):
        return False
    if isinstance(value, torch.Tensor):
        return value.dim() == 1 and not value.is_floating_point() and not value.is_complex()
    try:
        return all(isinstance(v, numbers.Integral) for v in value)
    except TypeError:
        return False


def _ids(value: Any, where: str) -> list[int]:
    if not _is_ids(value):
        raise ExampleError(f"{where}: expected a sequence of integer token ids, got {type(value).__name__}")
    return value.tolist() if isinstance(value, torch.Tensor) else [int(v) for v in value]


def _lang(value: Any, where: str) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise ExampleError(f"{where}: language must be a code string or None, got {value!r}")
    return value


def as_sentence(example: Any, index: int) -> Sentence:
    """A token-id list, or an ``(ids, lang)`` tuple such as :class:`Sentence`."""
    where = f"example {index}"
    if _is_ids(example):
        return Sentence(_ids(example, where))
    if isinstance(example, tuple) and len(example) == 2:
        return Sentence(_ids(example[0], where), _lang(example[1], where))
    raise ExampleError(f"{where}: expected token ids or an (ids, lang) tuple, got {type(example).__name__}")


def as_pair(example: Any, index: int) -> Pair:
    """A ``(src, tgt)`` or ``(src, tgt, src_lang, tgt_lang)`` tuple such as :class:`Pair`."""
    where = f"example {index}"
    if isinstance(example, tuple) and len(example) in (2, 4):
        langs = example[2:] if len(example) == 4 else (None, None)
        return Pair(_ids(example[0], f"{where} source"), _ids(example[1], f"{where} target"),
                    _lang(langs[0], where), _lang(langs[1], where))
    raise ExampleError(f"{where}: expected a (src, tgt[, src_lang, tgt_lang]) translation pair, "
                       f"got {type(example).__name__}")


def as_document(example: Any, index: int) -> list[Sentence]:
    """A sequence of sentences (each as :func:`as_sentence` accepts)."""
    if isinstance(example, (str, bytes)) or _is_ids(example) or not isinstance(example, Sequence):
        raise ExampleError(f"example {index}: expected a document (a sequence of sentences)")
    return [as_sentence(s, index) for s in example]


def as_parallel_document(example: Any, index: int) -> list[Pair]:
    """A sequence of translation pairs: each sentence of a document with its translation."""
    if isinstance(example, (str, bytes)) or not isinstance(example, Sequence):
        raise ExampleError(f"example {index}: expected a parallel document (a sequence of translation pairs)")
    return [as_pair(p, index) for p in example]


def require_nonempty(examples: Sequence[Any], objective: str) -> None:
    if len(examples) == 0:
        raise ExampleError(f"{objective}: prepare() got an empty batch")
