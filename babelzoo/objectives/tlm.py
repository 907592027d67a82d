"""Translation language modelling (TLM).

Lample & Conneau 2019, "Cross-lingual Language Model Pretraining" (XLM), §3.4: a translation
pair is concatenated into one stream and tokens are masked on both sides, so the model can
predict a masked English word from its English context or from the French translation. "To
facilitate the alignment, we also reset the positions of target sentences", and each side
carries its own language embedding.

Layout of one example (each side framed as XLM frames a sentence, ``</s> X </s>``; with an XLM
vocabulary ``cls`` and ``sep`` are both ``</s>``)::

    tokens     [CLS] x1 .. xm [SEP] [CLS] y1 .. yn [SEP]
    positions    0   1  .. m  m+1    0    1  .. n  n+1
    languages  src  src .. src src  tgt  tgt .. tgt tgt
    segments     0   0  ..  0   0    1    1  ..  1   1      (models with two segment embeddings)

Masking (15%, 80/10/10) is drawn over the non-special tokens of both sides together.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from .base import Loss, register_objective
from .batching import check_vocab, language_index, languages_known, pad, truncate_pair
from .examples import as_pair, require_nonempty
from .mlm import MaskingObjective


@register_objective
class TLM(MaskingObjective):
    """XLM's TLM over translation pairs ``(src, tgt[, src_lang, tgt_lang])``. A pair longer than
    ``max_length`` is cut from the end of its longer side (the count is reported as
    ``truncated``)."""

    name = "tlm"
    consumes = "pair"

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        pairs = [as_pair(x, i) for i, x in enumerate(examples)]
        s = self.specials
        rows, positions, segments, sides, truncated = [], [], [], [], 0
        for pair in pairs:
            src, tgt, cut = truncate_pair(pair.src, pair.tgt, self.max_length - 4)
            truncated += cut
            a, b = [s.cls, *src, s.sep], [s.cls, *tgt, s.sep]
            rows.append(a + b)
            positions.append(list(range(len(a))) + list(range(len(b))))  # positions restart at 0 on Y
            segments.append([0] * len(a) + [1] * len(b))
            sides.append(len(a))
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids, s, "translation pair")
        lengths = torch.tensor([len(r) for r in rows])
        p = torch.arange(input_ids.shape[1])[None]
        attention_mask = (p < lengths[:, None]).long()
        second = (p >= torch.tensor(sides)[:, None]).long() * attention_mask
        masked = self.masker(input_ids)
        batch = {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels,
                 "position_ids": pad(positions, 0, input_ids.shape[1]),
                 "segment_ids": pad(segments, 0, input_ids.shape[1]), "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([x.src_lang for x in pairs] + [x.tgt_lang for x in pairs], self.name):
            src = torch.tensor([language_index(s, x.src_lang, f"example {i} source") for i, x in enumerate(pairs)])
            tgt = torch.tensor([language_index(s, x.tgt_lang, f"example {i} target") for i, x in enumerate(pairs)])
            batch["language_ids"] = torch.where(second.bool(), tgt[:, None], src[:, None]) * attention_mask
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        return self.masked_lm(model, batch)
