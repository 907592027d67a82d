"""Argument checks, per-row languages, framed rows, truncation and padding for
:meth:`Tokenizer.batch_encode`."""

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


def check_options(padding, max_length: Optional[int], return_tensors: Optional[str]) -> None:
    """``batch_encode``'s ``padding``, ``max_length`` and ``return_tensors``, checked together."""
    if padding not in (True, False, "longest", "max_length", "do_not_pad"):
        raise _error(f"padding must be True, False, 'longest' or 'max_length', got {padding!r}")
    if padding == "max_length" and max_length is None:
        raise _error("padding='max_length' needs max_length")
    if return_tensors not in (None, "pt"):
        raise _error(f"return_tensors must be 'pt' or None, got {return_tensors!r}")


def single_rows(tokenizer, ids_a: list[list[int]], max_length: Optional[int], truncation: bool) -> list[list[int]]:
    """``[CLS] A [SEP]`` rows of single texts without languages (the common case, one pass)."""
    cls, sep = tokenizer.specials.cls, tokenizer.specials.sep
    if max_length is not None and truncation:
        budget = max_length - 2
        if budget < 0:
            raise _error(f"max_length={max_length} leaves no room for the special tokens")
        return [[cls, *a[:budget], sep] for a in ids_a]
    rows = [[cls, *a, sep] for a in ids_a]
    for i, ids in enumerate(rows):
        if max_length is not None and len(ids) > max_length:
            raise _error(f"row {i} has {len(ids)} tokens > max_length={max_length}; "
                         "pass truncation=True")
    return rows


def framed_rows(tokenizer, ids_a, ids_b, lang_pairs, max_length: Optional[int], truncation: bool,
                add_special_tokens: bool) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """Framed (or bare) rows with their segment ids and language ids."""
    rows, segs, lang_rows = [], [], []
    for i, (a, b, (la, lb)) in enumerate(zip(ids_a, ids_b, lang_pairs)):
        if add_special_tokens:
            if max_length is not None and truncation:
                budget = max_length - tokenizer.num_special_tokens(b is not None, (la, lb))
                if budget < 0:
                    raise _error(f"max_length={max_length} leaves no room for the special tokens")
                a, b = truncate(a, b, budget)
            ids, seg, lid = tokenizer._frame(a, b, la, lb)
        else:
            ids = a + (b or [])
            if max_length is not None and truncation:
                ids = ids[:max_length]
            seg = [0] * len(a) + [1] * (len(ids) - len(a))
            seg = seg[:len(ids)]
            la_i = tokenizer._language_index(la) if la is not None else 0
            lb_i = tokenizer._language_index(lb) if lb is not None else la_i
            lid = ([la_i] * len(a) + [lb_i] * len(ids))[:len(ids)]
        if max_length is not None and len(ids) > max_length:
            raise _error(f"row {i} has {len(ids)} tokens > max_length={max_length}; "
                         "pass truncation=True")
        rows.append(ids)
        segs.append(seg)
        lang_rows.append(lid)
    return rows, segs, lang_rows


def padded(rows: list[list[int]], segs: Optional[list[list[int]]], lang_rows: Optional[list[list[int]]],
           padding, max_length: Optional[int], pad: int, return_tensors: Optional[str]) -> dict:
    """The batch of ``rows`` (with their segment ids, and language ids unless ``lang_rows`` is
    None) padded with ``pad`` as ``padding`` says, as lists or tensors."""
    if padding in (True, "longest"):
        width = max((len(r) for r in rows), default=0)
    elif padding == "max_length":
        width = max_length
    else:
        width = None
    out = {"input_ids": [], "attention_mask": [], "segment_ids": []}
    if lang_rows is not None:
        out["language_ids"] = []
    for n, ids in enumerate(rows):
        extra = 0 if width is None else width - len(ids)
        out["input_ids"].append(ids + [pad] * extra)
        out["attention_mask"].append([1] * len(ids) + [0] * extra)
        out["segment_ids"].append([0] * (len(ids) + extra) if segs is None else segs[n] + [0] * extra)
        if lang_rows is not None:  # XLM fills a row's padding with its (last) language too
            lid = lang_rows[n]
            out["language_ids"].append(lid + [lid[-1] if lid else 0] * extra)
    if return_tensors is None:
        return out
    lengths = {len(r) for r in out["input_ids"]}
    if len(lengths) > 1:
        raise _error("rows have different lengths; use padding=True or return_tensors=None")
    columns = len(out["input_ids"][0]) if rows else (width or 0)
    return {k: torch.tensor(v, dtype=torch.long).reshape(len(rows), columns) for k, v in out.items()}
