"""Fine-tuning objectives: cross-entropy through the model's task head (:mod:`babelzoo.zoo.heads`).

``sequence_classification`` — one label per text or text pair (SIB-200 topics, XNLI):
L = −(1/B) Σ_b log softmax(W · pool(h_b))_{y_b}.

``token_classification`` — one label per word (UD part-of-speech, NER). A word is split into
sub-words; as in BERT's NER recipe (Devlin et al. 2019, §5.3) the word's label sits on its first
sub-word and the others carry none: L = −(1/|F|) Σ_{i∈F} log softmax(W · h_i)_{y_i} over the
set F of first sub-words.

The head lives with the model, so that ``save_pretrained`` keeps it; these objectives own only
their collation.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..zoo.config import ConfigError
from .base import Loss, Objective, register_objective
from .batching import IGNORE, check_vocab, encoder_inputs, pad, unwrap
from .examples import ExampleError, require_nonempty


class Labelled(NamedTuple):
    """A framed text (or pair) with its class index: ``ids`` and ``segments`` as the tokenizer's
    ``encode``/``encode_pair`` give them."""

    ids: list[int]
    segments: list[int]
    label: int


class Tagged(NamedTuple):
    """A sentence as its words' sub-word ids (unframed) and one class index per word."""

    pieces: list[list[int]]
    labels: list[int]


def align_first_subword(pieces: Sequence[Sequence[int]], labels: Sequence[int], specials: SpecialIds,
                        max_length: int) -> tuple[list[int], list[int], int]:
    """``[CLS] w₁ … wₙ [SEP]`` and its label row: each word's label on its first sub-word,
    ``IGNORE`` on the other sub-words and the framing. Words that do not fit ``max_length`` are
    cut whole; their count is returned (so a caller can report them, never lose them silently).

    >>> align_first_subword([[7, 8], [9]], [3, 5], specials, 16)   # doctest: +SKIP
    ([cls, 7, 8, 9, sep], [-100, 3, -100, 5, -100], 0)
    """
    if len(pieces) != len(labels):
        raise ExampleError(f"{len(pieces)} words but {len(labels)} labels")
    ids, row = [specials.cls], [IGNORE]
    budget = max_length - 1
    kept = 0
    for word, label in zip(pieces, labels):
        word = list(word) or [specials.unk]  # a word with no sub-word still gets its label
        if len(ids) + len(word) > budget:
            break
        ids += word
        row += [label] + [IGNORE] * (len(word) - 1)
        kept += 1
    return ids + [specials.sep], row + [IGNORE], len(pieces) - kept


class _HeadObjective(Objective):
    """Common ground: the model's head, its number of labels, and padding. Given
    ``num_labels``, labels are checked when the batch is prepared (on the CPU) rather than in
    the training step, which then never reads the device."""

    def __init__(self, specials: SpecialIds, *, max_length: int = 128, num_labels: Optional[int] = None):
        super().__init__()
        if max_length < 3:
            raise ConfigError(f"{type(self).__name__}: max_length={max_length} leaves no room for tokens")
        if num_labels is not None and num_labels < 1:
            raise ConfigError(f"{type(self).__name__}: num_labels={num_labels} must be at least 1")
        self.specials = specials
        self.max_length = max_length
        self.num_labels = num_labels

    def _label_range_problem(self, labels: torch.Tensor, num_labels: int) -> Optional[str]:
        real = labels[labels.ne(IGNORE)]
        if real.numel() and (int(real.min()) < 0 or int(real.max()) >= num_labels):
            return f"{self.name}: label index out of range for the head's {num_labels} labels"
        return None

    def _checked(self, labels: torch.Tensor) -> torch.Tensor:
        """``labels``, checked against ``num_labels`` when it is known (on the CPU batch, so
        that the training step need not read the device)."""
        problem = self.num_labels is not None and self._label_range_problem(labels, self.num_labels)
        if problem:
            raise ExampleError(problem)
        return labels

    def _check_labels(self, labels: torch.Tensor, model: nn.Module) -> None:
        head = unwrap(model).config.head
        if head is None:
            raise InputError(f"{self.name}: the model has no task head (create it with head={{...}})")
        if self.num_labels is not None:
            if self.num_labels != head.num_labels:
                raise ConfigError(f"{self.name}: built for {self.num_labels} labels, but the head has {head.num_labels}")
            return  # checked in prepare: no read of the device here
        problem = self._label_range_problem(labels, head.num_labels)
        if problem:
            raise ExampleError(problem)


