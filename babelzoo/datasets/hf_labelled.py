"""Labelled splits read through Hugging Face ``datasets``: fine-tuning data that is not a file.

A fine-tuning task's ``train``, ``dev`` or test entry may name a dataset instead of a file::

    task:
      train: {kind: hf_dataset, path: json, data_files: {train: sib/eng/train.jsonl}, split: train}
      test: {fra: {kind: hf_dataset, path: ./sib_fra, split: test}}
      source: eng

``path`` is what ``datasets.load_dataset`` reads: a packaged builder (``json``, ``csv``,
``parquet``) with local ``data_files``, a dataset folder, or a Hub id found in the ``datasets``
cache (``HF_DATASETS_OFFLINE=1`` keeps it offline). Classification rows take the task's
``text_column``/``label_column`` (and ``text_b_column``/``id_column``); tagging rows a list of
words (``words_column``) and one tag per word (``tag_column``). A ``ClassLabel`` column is read
by its names, which are also the label set when the recipe gives none, in the dataset's order.

Every row is kept or refused: a missing column, a value of the wrong type, an unnamed class
(``-1``, how GLUE marks an unlabelled test row) or a label outside the label set is an error
naming the dataset, split and row. A split is known by its content (:meth:`HfSplit.digest`), as
a file is by its sha256: the zero-shot protocol and resume compare those.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import ConfigError
from ..typed import Where, build
from .hf_load import DataFiles, dataset_path, expand_data_files, load_split, split_files
from .labelled import LabelError, LabelledText, TaggedSentence, labelled_row

KIND = "hf_dataset"


@dataclass(frozen=True)
class HfSplit:
    """One split of a dataset, as a task names it (see the module's docstring). ``streaming``
    reads the rows without writing the ``datasets`` Arrow cache; the rows are the same."""

    path: str
    name: Optional[str] = None
    data_files: DataFiles = None
    split: str = "train"
    revision: Optional[str] = None
    streaming: bool = False

    @classmethod
    def parse(cls, value: Mapping[str, Any], where: Where) -> "HfSplit":
        """From a task's ``{kind: hf_dataset, path: ..., ...}`` mapping."""
        if value.get("kind") != KIND:
            raise ConfigError(f"{where}: a mapping names a dataset as {{kind: {KIND}, path: ..., split: ...}}; "
                              f"got kind={value.get('kind')!r}")
        return build(cls, {k: v for k, v in value.items() if k != "kind"}, where, what=KIND)

    def to_dict(self) -> dict[str, Any]:
        """The mapping a recipe writes (what :meth:`parse` reads back)."""
        return {"kind": KIND, "path": self.path, "name": self.name, "data_files": self.data_files,
                "split": self.split, "revision": self.revision, "streaming": self.streaming}

    def describe(self) -> str:
        """What is read: ``hf_dataset PATH (config NAME; data_files FILES; revision R), split S``."""
        details = [f"{key} {_shown(value)}" for key, value in
                   (("config", self.name), ("data_files", self.data_files), ("revision", self.revision)) if value]
        return f"{KIND} {self.path}" + (f" ({'; '.join(details)})" if details else "") + f", split {self.split}"

    def __str__(self) -> str:
        return self.describe()

    def expanded(self, expand: Callable[[str, str], str]) -> "HfSplit":
        """A copy with ``path`` (when local) and ``data_files`` expanded by ``expand(value, key)``
        (``~`` and ``${VAR}``; ``key`` is ``path`` or ``data_files``)."""
        return dataclasses.replace(self, path=dataset_path(self.path, "path", expand),
                                   data_files=expand_data_files(self.data_files, "data_files", expand))

    @functools.cached_property
    def local_files(self) -> tuple[str, ...]:
        """The local files ``datasets`` reads for this split, found as it finds them (a dataset
        folder's files, a ``data_files`` glob's matches); empty for a dataset that names none (a
        Hub dataset from the cache). The zero-shot protocol tells a split's language by them."""
        found = split_files(self.path, self.name, self.data_files, self.split, self.revision, self.describe(), "it")
        return tuple(f for f in found if os.path.isfile(f))

    # --- reading -------------------------------------------------------------------------------
    def load(self):
        """The split as ``datasets`` gives it (a ``Dataset``, or an ``IterableDataset`` when
        streaming)."""
        return load_split(self.path, self.name, self.data_files, self.split, self.revision, self.streaming,
                          self.describe(), "it")

    def rows(self) -> tuple[list[dict[str, Any]], Mapping[str, Any]]:
        """(every row, the split's features: ``{column: datasets feature}``, empty when unknown)."""
        dataset = self.load()
        rows = [dict(row) for row in dataset]
        if not rows:
            raise LabelError(f"{self.describe()}: no rows")
        return rows, dict(getattr(dataset, "features", None) or {})

    def digest(self) -> str:
        """sha256 of the split's rows (canonical JSON, one line each, in order): the split's
        identity by content, as a file's sha256 is."""
        rows, _ = self.rows()
        return rows_digest(rows)

    def where(self, index: int) -> str:
        return f"{self.describe()}, row {index}"

    def label_names(self, column: str) -> Optional[tuple[str, ...]]:
        """The names of ``column``'s ``ClassLabel`` (also inside a sequence), None when it has none."""
        return class_names(dict(getattr(self.load(), "features", None) or {}).get(column))

    def read_classification(self, *, text_column: str = "text", label_column: str = "label",
                            text_b_column: Optional[str] = None, id_column: Optional[str] = None,
                            labels: Optional[Sequence[str]] = None) -> list[LabelledText]:
        """The split's rows as :class:`LabelledText` (see the module's docstring)."""
        rows, features = self.rows()
        columns = {"text": text_column, "label": label_column, "text_b": text_b_column, "id": id_column}
        columns = {role: name for role, name in columns.items() if name is not None}
        label_of = _label_reader(class_names(features.get(label_column)), label_column, self.where)
        valid = tuple(labels) if labels is not None else None
        out = []
        for index, row in enumerate(rows):
            values = {**row, label_column: label_of(row.get(label_column), index)} if label_column in row else row
            if id_column is not None and isinstance(row.get(id_column), int):
                values = {**values, id_column: str(row[id_column])}
            out.append(labelled_row(values, columns, valid, self.where(index)))
        return out

    def read_tagged(self, *, words_column: str = "tokens", tag_column: str = "tags",
                    tags: Optional[Sequence[str]] = None) -> list[TaggedSentence]:
        """The split's rows as :class:`TaggedSentence`: ``words_column`` a list of words,
        ``tag_column`` one tag (a name or a ``ClassLabel`` index) per word."""
        rows, features = self.rows()
        tag_of = _label_reader(class_names(features.get(tag_column)), tag_column, self.where)
        valid = frozenset(tags) if tags is not None else None
        out = []
        for index, row in enumerate(rows):
            where = self.where(index)
            words, row_tags = (_sequence(row, column, where) for column in (words_column, tag_column))
            if len(words) != len(row_tags):
                raise LabelError(f"{where}: {len(words)} words ({words_column!r}) but {len(row_tags)} tags "
                                 f"({tag_column!r})")
            bad = [w for w in words if not isinstance(w, str) or not w.strip() or w != w.strip()]
            if bad:
                raise LabelError(f"{where}: {words_column!r} holds {bad[0]!r}, not a word (a non-empty string "
                                 "without whitespace around it)")
            names = tuple(tag_of(t, index) for t in row_tags)
            outside = [t for t in names if valid is not None and t not in valid]
            if outside:
                raise LabelError(f"{where}: tag {outside[0]!r} (column {tag_column!r}) is not one of the "
                                 f"{len(valid)} tags: {', '.join(sorted(valid))}")
            if not words:
                raise LabelError(f"{where}: a sentence with no words")
            out.append(TaggedSentence(tuple(words), names, where))
        return out


def _shown(value: Any) -> str:
    """A key's value in :meth:`HfSplit.describe`: text as it is, a list joined, a mapping as
    ``key: value`` (a list there in brackets)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: " + (f"[{_shown(v)}]" if isinstance(v, (list, tuple)) else str(v))
                         for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return str(value)


def rows_digest(rows: Sequence[Mapping[str, Any]]) -> str:
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
    return digest.hexdigest()


def class_names(feature: Any) -> Optional[tuple[str, ...]]:
    """A ``ClassLabel``'s names (also of a ``Sequence``/list of them), else None."""
    inner = getattr(feature, "feature", feature)  # Sequence(ClassLabel(...))
    if isinstance(feature, list) and len(feature) == 1:  # [ClassLabel(...)], datasets' List spelling
        inner = feature[0]
    names = getattr(inner, "names", None)
    return tuple(names) if isinstance(names, list) and all(isinstance(n, str) for n in names) else None


def _label_reader(names: Optional[tuple[str, ...]], column: str,
                  where: Callable[[int], str]) -> Callable[[Any, int], Any]:
    """A value of a label column as the label it stands for: a ``ClassLabel`` index by its name,
    another integer as its digits (``1`` is the label ``"1"``), a string as it is."""
    def read(value: Any, index: int) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            return value  # a string is checked as every label is; anything else is refused there
        if names is None:
            return str(value)
        if not 0 <= value < len(names):
            raise LabelError(f"{where(index)}: {column!r} is {value}, which names no class of its ClassLabel "
                             f"({len(names)} classes: {', '.join(names)})" + ("; -1 marks an unlabelled row"
                                                                              if value == -1 else ""))
        return names[value]

    return read


def _sequence(row: Mapping[str, Any], column: str, where: str) -> list:
    if column not in row:
        raise LabelError(f"{where}: no column {column!r} (its columns: {', '.join(row)})")
    value = row[column]
    if not isinstance(value, (list, tuple)):
        raise LabelError(f"{where}: {column!r} holds {type(value).__name__}, not a list")
    return list(value)
