"""The zero-shot protocol of a fine-tuning run, derived from the files it reads.

A run is *zero-shot* when the model is trained and selected on one language (the source) and
tested on others (the targets) whose labels it never saw. That is checked here, before
training, from the paths and contents of the files:

- the source is the language of ``task.train``, named as ``task.test`` names languages (the part
  of the path its first ``*`` stands for); ``task.source``, when given, must be exactly one of the
  test languages and agree with ``task.train``;
- ``task.dev`` is neither the train file nor a test file, and not a file of a target language;
- no test file is the train or dev file (by path or by content);
- every test file exists and has a format the task reads (its labels are not read until
  training has ended).

A ``train`` or ``dev`` that names a dataset split (:class:`~babelzoo.datasets.hf_labelled.HfSplit`)
tells no language by its path: its source is ``task.source``. Splits are compared by their rows.

A mistake is refused with a message naming the files. A run whose source cannot be told from
its paths (and has no ``task.source``) is not refused, but its results say ``"zero_shot":
false`` with the reason, and carry no zero-shot mean.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..datasets.download import sha256_of
from ..datasets.hf_labelled import HfSplit
from ..datasets.labelled import LabelError
from ..datasets.text import CorpusError, iter_lines
from ..zoo.config import ConfigError
from .recipe import TaskSpec


@dataclass(frozen=True)
class ZeroShot:
    """What the run's files certify: ``tests`` (``{language: file}``), the ``source`` among them
    (None when the source language has no test file, or cannot be told), whether the run is
    ``certified`` zero-shot, and ``note``: on what grounds, or why not."""

    tests: dict[str, Path] = field(default_factory=dict)
    source: Optional[str] = None
    certified: bool = False
    note: str = ""

    @property
    def targets(self) -> list[str]:
        return [lang for lang in self.tests if lang != self.source]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "targets": self.targets, "zero_shot": self.certified,
                "zero_shot_note": self.note}


def certify(spec: TaskSpec, train_sha256: str, dev_sha256: Optional[str]) -> ZeroShot:
    """Check the run's files as the module docstring says (``spec`` resolved; the digests of
    the train and dev files as read); raise :class:`ConfigError` for a run that would mix
    source and target data."""
    tests = spec.test_files()
    digests = {lang: _check_test_file(spec, lang, path) for lang, path in tests.items()}
    _check_dev(spec, train_sha256, dev_sha256)
    taken = [f"task.{role} ({file}) as test language {lang!r}"
             for role, file, sha in (("train", spec.train, train_sha256), ("dev", spec.dev, dev_sha256))
             for lang, path in tests.items() if sha is not None and (digests[lang] == sha or _same(path, file))]
    if taken:
        raise ConfigError(f"task.test={_shown(spec.test)} takes {' and '.join(taken)}: a file the model was trained "
                          "or selected on cannot test it; make task.test name the test files only (e.g. "
                          "data/*/test.tsv)")
    if not tests:
        return ZeroShot(note="no test files (task.test is not set)")
    train_lang = spec.language_of(spec.train)
    source = _source(spec, tests, train_lang)
    dev_lang = spec.language_of(spec.dev) if spec.dev else None
    if dev_lang is not None and dev_lang in tests and dev_lang != (source or train_lang):
        raise ConfigError(f"task.dev={spec.dev} belongs to {dev_lang}, a target language of task.test: zero-shot "
                          f"transfer selects on the source language only; give the source's own dev file, or "
                          "dev_fraction: 0.1 to hold back part of task.train")
    selection = f"selected on {spec.dev}" if spec.dev else f"selected on a held-back {spec.dev_fraction:g} of it"
    if source is not None:
        return ZeroShot(tests, source, True,
                        f"trained on {spec.train} and {selection}, both {source} ({_named(spec, train_lang)}); "
                        f"{len(tests) - 1} target language(s), their files read only after training ended")
    if train_lang is not None:
        return ZeroShot(tests, None, True,
                        f"trained on {spec.train} and {selection}, both {train_lang}, which has no test file; "
                        f"all {len(tests)} test languages are targets, their files read only after training ended")
    return ZeroShot(tests, None, False,
                    f"the source language cannot be told: task.train ({spec.train}) lies outside task.test's "
                    "language folders and task.source is not set, so any test language may be the one trained "
                    "on; set task.source to the test language of the training data to certify a zero-shot mean")


def _check_dev(spec: TaskSpec, train_sha256: str, dev_sha256: Optional[str]) -> None:
    if spec.dev is not None and (dev_sha256 == train_sha256 or _same(spec.dev, spec.train)):
        raise ConfigError(f"task.dev={spec.dev} holds the same data as task.train={spec.train}: selecting on "
                          "training data favours the most over-fitted model; give a separate dev file, or "
                          "dev_fraction: 0.1 to hold back part of task.train")


def _source(spec: TaskSpec, tests: dict[str, Path], train_lang: Optional[str]) -> Optional[str]:
    """The test language trained on: ``task.source`` (checked), else the train file's language
    when it has a test file."""
    if spec.source is None:
        return train_lang if train_lang in tests else None
    if spec.source not in tests:
        close = [c for c in difflib.get_close_matches(spec.source, list(tests), n=3, cutoff=0.5)]
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"task.source={spec.source!r} is none of the {len(tests)} test languages{hint} "
                          f"(available: {', '.join(tests)}); name the source as task.test names it")
    if train_lang is not None and train_lang != spec.source:
        raise ConfigError(f"task.source={spec.source!r} but task.train={spec.train} belongs to {train_lang}: the "
                          "source is the language trained on; correct task.source or task.train")
    return spec.source


def _named(spec: TaskSpec, train_lang: Optional[str]) -> str:
    return "from the train file's path" if train_lang is not None else "as task.source says"


def _check_test_file(spec: TaskSpec, lang: str, path: Path | HfSplit) -> str:
    """The file's sha256, once it is known to exist with a format this task reads (TSV: a
    header naming the columns); a dataset split's digest of its rows. Its labels are not
    looked at."""
    if isinstance(path, HfSplit):
        return path.digest()
    if not path.exists():
        raise ConfigError(f"task.test ({lang}): {path}: no such file")
    if path.is_dir():
        raise ConfigError(f"task.test ({lang}): {path} is a folder, not a file")
    kind = spec.file_format(str(path))
    if spec.token_level != (kind in ("conllu", "bio")):
        raise ConfigError(f"task.test ({lang}): {path} is a {kind} file, which cannot feed task kind {spec.kind!r}")
    if kind == "tsv":
        try:
            first = next(iter_lines(path, strip=False), (1, ""))[1]
        except CorpusError as err:
            raise LabelError(str(err)) from None
        columns = [c for c in (spec.text_column, spec.label_column, spec.text_b_column, spec.id_column) if c]
        missing = [c for c in columns if c not in first.split("\t")]
        if missing:
            raise LabelError(f"{path}:1: no column(s) {missing} in the header; its columns are {first.split(chr(9))}")
    return sha256_of(path)


def _same(a: str | Path | HfSplit, b: str | Path | HfSplit) -> bool:
    if isinstance(a, HfSplit) or isinstance(b, HfSplit):
        return a == b
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _shown(test: Any) -> str:
    return repr(test) if isinstance(test, str) else "{...}"
