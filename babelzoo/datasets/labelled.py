"""Readers for labelled fine-tuning data: sentence classification (TSV, JSON lines), part-of-speech
tagging (CoNLL-U) and named entities (CoNLL-2003 BIO), with helpers for the standard sets built
on them (SIB-200 topics, Universal Dependencies treebanks).

Like :mod:`babelzoo.datasets.text`, every reader validates as it reads and drops nothing
silently: a malformed record raises :class:`LabelError` naming ``file:line`` and the field, and
each record keeps its origin in ``where`` (``"path:line"``). Files are UTF-8, plain or gzip; a
leading byte-order mark and ``\\r\\n`` endings are accepted.

>>> rows = read_sib200("../shared/data", "eng_Latn", "train")   # doctest: +SKIP
>>> rows[0].label, rows[0].id                                    # ('geography', '431')
>>> sentences = read_conllu("UD_French-GSD/fr_gsd-ud-test.conllu")   # doctest: +SKIP

CoNLL-U (https://universaldependencies.org/format.html) is read exactly as the spec writes it,
not with the ``conllu`` package: that parser is lenient by design. It splits a line on a tab *or*
two or more spaces, accepts lines with fewer than ten fields, skips repeated blank lines, checks
neither that word IDs run 1, 2, ... nor that a multi-word token's words follow it, and keeps range
and empty-node lines in a sentence's token list, so ``len(sentence)`` counts them (25,510 "tokens"
in English EWT dev, of which 25,147 are words). For tagging data each of these is a silent
misalignment of words and tags. Here the words of a sentence are its syntactic words (integer
IDs), as in XTREME's UD POS task: a range line ``1-2 du`` is checked (its words ``1 de``, ``2 le``
must follow) and left out, and an empty node ``8.1`` (enhanced graphs only) is checked and
skipped. Only ID, FORM and the tag column are interpreted; HEAD, DEPREL and the rest are not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from ..errors import ConfigError
from .text import CorpusError, _dataset_dir, _unknown, iter_lines


class LabelError(CorpusError):
    """A labelled data file is malformed: the message names ``file:line``, the field and the fix."""


# --- sentence classification -------------------------------------------------------------------

@dataclass(frozen=True)
class LabelledText:
    """One classification example; ``text_b`` is the second text of a pair task (e.g. NLI)."""

    text: str
    label: str
    text_b: Optional[str] = None
    id: Optional[str] = None
    where: str = ""


FORMATS = ("tsv", "jsonl")
_SUFFIX_FORMATS = {".tsv": "tsv", ".tsv.gz": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


def read_classification(path: str | Path, *, text_column: str = "text", label_column: str = "label",
                        text_b_column: Optional[str] = None, id_column: Optional[str] = None,
                        labels: Optional[Sequence[str]] = None, format: Optional[str] = None) -> list[LabelledText]:
    """Read labelled texts from a TSV file with a header line, or from JSON lines.

    ``tsv``: the first line names the columns; fields are split on ``\\t`` exactly (no quoting).
    ``jsonl``: one JSON object per line, with string values under the column names.
    ``format=None`` picks by suffix (``.tsv``, ``.tsv.gz``: tsv; ``.jsonl``, ``.json``: jsonl).
    With ``labels``, a label outside them is an error. Blank lines may end the file only.

    >>> read_classification("sib200/eng_Latn/dev.tsv", label_column="category",
    ...                     id_column="index_id")                # doctest: +SKIP
    """
    path = Path(path)
    columns = {"text": text_column, "label": label_column, "text_b": text_b_column, "id": id_column}
    columns = {role: name for role, name in columns.items() if name is not None}
    kind = _format_of(path, format)
    rows = _tsv_rows(path, columns) if kind == "tsv" else _jsonl_rows(path)
    valid = tuple(labels) if labels is not None else None
    examples = [labelled_row(values, columns, valid, f"{path}:{lineno}") for lineno, values in rows]
    if not examples:
        raise LabelError(f"{path}: no rows" + (" after the header" if kind == "tsv" else ""))
    return examples


def _format_of(path: Path, format: Optional[str]) -> str:
    if format is not None:
        if format not in FORMATS:
            raise ConfigError(f"format={format!r}: expected one of {', '.join(FORMATS)}")
        return format
    name = path.name.lower()
    for suffix, kind in _SUFFIX_FORMATS.items():
        if name.endswith(suffix):
            return kind
    raise LabelError(f"{path}: cannot tell the format from the file name (known suffixes: "
                     f"{', '.join(_SUFFIX_FORMATS)}); pass format='tsv' or format='jsonl'")


def _lines(path: Path, strip: bool = False) -> Iterator[tuple[int, str]]:
    """:func:`~babelzoo.datasets.text.iter_lines`, its errors (no file, invalid UTF-8) as :class:`LabelError`."""
    try:
        yield from iter_lines(path, strip=strip)
    except CorpusError as err:
        raise LabelError(str(err)) from None


def _content_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of ``path`` (line endings removed); blank lines may only end the file."""
    blank_at: Optional[int] = None
    for lineno, text in _lines(path):
        if not text.strip():
            blank_at = blank_at or lineno
            continue
        if blank_at is not None:
            raise LabelError(f"{path}:{blank_at}: blank line between records (only the end of the file "
                             "may be blank); remove it or give the record its fields")
        yield lineno, text


