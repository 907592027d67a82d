"""Sentence-pair coherence objectives: next-sentence prediction (NSP) and sentence-order
prediction (SOP).

NSP — Devlin et al. 2019, "BERT", §3.1 (Task #2): segment B follows segment A in the document
(label 0, "IsNext") or is a random span from another document (label 1, "NotNext"), 50/50.
SOP — Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language
Representations", §3.1: A and B are always consecutive; with probability 0.5 their order is
swapped (label 1), so topic cues cannot solve the task, only discourse coherence can.

Both classify ``[CLS] A [SEP] B [SEP]`` (segments 0/1) from the pooled [CLS] vector:

    p(label | A, B) = softmax(W · pooled + b)

Segments are built as BERT's ``create_instances_from_document`` builds them: a chunk of
consecutive sentences that fits ``max_length`` is split at a random sentence boundary into A
and B; a pair that is still too long loses tokens from the longer side, at its front or back at
random. Examples are documents: sequences of sentences (token-id lists or ``(ids, lang)``),
with at least two sentences each.
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, Objective, register_objective
from .batching import check_vocab, encoder_inputs, language_index, languages_known, pad
from .clpc import sentence_classifier_input
from .examples import ExampleError, Sentence, as_document, require_nonempty


def _randint(high: int) -> int:
    return int(torch.randint(high, (1,)))


def sentence_tokens(sentences: Sequence[Sentence]) -> list[tuple[int, Any]]:
    """(token id, language) of every token of consecutive sentences."""
    return [(t, sentence.lang) for sentence in sentences for t in sentence.ids]


def split_chunk(document: list[Sentence], budget: int) -> tuple[list[Sentence], list[Sentence]]:
    """Consecutive sentences from a random start that fill ``budget`` tokens (at least two),
    split at a random boundary into (A, B)."""
    start = _randint(len(document) - 1)
    end, total = start, 0
    while end < len(document) and (end - start < 2 or total + len(document[end].ids) <= budget):
        total += len(document[end].ids)
        end += 1
    chunk = document[start:end]
    split = 1 + _randint(len(chunk) - 1)
    return chunk[:split], chunk[split:]


def truncate_pair_at_random(a: list, b: list, budget: int) -> tuple[list, list, int]:
    """BERT's truncate_seq_pair with its random choice of front or back: cut the longer side
    until both fit in ``budget``; also return the cut count."""
    cut = 0
    while len(a) + len(b) > budget:
        longer = a if len(a) >= len(b) else b
        del longer[0 if _randint(2) == 0 else -1]
        cut += 1
    return a, b, cut


def frame_pair(ta: list[tuple[int, Any]], tb: list[tuple[int, Any]], a_lang: Any, b_lang: Any,
               specials: SpecialIds) -> tuple[list[int], list[int], list[Any]]:
    """``[CLS] A [SEP] B [SEP]`` from (token, language) lists: ids, segments (0 through the first
    [SEP], 1 after) and per-token languages (each segment's framing tokens take its language)."""
    s = specials
    ids = [s.cls, *(t for t, _ in ta), s.sep, *(t for t, _ in tb), s.sep]
    segments = [0] * (len(ta) + 2) + [1] * (len(tb) + 1)
    langs = [a_lang, *(g for _, g in ta), a_lang, *(g for _, g in tb), b_lang]
    return ids, segments, langs


class SentencePairCoherence(Objective):
    """Shared machinery of NSP and SOP; subclasses choose segment B and the label."""

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, max_length: int = 128,
                 use_language_ids: bool = True):
        super().__init__()
        text = config.text if isinstance(config, ModelConfig) else config
        if max_length < 5:
            raise ConfigError(f"{type(self).__name__}: max_length={max_length} leaves no room for two segments")
        self.specials = specials
        self.max_length = max_length
        self.use_language_ids = use_language_ids
        self.classifier = nn.Linear(text.hidden_size, 2)
        nn.init.normal_(self.classifier.weight, std=text.init_std)
        nn.init.zeros_(self.classifier.bias)

    # --- segments --------------------------------------------------------------------------------
    tokens = staticmethod(sentence_tokens)

    def chunk(self, document: list[Sentence]) -> tuple[list[Sentence], list[Sentence]]:
        """:func:`split_chunk` within this objective's ``max_length``."""
        return split_chunk(document, self.max_length - 3)

    def random_segment(self, documents: list[list[Sentence]], exclude: int, length: int) -> list[Sentence]:
        """Sentences from a random start in a random *other* document, about ``length`` tokens."""
        other = _randint(len(documents) - 1)
        other += other >= exclude
        document = documents[other]
        start = _randint(len(document))
        segment, total = [], 0
        for sentence in document[start:]:
            segment.append(sentence)
            total += len(sentence.ids)
            if total >= length:
                break
        return segment

    def truncate(self, a: list, b: list) -> tuple[list, list, int]:
        """:func:`truncate_pair_at_random` within this objective's ``max_length``."""
        return truncate_pair_at_random(a, b, self.max_length - 3)

    @abc.abstractmethod
    def pair(self, documents: list[list[Sentence]], index: int) -> tuple[list[Sentence], list[Sentence], int]:
        """(A, B, label) for document ``index``."""

    # --- objective -----------------------------------------------------------------------------
    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        documents = [as_document(x, i) for i, x in enumerate(examples)]
        for i, document in enumerate(documents):
            if len(document) < 2:
                raise ExampleError(f"{self.name}: example {i} has {len(document)} sentence(s); documents need "
                                   "at least two")
        s = self.specials
        rows, segments, langs, labels, truncated = [], [], [], [], 0
        for i in range(len(documents)):
            a, b, label = self.pair(documents, i)
            ta, tb, cut = self.truncate(self.tokens(a), self.tokens(b))
            truncated += cut
            ids, segment, lang = frame_pair(ta, tb, a[0].lang, b[0].lang, s)
            rows.append(ids)
            segments.append(segment)
            langs.append(lang)
            labels.append(label)
        input_ids = pad(rows, s.pad)
        check_vocab(input_ids, s, "document")
        attention_mask = (torch.arange(input_ids.shape[1])[None] < torch.tensor([len(r) for r in rows])[:, None]).long()
        batch = {"input_ids": input_ids, "attention_mask": attention_mask,
                 "segment_ids": pad(segments, 0, input_ids.shape[1]), "labels": torch.tensor(labels),
                 "truncated": torch.tensor(truncated)}
        if self.use_language_ids and languages_known([g for row in langs for g in row], self.name):
            ids = [[language_index(s, g, f"example {i}") for g in row] for i, row in enumerate(langs)]
            batch["language_ids"] = pad(ids, 0, input_ids.shape[1])
        return batch

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        out = model(**encoder_inputs(model, batch, self.use_language_ids))
        logits = self.classifier(sentence_classifier_input(out))
        loss = F.cross_entropy(logits.float(), batch["labels"])
        accuracy = (logits.detach().argmax(-1) == batch["labels"]).float().mean()
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated": batch["truncated"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())


@register_objective
class NSP(SentencePairCoherence):
    """BERT's next-sentence prediction: label 0 = B is the actual continuation, 1 = B comes from
    another document of the batch (so a batch needs at least two documents)."""

    name = "nsp"
    consumes = "document"

    def pair(self, documents, index):
        if len(documents) < 2:
            raise ExampleError("nsp: a random next sentence must come from another document, and this batch "
                               "has only one")
        a, b = self.chunk(documents[index])
        if _randint(2) == 0:
            return a, b, 0
        length = self.max_length - 3 - sum(len(x.ids) for x in a)
        return a, self.random_segment(documents, index, max(length, 1)), 1


@register_objective
class SOP(SentencePairCoherence):
    """ALBERT's sentence-order prediction: label 0 = A then B as in the document, 1 = swapped."""

    name = "sop"
    consumes = "document"

    def pair(self, documents, index):
        a, b = self.chunk(documents[index])
        return (b, a, 1) if _randint(2) == 1 else (a, b, 0)
