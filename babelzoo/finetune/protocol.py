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
is checked as a file is: its language is told by each local file it reads (found as ``datasets``
finds them, the path of each telling a language as a file's does), and by its config name when
that is a test language or the config of a test split of the same dataset. A dev split of a
target language is refused as a dev file is; a split whose language nothing tells is taken to be
in ``task.source``, and without ``task.source`` the run is not certified. Splits are compared by
their rows, and the results name what each read (dataset, config, data_files, split).

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
    train_told = _languages(spec, tests, spec.train)
    if len(train_told) > 1:
        return ZeroShot(tests, None, False,
                        f"task.train ({spec.train}) reads data of {len(train_told)} test languages "
                        f"({_listed(train_told)}): a zero-shot run trains on one source language")
    train_lang = next(iter(train_told), None)
    source = _source(spec, tests, train_lang, train_told.get(train_lang, ""))
    dev_told = _dev_languages(spec, tests, source or train_lang)
    if source is None and train_lang is None:
        outside = (_untold(spec.train) if isinstance(spec.train, HfSplit)
                   else "lies outside task.test's language folders")
        return ZeroShot(tests, None, False,
                        f"the source language cannot be told: task.train ({spec.train}) {outside} and task.source is "
                        "not set, so any test language may be the one trained on; set task.source to the test "
                        "language of the training data to certify a zero-shot mean")
    if isinstance(spec.dev, HfSplit) and not dev_told and spec.source is None:
        return ZeroShot(tests, source, False,
                        f"the language of task.dev ({spec.dev}) cannot be told: {_untold(spec.dev)}, and "
                        "task.source is not set, so it may be a target language; set task.source to the language "
                        "trained and selected on to certify a zero-shot mean")
    selection = f"selected on {spec.dev}" if spec.dev else f"selected on a held-back {spec.dev_fraction:g} of it"
    if source is not None:
        return ZeroShot(tests, source, True,
                        f"trained on {spec.train} and {selection}, both {source} "
                        f"({_told(spec, train_told, dev_told)}); {len(tests) - 1} target language(s), their files "
                        "read only after training ended")
    return ZeroShot(tests, None, True,
                    f"trained on {spec.train} and {selection}, both {train_lang}, which has no test file; "
                    f"all {len(tests)} test languages are targets, their files read only after training ended")


def _dev_languages(spec: TaskSpec, tests: dict[str, Path | HfSplit], source: Optional[str]) -> dict[str, str]:
    """The languages ``task.dev`` belongs to (see :func:`_languages`); one that is a test
    language other than ``source`` is refused."""
    told = _languages(spec, tests, spec.dev)
    wrong = [(lang, how) for lang, how in told.items() if lang in tests and lang != source]
    if wrong:
        lang, how = wrong[0]
        raise ConfigError(f"task.dev={spec.dev} belongs to {lang}{_why(how)}, a target language of task.test: "
                          "zero-shot transfer selects on the source language only; give the source's own dev file, "
                          "or dev_fraction: 0.1 to hold back part of task.train")
    return told


def _languages(spec: TaskSpec, tests: dict[str, Path | HfSplit], value: str | HfSplit | None) -> dict[str, str]:
    """The languages ``value`` (``task.train`` or ``task.dev``) belongs to, named as task.test
    names them, each with how it is told: a file by its path (:meth:`TaskSpec.language_of`; how:
    ``""``), a dataset split by every local file it reads (each as a file is) and by its config
    name when that is a test language or the config of a test split of the same dataset."""
    if value is None:
        return {}
    if not isinstance(value, HfSplit):
        lang = spec.language_of(value)
        return {lang: ""} if lang else {}
    told: dict[str, str] = {}
    for file in value.local_files:
        lang = spec.language_of(file)
        if lang:
            told.setdefault(lang, f"by its file {file}")
    if value.name is not None:
        for lang, test in tests.items():
            if value.name == lang or (isinstance(test, HfSplit) and (test.path, test.name) == (value.path, value.name)):
                told.setdefault(lang, f"by its config name {value.name!r}")
    return told


def _untold(split: HfSplit) -> str:
    """Why nothing tells ``split``'s language."""
    files = split.local_files
    where = (f"its files ({', '.join(files)}) lie outside task.test's language folders" if files
             else "it reads no local file")
    return f"{where} and its config names no test language"


def _told(spec: TaskSpec, train_told: dict[str, str], dev_told: dict[str, str]) -> str:
    """How the source language of the train and dev data is known, for the note."""
    if isinstance(spec.train, HfSplit):
        parts = [f"task.train {next(iter(train_told.values()))}" if train_told else "task.train as task.source says"]
    else:
        parts = ["from the train file's path" if train_told else "as task.source says"]
    if isinstance(spec.dev, HfSplit):
        parts.append(f"task.dev {next(iter(dev_told.values()))}" if dev_told else "task.dev as task.source says")
    return "; ".join(parts)


def _why(how: str) -> str:
    return f" ({how})" if how else ""


def _listed(told: dict[str, str]) -> str:
    return ", ".join(f"{lang} {how}" for lang, how in told.items())


def _check_dev(spec: TaskSpec, train_sha256: str, dev_sha256: Optional[str]) -> None:
    if spec.dev is not None and (dev_sha256 == train_sha256 or _same(spec.dev, spec.train)):
        raise ConfigError(f"task.dev={spec.dev} holds the same data as task.train={spec.train}: selecting on "
                          "training data favours the most over-fitted model; give a separate dev file, or "
                          "dev_fraction: 0.1 to hold back part of task.train")


def _source(spec: TaskSpec, tests: dict[str, Path], train_lang: Optional[str], how: str) -> Optional[str]:
    """The test language trained on: ``task.source`` (checked), else the train data's language
    when it has a test file (``how``: what tells that language, for the message)."""
    if spec.source is None:
        return train_lang if train_lang in tests else None
    if spec.source not in tests:
        close = [c for c in difflib.get_close_matches(spec.source, list(tests), n=3, cutoff=0.5)]
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"task.source={spec.source!r} is none of the {len(tests)} test languages{hint} "
                          f"(available: {', '.join(tests)}); name the source as task.test names it")
    if train_lang is not None and train_lang != spec.source:
        raise ConfigError(f"task.source={spec.source!r} but task.train={spec.train} belongs to {train_lang}"
                          f"{_why(how)}: the source is the language trained on; correct task.source or task.train")
    return spec.source


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