def _tsv_rows(path: Path, columns: Mapping[str, str]) -> Iterator[tuple[int, dict[str, str]]]:
    lines = _content_lines(path)
    first = next(lines, None)
    if first is None:
        raise LabelError(f"{path}: empty file, expected a header line naming the columns")
    header = first[1].split("\t")
    _check_header(header, columns, path)
    for lineno, text in lines:
        fields = text.split("\t")
        if fields == header:  # files concatenated header and all: the header is no record
            raise LabelError(f"{path}:{lineno}: the header line {header} again; remove it (was another file "
                             "appended to this one?)")
        if len(fields) != len(header):
            raise LabelError(f"{path}:{lineno}: expected {len(header)} tab-separated fields as in the header "
                             f"{header}, found {len(fields)}")
        yield lineno, dict(zip(header, fields))


def _check_header(header: list[str], columns: Mapping[str, str], path: Path) -> None:
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise LabelError(f"{path}:1: header names column(s) {repeated} more than once; header: {header}")
    for role, name in columns.items():
        if name not in header:
            raise LabelError(f"{path}:1: no column {name!r} (the {role} column) in the header; "
                             f"the header's columns are {header}")


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, text in _content_lines(path):
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            raise LabelError(f"{path}:{lineno}: invalid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict):
            raise LabelError(f"{path}:{lineno}: expected a JSON object, found {type(record).__name__}")
        yield lineno, record


def labelled_row(values: Mapping[str, Any], columns: Mapping[str, str], labels: Optional[tuple[str, ...]],
                 where: str) -> LabelledText:
    """One row's :class:`LabelledText`: ``columns`` maps roles (``text``, ``label``, ``text_b``,
    ``id``) to the row's keys; errors start with ``where`` (``file:line``)."""
    fields = {role: _field(values, name, role, where) for role, name in columns.items()}
    if fields["label"] != fields["label"].strip():  # else "pos " and "pos" would be two classes
        raise LabelError(f"{where}: label {fields['label']!r} (column {columns['label']!r}) has whitespace "
                         f"around it; labels are compared exactly: write {fields['label'].strip()!r}")
    if labels is not None and fields["label"] not in labels:
        raise LabelError(f"{where}: label {fields['label']!r} (column {columns['label']!r}) is not one of "
                         f"the {len(labels)} labels: {', '.join(labels)}")
    return LabelledText(fields["text"], fields["label"], fields.get("text_b"), fields.get("id"), where)


def _field(values: Mapping[str, Any], name: str, role: str, where: str) -> str:
    if name not in values:
        raise LabelError(f"{where}: no key {name!r} (the {role} field); the object has keys {sorted(values)}")
    value = values[name]
    if value is None:  # JSON null; a dataset's row without the column
        raise LabelError(f"{where}: no value for {name!r} (the {role} field)")
    if not isinstance(value, str):
        raise LabelError(f"{where}: {name!r} (the {role} field) must be a string, found "
                         f"{type(value).__name__} {value!r}")
    if not value.strip():
        raise LabelError(f"{where}: empty {name!r} field (the {role} field)")
    return value


# --- tagging: CoNLL-U and BIO --------------------------------------------------------------------

UPOS_TAGS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON", "PROPN",
             "PUNCT", "SCONJ", "SYM", "VERB", "X")
CONLLU_FIELDS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_TAG_FIELD = {"upos": 3, "xpos": 4}
_WORD_ID = re.compile(r"[1-9][0-9]*")
_RANGE_ID = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_EMPTY_ID = re.compile(r"(0|[1-9][0-9]*)\.([1-9][0-9]*)")
_SENT_ID = re.compile(r"#\s*sent_id\s*=\s*(.*?)\s*")
_BIO_TAG = re.compile(r"O|[BI]-\S+")


