"""Cross-lingual masked language modelling on code-switched documents (CLMLM).

Huang et al. 2019, "Unicoder: A Universal Language Encoder by Pre-training with Multiple
Cross-lingual Tasks": a document of several sentences, each with its translation, is
turned into a code-switched document by replacing alternate sentences with their translations
(s_1, t_2, s_3, t_4, ... or t_1, s_2, t_3, ..., the starting side drawn at random), and masked
LM is trained on it, so the context of a masked word spans two languages across sentence
boundaries.

Layout: ``[CLS] z_1 z_2 ... z_k [SEP]`` with contiguous positions; every token carries the
language id of the sentence it belongs to ([CLS] that of z_1, [SEP] that of z_k). Tokens past
``max_length`` are cut from the end of the document and counted as ``truncated``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from .base import Loss, register_objective
from .batching import check_vocab, language_index, languages_known, pad
from .examples import ExampleError, as_parallel_document, require_nonempty
from .mlm import MaskingObjective


@register_objective
class CLMLM(MaskingObjective):
    """Unicoder's code-switched masked LM. Examples: parallel documents, each a sequence of
    ``(sentence, translation[, lang, translation_lang])`` pairs in document order."""

    name = "clmlm"
    consumes = "parallel_document"

    def code_switch(self, document, start: int) -> list[tuple[list[int], object]]:
        """(ids, lang) of each sentence: the translation where ``k % 2 == start``."""
        return [((p.tgt, p.tgt_lang) if k % 2 == start else (p.src, p.src_lang)) for k, p in enumerate(document)]

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        s = self.specials
        switched = []
        for i, example in enumerate(examples):
            document = as_parallel_document(example, i)
            if not document:
                raise ExampleError(f"{self.name}: example {i} is an empty document")
            switched.append(self.code_switch(document, int(torch.randint(2, (1,)))))
        use_langs = self.use_language_ids and languages_known([lang for doc in switched for _, lang in doc], self.name)
        room = self.max_length - 2
        rows, langs, truncated = [], [], 0
        for i, document in enumerate(switched):
            ids: list[int] = []
            codes: list = []
            for sentence, lang in document:
                take = sentence[: max(room - len(ids), 0)]
                truncated += len(sentence) - len(take)
                ids += take
                codes += [lang] * len(take)
            rows.append([s.cls, *ids, s.sep])
            if use_langs:
                first, last = document[0][1], (codes[-1] if codes else document[0][1])
                langs.append([language_index(s, code, f"example {i}") for code in [first, *codes, last]])
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids, s, "document")
        attention_mask = (torch.arange(input_ids.shape[1])[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
        masked = self.masker(input_ids)
        batch = {"input_ids": masked.input_ids, "attention_mask": attention_mask, "labels": masked.labels,
                 "truncated": torch.tensor(truncated)}
        if use_langs:
            batch["language_ids"] = pad(langs, 0, input_ids.shape[1])
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        return self.masked_lm(model, batch)
