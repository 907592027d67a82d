"""Shared batch building: framing with special tokens, padding, truncation, language ids, the
keyword arguments a model takes, and sentence pooling.

Layouts (``[CLS]``/``[SEP]`` stand for ``SpecialIds.cls``/``.sep``; XLM's vocabulary uses
``</s>`` for both, which gives XLM's ``</s> X </s>`` framing exactly)::

    one sentence   [CLS] X [SEP]
    a pair         [CLS] X [SEP] Y [SEP]            (BERT NSP, Unicoder CLPC)
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from .examples import ExampleError, Sentence

IGNORE = -100  # label of positions that carry no prediction target (torch's cross-entropy default)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel/DataParallel wrapper (to read its config and
    reach its heads); the encoder itself is always called through the wrapper."""
    from torch.nn.parallel import DataParallel, DistributedDataParallel

    return model.module if isinstance(model, (DataParallel, DistributedDataParallel)) else model


def pad(rows: Sequence[Sequence[int]], value: int, length: Optional[int] = None) -> torch.Tensor:
    """Right-pad integer rows into a [B, L] long tensor."""
    width = max((len(r) for r in rows), default=0) if length is None else length
    out = torch.full((len(rows), max(width, 1)), value, dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out


def truncate(ids: list[int], budget: int) -> tuple[list[int], int]:
    """Keep the first ``budget`` ids; also return how many were cut (reported, never hidden)."""
    return (ids[:budget], len(ids) - budget) if len(ids) > budget else (ids, 0)


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int], int]:
    """Cut tokens from the end of the longer side until both fit in ``budget`` (BERT's
    ``truncate_seq_pair``); return the cut count too."""
    a, b, cut = list(a), list(b), 0
    while len(a) + len(b) > budget:
        (a if len(a) >= len(b) else b).pop()
        cut += 1
    return a, b, cut


def check_vocab(ids: torch.Tensor, specials: SpecialIds, what: str) -> None:
    """Every id must lie in [0, vocab_size)."""
    bad = (ids < 0) | (ids >= specials.vocab_size)
    if bool(bad.any()):
        row = int(bad.any(dim=1).nonzero()[0])
        value = int(ids[row][bad[row]][0])
        raise ExampleError(f"example {row} ({what}): token id {value} is outside the vocabulary "
                           f"[0, {specials.vocab_size})")


def language_index(specials: SpecialIds, lang: Optional[str], where: str) -> int:
    """The language-embedding index of ``lang`` (XLM language ids)."""
    try:
        return specials.languages[lang]
    except KeyError:
        known = ", ".join(sorted(specials.languages)) or "none"
        raise ExampleError(f"{where}: language {lang!r} has no language id (known: {known})") from None


def languages_known(langs: Sequence[Optional[str]], objective: str) -> bool:
    """True when every example names its language(s), False when none does; a mix is an error
    (a batch half with and half without language ids cannot be encoded consistently)."""
    given = [lang is not None for lang in langs]
    if all(given):
        return True
    if any(given):
        missing = given.index(False)
        raise ExampleError(f"{objective}: example {missing} has no language code while others have one")
    return False


def encoder_inputs(model: nn.Module, batch: dict[str, torch.Tensor], use_language_ids: bool = True,
                   prefix: str = "") -> dict[str, torch.Tensor]:
    """The keyword arguments for ``model(...)`` from a prepared batch.

    Position ids count from 0 (the model shifts them by its own ``position_offset``, RoBERTa and
    XLM-R's 2; a model without positions ignores them); segment ids are passed only to models with at least two segment embeddings, language ids only to models
    with language embeddings (and when ``use_language_ids``), so one prepared batch serves
    mBERT, XLM and XLM-R layouts alike.
    """
    core = unwrap(model)
    text = core.config.text
    kwargs = {"input_ids": batch[prefix + "input_ids"], "attention_mask": batch[prefix + "attention_mask"]}
    positions = batch.get(prefix + "position_ids")
    if positions is not None:
        kwargs["position_ids"] = positions
    segments = batch.get(prefix + "segment_ids")
    if segments is not None and text.segment_vocab_size >= 2:
        kwargs["segment_ids"] = segments
    languages = batch.get(prefix + "language_ids")
    if languages is not None and use_language_ids and text.num_languages > 0:
        top = int(languages.max())
        if top >= text.num_languages:
            raise ExampleError(f"language id {top} is out of range: model {core.config.architecture!r} has "
                               f"num_languages={text.num_languages}; check SpecialIds.languages")
        kwargs["language_ids"] = languages
    return kwargs