@dataclass(frozen=True)
class TaggedSentence:
    """A sentence as parallel ``words`` and ``tags``; ``where`` is ``"path:line"`` of its first line."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    where: str = ""
    sent_id: Optional[str] = None
    text: Optional[str] = None  # CoNLL-U ``# text = ...``
    newdoc: bool = False  # CoNLL-U ``# newdoc``: the sentence starts a document


def read_conllu(path: str | Path, *, column: str = "upos",
                tags: Optional[Sequence[str]] = UPOS_TAGS) -> list[TaggedSentence]:
    """Read the syntactic words of each sentence of a CoNLL-U file and their ``column`` tags
    (``"upos"``, field 4, or ``"xpos"``, field 5: pass ``tags=None`` or the treebank's tag set).

    A tag outside ``tags`` (when given) or ``_`` (unspecified) is an error, as are a line without
    exactly 10 tab-separated fields, IDs that are not 1, 2, ... within a sentence, a bad range or
    empty node, a sentence with no words, and a file with no sentences. Comments must come before a
    sentence's words; ``# sent_id = X`` sets :attr:`TaggedSentence.sent_id`."""
    if column not in _TAG_FIELD:
        raise ConfigError(f"column={column!r}: expected one of {', '.join(_TAG_FIELD)}")
    path = Path(path)
    valid = frozenset(tags) if tags is not None else None
    sentences = [_ConlluSentence(path, column, valid).read(block) for block in _conllu_blocks(path)]
    if not sentences:
        raise LabelError(f"{path}: no sentences")
    return sentences


def _conllu_blocks(path: Path) -> Iterator[list[tuple[int, str]]]:
    """The lines of each sentence: sentences end at one empty line (or at the end of the file)."""
    block: list[tuple[int, str]] = []
    for lineno, text in _lines(path):
        if text and not text.strip():
            raise LabelError(f"{path}:{lineno}: line of only whitespace; a sentence ends with an empty line")
        if text:
            block.append((lineno, text))
        elif block:
            yield block
            block = []
        else:
            raise LabelError(f"{path}:{lineno}: blank line with no sentence before it (CoNLL-U separates "
                             "sentences by exactly one blank line)")
    if block:
        yield block


class _ConlluSentence:
    """Reads one sentence block, checking its ID sequence as the CoNLL-U spec defines it."""

    def __init__(self, path: Path, column: str, tags: Optional[frozenset[str]]):
        self.path, self.column, self.tags = path, column, tags
        self.words: list[str] = []
        self.labels: list[str] = []
        self.sent_id: Optional[str] = None
        self.text: Optional[str] = None
        self.newdoc = False
        self.range: Optional[tuple[int, int, int]] = None  # (first, last, line) of an open multi-word token
        self.empty_node = (0, 0)  # the last empty node a.b seen

    def read(self, block: list[tuple[int, str]]) -> TaggedSentence:
        for lineno, text in block:
            if text.startswith("#"):
                self._comment(text, lineno)
            else:
                self._word_line(self._fields(text, lineno), lineno)
        first = block[0][0]
        self._close_range(f"the sentence ends after word {len(self.words)}")
        if not self.words:
            raise LabelError(f"{self.path}:{first}: sentence with no words (only comments or ranges)")
        return TaggedSentence(tuple(self.words), tuple(self.labels), f"{self.path}:{first}", self.sent_id,
                              self.text, self.newdoc)

    def _error(self, lineno: int, message: str) -> LabelError:
        return LabelError(f"{self.path}:{lineno}: {message}")

    def _comment(self, text: str, lineno: int) -> None:
        if self.words or self.range:
            raise self._error(lineno, "comment line inside a sentence (comments come before its first word line)")
        match = _SENT_ID.fullmatch(text)
        if match:
            if self.sent_id is not None:
                raise self._error(lineno, f"second sent_id {match[1]!r} in one sentence (first: {self.sent_id!r})")
            self.sent_id = match[1]
        elif text.startswith("# text =") or text.startswith("# text="):
            self.text = text.split("=", 1)[1].strip()
        elif text == "# newdoc" or text.startswith("# newdoc ") or text.startswith("# newdoc="):
            self.newdoc = True

    def _fields(self, text: str, lineno: int) -> list[str]:
        fields = text.split("\t")
        if len(fields) != len(CONLLU_FIELDS):
            raise self._error(lineno, f"expected 10 tab-separated fields ({' '.join(CONLLU_FIELDS)}), "
                                      f"found {len(fields)}")
        for number, (name, value) in enumerate(zip(CONLLU_FIELDS, fields), 1):
            if not value:
                raise self._error(lineno, f"empty {name} field (field {number}); CoNLL-U writes '_' for "
                                          "an unspecified value")
        return fields

    def _word_line(self, fields: list[str], lineno: int) -> None:
        token_id = fields[0]
        if _WORD_ID.fullmatch(token_id):
            self._word(int(token_id), fields, lineno)
        elif match := _RANGE_ID.fullmatch(token_id):
            self._range(int(match[1]), int(match[2]), lineno)
        elif match := _EMPTY_ID.fullmatch(token_id):
            self._empty(int(match[1]), int(match[2]), lineno)
        else:
            raise self._error(lineno, f"ID {token_id!r} (field 1) is not a word number (1, 2, ...), "
                                      "a multi-word token range a-b, or an empty node a.b")

    def _word(self, number: int, fields: list[str], lineno: int) -> None:
        expected = len(self.words) + 1
        if number != expected:
            raise self._error(lineno, f"ID {number} (field 1) out of order: expected {expected} "
                                      "(word IDs run 1, 2, ... within a sentence)")
        self.words.append(fields[1])
        self.labels.append(self._tag(fields, lineno))
        if self.range and number == self.range[1]:
            self.range = None

    def _tag(self, fields: list[str], lineno: int) -> str:
        index = _TAG_FIELD[self.column]
        tag, name = fields[index], f"{CONLLU_FIELDS[index]} (field {index + 1})"
        if tag == "_":
            raise self._error(lineno, f"{name} of {fields[1]!r} is '_' (unspecified): every word needs a tag "
                                      "(does the treebank annotate this column?)")
        if self.tags is not None and tag not in self.tags:
            shown = ", ".join(sorted(self.tags)) if len(self.tags) <= 40 else f"{len(self.tags)} tags"
            raise self._error(lineno, f"{name} {tag!r} of {fields[1]!r} is not a valid tag (valid: {shown})")
        return tag

    def _range(self, first: int, last: int, lineno: int) -> None:
        self._close_range(f"a new range {first}-{last} starts at line {lineno}")
        if first >= last:
            raise self._error(lineno, f"range {first}-{last} (field 1): the first ID must be smaller than the last")
        expected = len(self.words) + 1
        if first != expected:
            raise self._error(lineno, f"range {first}-{last} (field 1) must start at the next word, {expected}")
        self.range = (first, last, lineno)

    def _close_range(self, why: str) -> None:
        if self.range:
            first, last, lineno = self.range
            raise self._error(lineno, f"range {first}-{last} (field 1): words {first}..{last} must follow it, "
                                      f"but {why}")

    def _empty(self, head: int, minor: int, lineno: int) -> None:
        last_word = len(self.words)
        expected = self.empty_node[1] + 1 if self.empty_node[0] == head else 1
        if head != last_word or minor != expected:
            raise self._error(lineno, f"empty node {head}.{minor} (field 1) out of order: expected "
                                      f"{last_word}.{expected if head == last_word else 1} after word {last_word}")
        self.empty_node = (head, minor)


def read_bio(path: str | Path, *, tags: Optional[Sequence[str]] = None) -> list[TaggedSentence]:
    """Read CoNLL-2003-style named-entity data: one token per line, whitespace-separated columns,
    the first the word and the last its tag (``O``, ``B-X`` or ``I-X``); blank lines end
    sentences and ``-DOCSTART-`` lines are skipped. With ``tags``, a tag outside them is an error.
    The order of B and I tags is not checked (CoNLL-2003 itself is IOB1)."""
    path = Path(path)
    valid = frozenset(tags) if tags is not None else None
    sentences = [_bio_sentence(block, valid, path) for block in _bio_blocks(path)]
    if not sentences:
        raise LabelError(f"{path}: no sentences")
    return sentences


def _bio_blocks(path: Path) -> Iterator[list[tuple[int, list[str]]]]:
    block: list[tuple[int, list[str]]] = []
    for lineno, text in _lines(path, strip=True):
        fields = text.split()
        if fields and fields[0] != "-DOCSTART-":
            block.append((lineno, fields))
        elif block:
            yield block
            block = []
    if block:
        yield block


def _bio_sentence(block: list[tuple[int, list[str]]], tags: Optional[frozenset[str]], path: Path) -> TaggedSentence:
    for lineno, fields in block:
        tag = fields[-1]
        if len(fields) < 2:
            raise LabelError(f"{path}:{lineno}: expected a word and a tag, found one column {fields[0]!r}")
        if not _BIO_TAG.fullmatch(tag):
            raise LabelError(f"{path}:{lineno}: tag {tag!r} (last column) of {fields[0]!r} is not O, B-X or I-X")
        if tags is not None and tag not in tags:
            raise LabelError(f"{path}:{lineno}: tag {tag!r} (last column) of {fields[0]!r} is not one of "
                             f"{', '.join(sorted(tags))}")
    words = tuple(fields[0] for _, fields in block)
    return TaggedSentence(words, tuple(fields[-1] for _, fields in block), f"{path}:{block[0][0]}")


# --- standard sets: SIB-200 and Universal Dependencies ------------------------------------------

SIB200_LABELS = ("entertainment", "geography", "health", "politics", "science/technology", "sports", "travel")
SIB200_SPLITS = ("train", "dev", "test")
_UD_FILE = re.compile(r".+-ud-([a-z]+)\.conllu")


def sib200_languages(data_dir: str | Path) -> list[str]:
    """Sorted language folders (``eng_Latn``, ...) under ``data_dir/sib200`` that hold a ``test.tsv``;
    ``data_dir`` is the data root or the ``sib200`` folder itself."""
    folder = _dataset_dir(data_dir, "sib200")
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / "test.tsv").is_file())