@register_objective
class SequenceClassification(_HeadObjective):
    """Cross-entropy of the model's sequence head. Examples: :class:`Labelled`."""

    name = "sequence_classification"
    consumes = "labelled_text"

    def prepare(self, examples: Sequence[Labelled]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        rows = []
        for i, example in enumerate(examples):
            if not isinstance(example, tuple) or len(example) != 3:
                raise ExampleError(f"{self.name}: example {i} must be (ids, segments, label)")
            if len(example[0]) > self.max_length or len(example[0]) != len(example[1]):
                raise ExampleError(f"{self.name}: example {i} has {len(example[0])} ids and {len(example[1])} "
                                   f"segment ids (max_length {self.max_length})")
            rows.append(example)
        input_ids = pad([r[0] for r in rows], self.specials.pad)
        check_vocab(input_ids, self.specials, "text")
        lengths = torch.tensor([len(r[0]) for r in rows])
        return {"input_ids": input_ids,
                "attention_mask": (torch.arange(input_ids.shape[1])[None] < lengths[:, None]).long(),
                "segment_ids": pad([r[1] for r in rows], 0, input_ids.shape[1]),
                "labels": self._checked(torch.tensor([int(r[2]) for r in rows]))}

    def logits(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return unwrap(model).head_logits(**encoder_inputs(model, batch))

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        labels = batch["labels"]
        self._check_labels(labels, model)
        logits = self.logits(model, batch)
        loss = F.cross_entropy(logits.float(), labels)
        with torch.no_grad():
            accuracy = (logits.argmax(-1) == labels).float().mean()
        return Loss(loss, {"loss": loss.detach(), "accuracy": accuracy}, batch["attention_mask"].sum())


@register_objective
class TokenClassification(_HeadObjective):
    """Cross-entropy of the model's token head on each word's first sub-word. Examples:
    :class:`Tagged`; words beyond ``max_length`` are cut and counted (``truncated_words``)."""

    name = "token_classification"
    consumes = "labelled_tokens"

    def prepare(self, examples: Sequence[Tagged]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        rows, label_rows, cut = [], [], 0
        for i, example in enumerate(examples):
            if not isinstance(example, tuple) or len(example) != 2:
                raise ExampleError(f"{self.name}: example {i} must be (pieces, labels)")
            try:
                ids, row, lost = align_first_subword(example[0], example[1], self.specials, self.max_length)
            except ExampleError as err:
                raise ExampleError(f"{self.name}: example {i}: {err}") from None
            rows.append(ids)
            label_rows.append(row)
            cut += lost
        input_ids = pad(rows, self.specials.pad)
        check_vocab(input_ids, self.specials, "sentence")
        lengths = torch.tensor([len(r) for r in rows])
        return {"input_ids": input_ids,
                "attention_mask": (torch.arange(input_ids.shape[1])[None] < lengths[:, None]).long(),
                "labels": self._checked(pad(label_rows, IGNORE, input_ids.shape[1])),
                "truncated_words": torch.tensor(cut)}

    def logits(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[N, C] logits at the labelled positions (row-major order of ``labels != IGNORE``)."""
        return unwrap(model).head_logits(**encoder_inputs(model, batch), positions=batch["labels"].ne(IGNORE))

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        labels = batch["labels"]
        self._check_labels(labels, model)
        targets = labels[labels.ne(IGNORE)]
        logits = self.logits(model, batch)
        loss = F.cross_entropy(logits.float(), targets)
        with torch.no_grad():
            accuracy = (logits.argmax(-1) == targets).float().mean()
        metrics = {"loss": loss.detach(), "accuracy": accuracy, "truncated_words": batch["truncated_words"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())


def head_objective(kind: str) -> Optional[type[_HeadObjective]]:
    """The fine-tuning objective that trains a head of ``kind`` (a probe is a sequence head)."""
    return {"sequence_classification": SequenceClassification, "probe": SequenceClassification,
            "token_classification": TokenClassification}.get(kind)
