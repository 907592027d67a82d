"""Argument checks, per-row languages and truncation for :meth:`Tokenizer.batch_encode`."""

from __future__ import annotations

from typing import Optional

import torch


def _error(message: str) -> Exception:
    from .tokenizer import TokenizerError  # deferred: tokenizer.py imports this module

    return TokenizerError(message)


def as_list(ids) -> list:
    if isinstance(ids, torch.Tensor):
        return ids.tolist()
    return [int(i) if not isinstance(i, (list, tuple, torch.Tensor)) else i for i in ids]


def check_texts(texts, name: str) -> list[str]:
    if isinstance(texts, str):
        raise _error(f"{name} must be a sequence of strings, not one string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise _error(f"{name}[{i}] is {type(t).__name__}, not str")
    return texts


def expand_langs(langs, n: int, pair: bool) -> list[tuple[Optional[str], Optional[str]]]:
    if langs is None:
        return [(None, None)] * n
    if isinstance(langs, str):
        return [(langs, langs if pair else None)] * n
    langs = list(langs)
    if len(langs) != n:
        raise _error(f"langs has {len(langs)} entries for {n} texts")
    out = []
    for i, entry in enumerate(langs):
        if isinstance(entry, str):
            out.append((entry, entry if pair else None))
        elif pair and isinstance(entry, (tuple, list)) and len(entry) == 2:
            out.append((entry[0], entry[1]))
        else:
            raise _error(f"langs[{i}] must be a language code{' or an (a, b) tuple' if pair else ''}, "
                         f"got {entry!r}")
    return out


def truncate(a: list[int], b: Optional[list[int]], budget: int) -> tuple[list[int], Optional[list[int]]]:
    """Cut content to ``budget`` tokens. Pairs use "longest first" exactly as Hugging Face
    tokenizers do: only the longer side is cut while that suffices, otherwise the shorter side
    keeps ``budget // 2`` tokens and the longer one the rest."""
    if b is None:
        return a[:budget], None
    if len(a) + len(b) <= budget:
        return a, b
    n1, n2 = len(a), len(b)
    swap = n1 > n2
    if swap:
        n1, n2 = n2, n1
    n2 = n1 if n1 > budget else max(n1, budget - n1)
    if n1 + n2 > budget:
        n1 = budget // 2
        n2 = n1 + budget % 2
    if swap:
        n1, n2 = n2, n1
    return a[:n1], b[:n2]
