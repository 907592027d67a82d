"""Readers for text corpora: monolingual files, line-aligned parallel file pairs and TSV.

Every reader validates as it reads and loses nothing silently:

* bytes that are not UTF-8 raise :class:`CorpusError` naming ``file:line``, and a UTF-16 or
  UTF-32 file is named as one (:func:`babelzoo._files.refuse_utf16`);
* parallel files with different line counts raise naming both files and both counts;
* a TSV line with the wrong number of fields raises naming ``file:line``;
* empty lines follow an explicit policy (``empty=``) and are counted in a :class:`ReadReport`.

Empty-line policies (a line is empty when it holds only whitespace):

``"skip"`` (default)
    monolingual: drop the line; parallel: drop the pair when either side is empty. Counted in
    :attr:`ReadReport.skipped` and per file in :attr:`ReadReport.empty`.
``"error"``
    raise :class:`CorpusError` at the first empty line, naming ``file:line``.
``"keep"``
    keep the empty string (for corpora where a blank line means something, e.g. a document
    boundary for next-sentence objectives). Still counted in :attr:`ReadReport.empty`.

Files are read as bytes and split on ``\\n`` only (so ``wc -l`` agrees with the line numbers in
errors); ``\\r\\n`` endings and a leading byte-order mark are removed, and each line is stripped
of surrounding whitespace. Gzip files are recognised by their magic bytes, whatever their name.

The standard sets have helpers: :func:`tatoeba_pairs` (LASER/XTREME Tatoeba test sets,
``tatoeba.XXX-eng.XXX``) and :func:`multi30k_pairs` (Multi30k task 1, ``SPLIT.LANG.gz``).
"""

from __future__ import annotations

import difflib
import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Literal, Optional, Sequence

from .._files import refuse_utf16
from ..errors import BabelzooError, ConfigError
from ..registry import choices_hint

EmptyPolicy = Literal["skip", "error", "keep"]
EMPTY_POLICIES = ("skip", "error", "keep")
GZIP_MAGIC = b"\x1f\x8b"
BOM = "\ufeff"


class CorpusError(BabelzooError, ValueError):
    """A corpus file is malformed: the message names the file (and line) and what was wrong."""


@dataclass
class ReadReport:
    """What a reader saw, so nothing is lost unnoticed.

    ``lines``: lines read (all files of a monolingual corpus together; for a parallel file pair,
    the common line count); ``kept``: records returned; ``skipped``: records dropped by the empty
    policy; ``header``: 1 when a TSV header line was consumed; ``empty``: per file, the empty
    lines (TSV: lines with an empty source or target), counted under every policy.
    Always ``lines == kept + skipped + header``.
    """

    files: tuple[str, ...]
    lines: int = 0
    kept: int = 0
    skipped: int = 0
    header: int = 0
    empty: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        empties = ", ".join(f"{Path(f).name}: {n}" for f, n in self.empty.items() if n)
        return (f"{self.lines} lines, kept {self.kept}, skipped {self.skipped}"
                + (f" (empty lines: {empties})" if empties else ""))


@dataclass
class MonolingualCorpus:
    """Sentences in one language, in file order."""

    lang: str
    sentences: list[str]
    report: ReadReport

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[str]:
        return iter(self.sentences)


@dataclass
class ParallelCorpus:
    """Translation pairs ``(src, tgt)``: ``pairs[i][1]`` translates ``pairs[i][0]``."""

    src_lang: str
    tgt_lang: str
    pairs: list[tuple[str, str]]
    report: ReadReport

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.pairs)

    @property
    def sources(self) -> list[str]:
        return [src for src, _ in self.pairs]

    @property
    def targets(self) -> list[str]:
        return [tgt for _, tgt in self.pairs]

    def swapped(self) -> "ParallelCorpus":
        """The same pairs in the other direction (``tgt`` becomes the source)."""
        return ParallelCorpus(self.tgt_lang, self.src_lang, [(t, s) for s, t in self.pairs], self.report)


def _check_policy(empty: str) -> None:
    if empty not in EMPTY_POLICIES:
        raise ConfigError(f"empty={empty!r}: expected one of {', '.join(EMPTY_POLICIES)}")