def read_sib200(data_dir: str | Path, lang: str, split: str) -> list[LabelledText]:
    """SIB-200 topic classification (Adelani et al. 2024) for ``lang`` (e.g. ``"deu_Latn"``) and
    ``split`` (train, dev or test): ``LANG/SPLIT.tsv`` with columns index_id, category, text; the
    seven :data:`SIB200_LABELS` enforced. Rows with the same ``id`` are translations of each other."""
    folder = _dataset_dir(data_dir, "sib200")
    if split not in SIB200_SPLITS:
        raise LabelError(f"no SIB-200 split {split!r} in {folder}; the splits are {', '.join(SIB200_SPLITS)}")
    languages = sib200_languages(folder)
    if lang not in languages and not (folder / lang).is_dir():  # a folder without test.tsv is not listed
        raise LabelError(str(_unknown("SIB-200 language", lang, languages, folder)))
    path = folder / lang / f"{split}.tsv"
    if not path.is_file():
        held = sorted(p.name for p in path.parent.iterdir())
        raise LabelError(f"{path.parent} has no {split}.tsv (it holds: {', '.join(held)})")
    return read_classification(path, label_column="category", id_column="index_id", labels=SIB200_LABELS,
                               format="tsv")


def ud_treebanks(data_dir: str | Path) -> dict[str, dict[str, Path]]:
    """Treebank folders under ``data_dir/ud`` and their CoNLL-U files by split, from the file names
    ``*-ud-SPLIT.conllu``: ``{"UD_English-EWT": {"dev": ..., "test": ...}, ...}``. Folders with
    no such file are left out; ``data_dir`` is the data root or the ``ud`` folder itself."""
    folder = _dataset_dir(data_dir, "ud")
    if not folder.is_dir():
        return {}
    treebanks: dict[str, dict[str, Path]] = {}
    for treebank in sorted(p for p in folder.iterdir() if p.is_dir()):
        splits: dict[str, Path] = {}
        for path in sorted(treebank.iterdir()):
            match = _UD_FILE.fullmatch(path.name)
            if match and match[1] in splits:
                raise LabelError(f"{treebank}: two {match[1]} files, {splits[match[1]].name} and {path.name}")
            if match:
                splits[match[1]] = path
        if splits:
            treebanks[treebank.name] = splits
    return treebanks


def read_ud(data_dir: str | Path, treebank: str, split: str, *, column: str = "upos",
            tags: Optional[Sequence[str]] = UPOS_TAGS) -> list[TaggedSentence]:
    """:func:`read_conllu` of ``treebank``'s ``split`` file (e.g. ``"UD_English-EWT"``, ``"dev"``)."""
    folder = _dataset_dir(data_dir, "ud")
    treebanks = ud_treebanks(folder)
    if treebank not in treebanks:
        raise LabelError(str(_unknown("UD treebank", treebank, list(treebanks), folder)))
    if split not in treebanks[treebank]:
        held = sorted(p.name for p in (folder / treebank).iterdir())
        raise LabelError(f"{folder / treebank} has no *-ud-{split}.conllu file (it holds: {', '.join(held)})")
    return read_conllu(treebanks[treebank][split], column=column, tags=tags)
