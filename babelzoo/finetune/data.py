"""From labelled files to the examples the fine-tuning objectives take.

Classification rows become :class:`~babelzoo.objectives.classification.Labelled` (framed ids,
segment ids, class index); tagged sentences become
:class:`~babelzoo.objectives.classification.Tagged` (each word's sub-words, one class per word).
A label outside the label set is an error naming ``file:line``; nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..datasets.download import sha256_of
from ..datasets.hf_labelled import HfSplit
from ..datasets.labelled import UPOS_TAGS, LabelError, read_bio, read_classification, read_conllu
from ..objectives.classification import Labelled, Tagged
from .recipe import TaskSpec


@dataclass
class Split:
    """Examples of one file (or part of one) and where they came from; ``fingerprint``: what
    they were made from, by content (``{"train_sha256": ..., "tokenizer_sha256": ...}``), the
    identity a resumed run must match."""

    name: str
    source: str
    examples: list
    fingerprint: Optional[dict] = None

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return self.examples[index]

    @property
    def words(self) -> int:
        """Labelled words (tagging) or texts (classification)."""
        return sum(len(e.labels) for e in self.examples) if self.examples and isinstance(self.examples[0], Tagged) \
            else len(self.examples)


def read_rows(spec: TaskSpec, path: str | Path | HfSplit, labels: Sequence[str] | None = None) -> list:
    """The file's (or dataset split's) rows: :class:`~babelzoo.datasets.labelled.LabelledText`
    or :class:`~babelzoo.datasets.labelled.TaggedSentence`."""
    if isinstance(path, HfSplit):
        if spec.token_level:
            return path.read_tagged(words_column=spec.words_column, tag_column=spec.tag_column, tags=labels)
        return path.read_classification(text_column=spec.text_column, label_column=spec.label_column,
                                        text_b_column=spec.text_b_column, id_column=spec.id_column, labels=labels)
    kind = spec.file_format(str(path))
    if spec.token_level != (kind in ("conllu", "bio")):
        raise LabelError(f"{path}: a {kind} file cannot feed task kind {spec.kind!r}")
    if kind == "conllu":
        return read_conllu(path, column=spec.tag_column, tags=labels if labels is not None else UPOS_TAGS)
    if kind == "bio":
        return read_bio(path, tags=labels)
    return read_classification(path, text_column=spec.text_column, label_column=spec.label_column,
                               text_b_column=spec.text_b_column, id_column=spec.id_column, labels=labels,
                               format=kind)


def digest_of(path: str | Path | HfSplit) -> str:
    """A file's sha256, or a dataset split's by its rows: what the data is, by content."""
    return path.digest() if isinstance(path, HfSplit) else sha256_of(path)


def label_set(spec: TaskSpec, train_rows: Sequence[Any]) -> tuple[str, ...]:
    """The recipe's labels, UPOS for CoNLL-U, a dataset's ``ClassLabel`` names, or the sorted
    labels seen in training."""
    if spec.labels:
        return tuple(spec.labels)
    if isinstance(spec.train, HfSplit):
        names = spec.train.label_names(spec.tag_column if spec.token_level else spec.label_column)
        if names is not None:
            return names
    if spec.token_level:
        if spec.file_format(spec.train) == "conllu" and spec.tag_column == "upos":
            return UPOS_TAGS
        return tuple(sorted({t for row in train_rows for t in row.tags}))
    return tuple(sorted({row.label for row in train_rows}))


def encode_rows(rows: Sequence[Any], tokenizer, labels: Sequence[str], spec: TaskSpec, max_length: int) -> list:
    """Tokenize rows into objective examples (texts truncated to ``max_length`` tokens; words
    kept whole: the objective frames and cuts them, counting what it cuts)."""
    index = {label: i for i, label in enumerate(labels)}
    if not rows:
        return []
    if spec.token_level:
        words = [w for row in rows for w in row.words]
        pieces = tokenizer.batch_encode(words, add_special_tokens=False, padding=False, truncation=False,
                                        return_tensors=None)["input_ids"]
        out, start = [], 0
        for row in rows:
            out.append(Tagged(pieces[start:start + len(row.words)], [_index(index, t, row) for t in row.tags]))
            start += len(row.words)
        return out
    texts = [spec.prefix + row.text for row in rows]
    pairs = [row.text_b for row in rows] if spec.text_b_column else None
    enc = tokenizer.batch_encode(texts, pairs, max_length=max_length, padding=False, truncation=True,
                                 return_tensors=None)
    return [Labelled(ids, seg, _index(index, row.label, row))
            for ids, seg, row in zip(enc["input_ids"], enc["segment_ids"], rows)]


def _index(index: dict[str, int], label: str, row: Any) -> int:
    try:
        return index[label]
    except KeyError:
        raise LabelError(f"{row.where}: label {label!r} is not in the label set "
                         f"({', '.join(index)})") from None


def hold_out(rows: Sequence[Any], fraction: float, seed: int) -> tuple[list, list]:
    """(train, dev): a seeded ``fraction`` of the rows held back for model selection."""
    order = np.random.default_rng([seed, 0x5E1EC7]).permutation(len(rows))
    cut = max(1, int(round(fraction * len(rows))))
    dev = sorted(order[:cut].tolist())
    held = set(dev)
    return [rows[i] for i in range(len(rows)) if i not in held], [rows[i] for i in dev]