def open_binary(path: str | Path) -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently decompressing gzip (detected by magic)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: {'a folder, not a text file' if path.is_dir() else 'no such file'}")
    with open(path, "rb") as handle:
        magic = handle.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def _decode(raw: bytes, path: Path, lineno: int, strip: bool = True) -> str:
    if lineno == 1:
        refuse_utf16(path, raw, CorpusError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start:err.start + 4]
        raise CorpusError(f"{path}:{lineno}: invalid UTF-8 at byte {err.start} of the line "
                          f"({bad!r}); re-encode the file as UTF-8") from None
    if lineno == 1 and text.startswith(BOM):
        text = text[1:]
    text = text.rstrip("\r\n")
    if "\r" in text:  # classic Mac line endings: the whole file would be one "line"
        raise CorpusError(f"{path}:{lineno}: carriage return inside a line (CR-only line endings?); "
                          "convert the file to \\n line endings")
    return text.strip() if strip else text


def iter_lines(path: str | Path, strip: bool = True) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for each line of a plain or gzip UTF-8 file, numbered from 1,
    stripped of surrounding whitespace (``strip=False``: only of the line ending); raise
    :class:`CorpusError` on invalid UTF-8."""
    path = Path(path)
    with open_binary(path) as handle:
        try:
            for lineno, raw in enumerate(handle, 1):
                yield lineno, _decode(raw, path, lineno, strip)
        except (OSError, EOFError, zlib.error) as err:  # truncated or corrupt gzip stream
            raise CorpusError(f"{path}: cannot read: {err}") from err


def count_lines(path: str | Path) -> int:
    """Number of lines as :func:`iter_lines` numbers them (a last line without ``\\n`` counts)."""
    count, last = 0, b"\n"
    with open_binary(path) as handle:
        try:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                count += chunk.count(b"\n")
                last = chunk[-1:]
        except (OSError, EOFError, zlib.error) as err:
            raise CorpusError(f"{path}: cannot read: {err}") from err
    return count + (last != b"\n")


def iter_sentences(paths: str | Path | Sequence[str | Path], empty: EmptyPolicy = "skip",
                   report: Optional[ReadReport] = None) -> Iterator[str]:
    """Stream the sentences of one or more monolingual files under the ``empty`` policy, counting
    into ``report`` as it goes (complete once the iterator is exhausted)."""
    _check_policy(empty)
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if report is None:
        report = ReadReport(files=tuple(str(f) for f in files))
    for path in files:
        report.empty.setdefault(str(path), 0)
        for lineno, text in iter_lines(path):
            report.lines += 1
            if not text:
                report.empty[str(path)] += 1
                if empty == "error":
                    raise CorpusError(f"{path}:{lineno}: empty line (empty='error'; use 'skip' to drop it)")
                if empty == "skip":
                    report.skipped += 1
                    continue
            report.kept += 1
            yield text


def read_monolingual(paths: str | Path | Sequence[str | Path], lang: str,
                     empty: EmptyPolicy = "skip") -> MonolingualCorpus:
    """Read one sentence per line from one or more files (plain or gzip), in order.

    >>> corpus = read_monolingual(["news.de.gz", "wiki.de"], "de")   # doctest: +SKIP
    >>> corpus.report.skipped                                         # empty lines dropped, counted
    """
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    report = ReadReport(files=tuple(str(f) for f in files))
    sentences = list(iter_sentences(files, empty, report))
    return MonolingualCorpus(lang, sentences, report)


def _apply_policy(blank_at: Sequence[tuple[Path, int]], empty: str, report: ReadReport) -> bool:
    """Apply the empty policy to one record; ``blank_at`` lists ``(file, line)`` of its empty
    sides (none: the record is complete). Return whether to keep the record."""
    if not blank_at:
        return True
    if empty == "error":
        path, lineno = blank_at[0]
        raise CorpusError(f"{path}:{lineno}: empty line or field in a parallel corpus "
                          "(empty='error'; use 'skip' to drop the pair)")
    if empty == "skip":
        report.skipped += 1
        return False
    return True


def read_parallel(src_path: str | Path, tgt_path: str | Path, src_lang: str, tgt_lang: str,
                  empty: EmptyPolicy = "skip") -> ParallelCorpus:
    """Read a line-aligned file pair: line *i* of ``tgt_path`` translates line *i* of ``src_path``.

    Raises :class:`CorpusError` if the files have different line counts (both named, both counts
    given, and the first line of the longer file without a partner as ``file:line``) before
    reading any text. With ``empty="skip"`` a pair is dropped when either side is
    empty, so the alignment of the rest is kept.
    """
    _check_policy(empty)
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    n_src, n_tgt = count_lines(src_path), count_lines(tgt_path)
    if n_src != n_tgt:
        longer, shorter = (src_path, tgt_path) if n_src > n_tgt else (tgt_path, src_path)
        raise CorpusError(f"parallel files are not line-aligned: {src_path} has {n_src} lines but "
                          f"{tgt_path} has {n_tgt} lines ({longer}:{min(n_src, n_tgt) + 1} is the first "
                          f"line with no partner in {shorter.name})")
    report = ReadReport(files=(str(src_path), str(tgt_path)), empty={str(src_path): 0, str(tgt_path): 0})
    pairs: list[tuple[str, str]] = []
    for (lineno, src), (_, tgt) in zip(iter_lines(src_path), iter_lines(tgt_path)):
        report.lines += 1
        blank_at = [(p, lineno) for p, text in ((src_path, src), (tgt_path, tgt)) if not text]
        for p, _ in blank_at:
            report.empty[str(p)] += 1
        if _apply_policy(blank_at, empty, report):
            pairs.append((src, tgt))
    report.kept = len(pairs)
    return ParallelCorpus(src_lang, tgt_lang, pairs, report)


def read_parallel_tsv(path: str | Path, src_lang: Optional[str] = None, tgt_lang: Optional[str] = None, *,
                      src_column: int | str = 0, tgt_column: int | str = 1, header: Optional[bool] = None,
                      num_fields: Optional[int] = None, empty: EmptyPolicy = "skip") -> ParallelCorpus:
    """Read translation pairs from two columns of a tab-separated file (no quoting: a field is
    everything between tabs, as in Tatoeba's exports).

    Columns are positional (``0``, ``1``...) or named by a header line; named columns imply
    ``header=True`` and default the languages to the column names. Every line must have the same
    number of fields: ``num_fields`` when given, else the header's, else the first line's; a line
    that differs raises :class:`CorpusError` naming ``file:line``. A wholly blank line, or an
    empty source or target field, is an empty record under the ``empty`` policy.
    """
    _check_policy(empty)
    path = Path(path)
    named = isinstance(src_column, str) or isinstance(tgt_column, str)
    if header is None:
        header = named
    if named and not header:
        raise ConfigError("named columns need header=True (the first line names the columns)")
    src_lang = src_lang or (src_column if isinstance(src_column, str) else None)
    tgt_lang = tgt_lang or (tgt_column if isinstance(tgt_column, str) else None)
    if src_lang is None or tgt_lang is None:
        raise ConfigError("give src_lang and tgt_lang (or name the columns after the languages)")
    report = ReadReport(files=(str(path),), empty={str(path): 0})
    pairs: list[tuple[str, str]] = []
    columns: Optional[tuple[int, int]] = None if named else (int(src_column), int(tgt_column))
    lines = iter_lines(path, strip=False)  # keep tabs: an empty last field is a field
    if header:
        first = next(lines, None)
        if first is None:
            raise CorpusError(f"{path}: empty file, expected a header line")
        names = [name.strip() for name in first[1].split("\t")]
        num_fields = num_fields or len(names)
        report.lines, report.header = 1, 1
        if named:
            columns = tuple(_column_index(c, names, path) for c in (src_column, tgt_column))  # type: ignore[assignment]
    assert columns is not None
    for lineno, text in lines:
        report.lines += 1
        if not text.strip():  # a blank line: an empty record, not a field-count error
            report.empty[str(path)] += 1
            if _apply_policy([(path, lineno)], empty, report):
                pairs.append(("", ""))
            continue
        fields = [f.strip() for f in text.split("\t")]
        num_fields = num_fields or len(fields)
        if len(fields) != num_fields:
            raise CorpusError(f"{path}:{lineno}: expected {num_fields} tab-separated fields, found {len(fields)}")
        if max(columns) >= len(fields):
            raise CorpusError(f"{path}:{lineno}: column {max(columns)} requested but the line has "
                              f"{len(fields)} fields")
        src, tgt = fields[columns[0]], fields[columns[1]]
        blank = not src or not tgt
        report.empty[str(path)] += blank
        if _apply_policy([(path, lineno)] if blank else [], empty, report):
            pairs.append((src, tgt))
    report.kept = len(pairs)
    return ParallelCorpus(src_lang, tgt_lang, pairs, report)


def _column_index(column: int | str, names: list[str], path: Path) -> int:
    if isinstance(column, int):
        return column
    if column not in names:
        close = difflib.get_close_matches(column, names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise CorpusError(f"{path}:1: no column named {column!r} in header {names}{hint}")
    return names.index(column)


def _dataset_dir(data_dir: str | Path, name: str) -> Path:
    """Accept either the data root (holding ``name/``) or the dataset folder itself."""
    data_dir = Path(data_dir)
    return data_dir / name if (data_dir / name).is_dir() else data_dir


def _unknown(what: str, value: str, known: Sequence[str], where: Path) -> CorpusError:
    """``value`` is none of ``known`` (the callers check what is there the same way they list it)."""
    return CorpusError(f"no {what} {value!r} in {where}"
                       + choices_hint(value, list(known), "one", "available", quote=str, limit=20))


TATOEBA_FILES = "tatoeba.XXX-eng.XXX"  # how the test sets' files are named, for messages


def tatoeba_files(folder: Path, lang: str) -> tuple[Path, Path]:
    """The ``lang`` side and the English side of one Tatoeba test set in ``folder``."""
    return folder / f"tatoeba.{lang}-eng.{lang}", folder / f"tatoeba.{lang}-eng.eng"


def tatoeba_languages(data_dir: str | Path) -> list[str]:
    """ISO 639-3 codes of the Tatoeba test sets present (``tatoeba.XXX-eng.XXX`` files)."""
    folder = _dataset_dir(data_dir, "tatoeba")
    langs = {p.name.split(".")[1].split("-")[0] for p in folder.glob("tatoeba.*-eng.*")}
    return sorted(lang for lang in langs if tatoeba_files(folder, lang)[0].exists())


def tatoeba_pairs(data_dir: str | Path, lang: str, empty: EmptyPolicy = "skip") -> ParallelCorpus:
    """The Tatoeba test set for ``lang`` (ISO 639-3, e.g. ``"deu"``) as (lang, English) pairs,
    from ``tatoeba.LANG-eng.LANG`` and ``tatoeba.LANG-eng.eng`` (Artetxe & Schwenk 2019, LASER;
    used by XTREME, Hu et al. 2020). ``data_dir`` is the data root or the ``tatoeba`` folder."""
    folder = _dataset_dir(data_dir, "tatoeba")
    src, tgt = tatoeba_files(folder, lang)
    if not src.exists():
        raise _unknown("Tatoeba language", lang, tatoeba_languages(folder), folder)
    if not tgt.exists():
        raise CorpusError(f"{tgt}: missing (the English side of the {lang} Tatoeba test set, whose "
                          f"{src.name} is there)")
    return read_parallel(src, tgt, lang, "eng", empty=empty)


def _multi30k_file(folder: Path, split: str, lang: str) -> Optional[Path]:
    for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
        if (folder / name).exists():
            return folder / name
    return None


def multi30k_splits(data_dir: str | Path) -> dict[str, list[str]]:
    """Splits present and their languages, e.g. ``{"train": ["cs", "de", "en", "fr"], ...}``."""
    folder = _dataset_dir(data_dir, "multi30k")
    found: dict[str, set[str]] = {}
    for path in folder.iterdir() if folder.is_dir() else ():
        stem = path.name[:-3] if path.name.endswith(".gz") else path.name
        split, dot, lang = stem.rpartition(".")
        if dot and split and len(lang) == 2:
            found.setdefault(split, set()).add(lang)
    return {split: sorted(langs) for split, langs in sorted(found.items())}


def multi30k_pairs(data_dir: str | Path, split: str, src: str, tgt: str,
                   empty: EmptyPolicy = "skip") -> ParallelCorpus:
    """Multi30k task 1 (Elliott et al. 2016) image descriptions for ``split`` (``train``,
    ``val``, ``test_2016_flickr``...) as (src, tgt) pairs from ``SPLIT.LANG.gz`` (or plain)
    files, which are line-aligned across en, de, fr and cs."""
    folder = _dataset_dir(data_dir, "multi30k")
    splits = multi30k_splits(folder)
    if split not in splits:
        raise _unknown("Multi30k split", split, list(splits), folder)
    for lang in (src, tgt):
        if lang not in splits[split]:
            raise _unknown(f"Multi30k {split} language", lang, splits[split], folder)
    src_path, tgt_path = _multi30k_file(folder, split, src), _multi30k_file(folder, split, tgt)
    assert src_path is not None and tgt_path is not None
    return read_parallel(src_path, tgt_path, src, tgt, empty=empty)