def pair_rows(src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor, tgt_len: torch.Tensor,
              rows: torch.Tensor, cols: torch.Tensor, specials: SpecialIds) -> dict[str, torch.Tensor]:
    """Build ``[CLS] src_i [SEP] tgt_j [SEP]`` for every (i, j) in zip(rows, cols), on the
    tensors' device, from right-padded unframed token tensors.

    Returns ``input_ids``, ``attention_mask`` and ``segment_ids`` (0 up to the first [SEP],
    1 after); also ``first`` (bool, the [CLS] X [SEP] part) to place per-side language ids.
    """
    ls, lt = src_len[rows], tgt_len[cols]
    total = ls + lt + 3
    width = int(total.max())
    p = torch.arange(width, device=src.device)[None, :]
    ls_, lt_ = ls[:, None], lt[:, None]
    s_idx = (p - 1).clamp(0, src.shape[1] - 1)
    t_idx = (p - ls_ - 2).clamp(0, tgt.shape[1] - 1)
    from_src = src[rows].gather(1, s_idx.expand(len(rows), -1))
    from_tgt = tgt[cols].gather(1, t_idx.expand(len(rows), -1))
    ids = torch.full((len(rows), width), specials.pad, dtype=torch.long, device=src.device)
    ids = torch.where((p >= 1) & (p <= ls_), from_src, ids)
    ids = torch.where((p >= ls_ + 2) & (p <= ls_ + lt_ + 1), from_tgt, ids)
    ids = torch.where((p == ls_ + 1) | (p == ls_ + lt_ + 2), torch.full_like(ids, specials.sep), ids)
    ids[:, 0] = specials.cls
    real = p < total[:, None]
    first = p <= ls_ + 1
    return {"input_ids": ids, "attention_mask": real.long(), "segment_ids": (~first & real).long(),
            "first": first}


def frame_sentences(sentences: Sequence, specials: SpecialIds, max_length: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``[CLS] x [SEP]`` for every sentence (a :class:`~babelzoo.objectives.examples.Sentence`),
    its ids cut to ``max_length − 2``: the right-padded [B, L] ids (checked against the
    vocabulary), the bool [B, L] mask of real tokens and how many tokens were cut."""
    rows, truncated = [], 0
    for sentence in sentences:
        ids, cut = truncate(sentence.ids, max_length - 2)
        rows.append([specials.cls, *ids, specials.sep])
        truncated += cut
    input_ids = pad(rows, specials.pad)
    check_vocab(input_ids, specials, "sentence")
    real = torch.arange(input_ids.shape[1])[None] < torch.tensor([len(r) for r in rows])[:, None]
    return input_ids, real, truncated


def frame_rows(ids: torch.Tensor, lengths: torch.Tensor, specials: SpecialIds) -> dict[str, torch.Tensor]:
    """``[CLS] x [SEP]`` for every right-padded unframed row of ``ids`` (on its device)."""
    width = int(lengths.max()) + 2
    p = torch.arange(width, device=ids.device)[None, :]
    n = lengths[:, None]
    inner = ids.gather(1, (p - 1).clamp(0, ids.shape[1] - 1).expand(len(ids), -1))
    out = torch.where((p >= 1) & (p <= n), inner, torch.full_like(inner, specials.pad))
    out = torch.where(p == n + 1, torch.full_like(out, specials.sep), out)
    out[:, 0] = specials.cls
    return {"input_ids": out, "attention_mask": (p < n + 2).long()}


def sentence_batch(sentences: Sequence[Sentence], specials: SpecialIds, max_length: int, objective: str,
                   use_language_ids: bool = True) -> dict[str, torch.Tensor]:
    """``[CLS] x [SEP]`` for every sentence (cut to ``max_length``), right-padded: ``input_ids``,
    ``attention_mask``, ``truncated`` (tokens cut, summed) and ``language_ids`` when every
    sentence names its language."""
    rows, truncated = [], 0
    for sentence in sentences:
        ids, cut = truncate(sentence.ids, max_length - 2)
        rows.append([specials.cls, *ids, specials.sep])
        truncated += cut
    input_ids = pad(rows, specials.pad)
    check_vocab(input_ids, specials, "sentence")
    attention_mask = (torch.arange(input_ids.shape[1])[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "truncated": torch.tensor(truncated)}
    if use_language_ids and languages_known([x.lang for x in sentences], objective):
        langs = torch.tensor([language_index(specials, x.lang, f"sentence {i}") for i, x in enumerate(sentences)])
        batch["language_ids"] = langs[:, None] * attention_mask
    return batch
