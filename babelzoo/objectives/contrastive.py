"""Shared ground of sentence-level contrastive alignment (InfoXLM's XLCo, LaBSE's translation
ranking): both sides of each translation pair are encoded *separately* (a dual encoder with
shared weights) as ``[CLS] X [SEP]`` and ``[CLS] Y [SEP]``, pooled into sentence vectors, and
scored against the other side of every pair in the global batch.

Both sides go through the encoder in one call (sources in rows 0..B-1, targets in rows
B..2B-1), which keeps one forward per step under DistributedDataParallel.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError
from ..zoo.layers import POOLINGS
from ..zoo.model import BabelModel
from .base import Objective
from .batching import check_vocab, encoder_inputs, language_index, languages_known, pad, truncate, unwrap
from .examples import ExampleError, as_pair, require_nonempty


class DualEncoderObjective(Objective):
    """Prepares stacked sources and targets; :meth:`embed` returns their sentence vectors.

    ``pooling``: ``"cls"`` (the first token, as InfoXLM and LaBSE use; the default), ``"mean"``,
    ``"max"`` or ``"final"`` (:func:`~babelzoo.zoo.layers.pool`); a model whose architecture fixes
    its pooling (InferSent's max) uses that one
    (:meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`). ``layer``: which hidden state to
    pool (0 = embeddings, i = output of layer i; None = last).
    """

    def __init__(self, specials: SpecialIds, *, pooling: Optional[str] = None, layer: Optional[int] = None,
                 max_length: int = 128, use_language_ids: bool = True):
        super().__init__()
        if pooling is not None and pooling not in POOLINGS:
            raise ConfigError(f"{type(self).__name__}: pooling={pooling!r} must be one of "
                              f"{', '.join(map(repr, POOLINGS))}")
        self.specials = specials
        self.pooling = pooling
        self.layer = layer
        self.max_length = max_length
        self.use_language_ids = use_language_ids

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        pairs = [as_pair(x, i) for i, x in enumerate(examples)]
        s = self.specials
        rows, truncated = [], 0
        for side in ("src", "tgt"):
            for i, pair in enumerate(pairs):
                ids = getattr(pair, side)
                if not ids:
                    which = "source" if side == "src" else "target"
                    raise ExampleError(f"{self.name}: example {i} has an empty {which}")
                ids, cut = truncate(ids, self.max_length - 2)
                rows.append([s.cls, *ids, s.sep])
                truncated += cut
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids[: len(pairs)], s, "source")
        check_vocab(input_ids[len(pairs):], s, "target")
        attention_mask = (torch.arange(input_ids.shape[1])[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "truncated": torch.tensor(truncated)}
        langs = [x.src_lang for x in pairs] + [x.tgt_lang for x in pairs]
        if self.use_language_ids and languages_known(langs, self.name):
            ids = torch.tensor([language_index(s, code, f"example {i % len(pairs)}") for i, code in enumerate(langs)])
            batch["language_ids"] = ids[:, None] * attention_mask
        return batch

    def embed(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(source vectors [B, H], target vectors [B, H]) from one encoder call."""
        vectors = self.sentence_vectors(model, batch)
        half = vectors.shape[0] // 2
        return vectors[:half], vectors[half:]

    def sentence_vectors(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The pooled vector [N, H] of every row of ``batch``. A :class:`~babelzoo.zoo.model.BabelModel`
        runs unpadded (``unpad=True``): the two sides of a batch differ in length, and the pass then
        pays for real tokens only, with the padded pass's vectors and gradients."""
        extra = {"unpad": True} if isinstance(unwrap(model), BabelModel) else {}
        out = model(**encoder_inputs(model, batch, self.use_language_ids), output_hidden_states=self.layer is not None,
                    **extra)
        if self.layer is None:
            hidden = out.last_hidden
        else:
            states = out.hidden_states
            if not 0 <= self.layer < len(states):
                raise ConfigError(f"{self.name}: layer={self.layer} is out of range; this model has hidden states "
                                  f"0..{len(states) - 1}")
            hidden = states[self.layer]
        return unwrap(model).sentence_embedding(hidden, batch["attention_mask"], self.pooling, default="cls")
