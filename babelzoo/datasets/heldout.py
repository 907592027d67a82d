"""The sentences of the standard test sets, so that training data can be kept apart from them.

A model adapted on text gathered from installed packages must not see, by chance, a sentence it
is then tested on: a catalog of a web framework may well translate "What time is it?" or
"Good morning.". :class:`HeldOutSentences` reads every sentence of the test files in a data dir
(the layout of ``../shared/data``):

- Tatoeba: every ``tatoeba/tatoeba.XXX-eng.*`` file, both sides;
- SIB-200 / Flores-200: the ``text`` column of every ``sib200/*/{train,dev,test}.tsv`` (all
  three splits are Flores sentences, and ``flores_retrieval`` reads them);
- Multi30k: every ``multi30k/test*`` file (gzip or plain).

Sentences are compared after :func:`normalise_sentence`: Unicode NFKC, whitespace collapsed and
stripped, case-folded; so "What time is it?" and "what  time is it?" are the same sentence.
"""

from __future__ import annotations

import gzip
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..errors import BabelzooError

_SPACE = re.compile(r"\s+")


class NoTestSets(BabelzooError, FileNotFoundError):
    """The data dir holds none of the test files a filter was asked to read."""


def normalise_sentence(text: str) -> str:
    """NFKC, whitespace collapsed to one space and stripped, case-folded."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        yield from (line.rstrip("\n") for line in f)


def _tsv_texts(path: Path) -> Iterator[str]:
    lines = _lines(path)
    header = next(lines, "").split("\t")
    column = header.index("text") if "text" in header else len(header) - 1
    for line in lines:
        fields = line.split("\t")
        if len(fields) > column:
            yield fields[column]


def heldout_files(data_dir: str | Path) -> list[Path]:
    """The test files :class:`HeldOutSentences` reads under ``data_dir``, sorted."""
    root = Path(data_dir)
    found = [*root.glob("tatoeba/tatoeba.*-eng.*"), *root.glob("sib200/*/*.tsv"), *root.glob("multi30k/test*")]
    return sorted(p for p in found if p.is_file() and not p.name.startswith(("README", "LICENSE")))


@dataclass(frozen=True)
class HeldOutSentences:
    """The normalised sentences of a data dir's test files (:func:`heldout_files`)."""

    sentences: frozenset[str]
    files: tuple[str, ...]

    @classmethod
    def from_data_dir(cls, data_dir: str | Path) -> "HeldOutSentences":
        files = heldout_files(data_dir)
        if not files:
            raise NoTestSets(f"{data_dir}: no Tatoeba, SIB-200 or Multi30k test files (tatoeba/tatoeba.*-eng.*, "
                                  f"sib200/*/*.tsv, multi30k/test*) to keep out of training")
        return cls(frozenset(normalise_sentence(s) for path in files for s in _read(path) if s.strip()),
                   tuple(str(p) for p in files))

    @classmethod
    def of(cls, sentences: Iterable[str]) -> "HeldOutSentences":
        return cls(frozenset(normalise_sentence(s) for s in sentences), ())

    def __contains__(self, text: str) -> bool:
        return normalise_sentence(text) in self.sentences

    def __len__(self) -> int:
        return len(self.sentences)

    def split(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
        """``(kept, removed)``: the pairs neither side of which is a test sentence, and how many
        were removed."""
        kept = [pair for pair in pairs if pair[0] not in self and pair[1] not in self]
        return kept, len(pairs) - len(kept)


def _read(path: Path) -> Iterator[str]:
    return _tsv_texts(path) if path.suffix == ".tsv" else _lines(path)
