"""The embedded multilingual corpus: human translations of application strings shipped with
installed packages (Gramps, 40 languages, ~6,500 messages; Django, ~100 languages, ~900),
read through :mod:`babelzoo.offline.catalogs`, with one fixed held-out split shared by every
trainer and evaluator so that no held-out message is ever trained on; its data sources
(``catalog_text``, ``catalog_pairs``, ``catalog_documents``, ``catalog_parallel_documents``)
and the ``gettext_retrieval`` task that tests on the held-out part."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Mapping, Sequence

from ..datasets.sources import CorpusSource, DocumentSource, Split, register_source
from ..datasets.text import MonolingualCorpus, ParallelCorpus, ReadReport
from ..errors import BabelzooError, ConfigError
from ..evaluation.tasks import TASKS, Result, TaskContext, TaskSkipped, per_language
from ..evaluation.tasks.retrieval import bitext_results
from .catalogs import MultiwayCorpus, clean_message, gettext_corpus, normalize_locale
from .gettext_files import catalog_files, locale_of, read_po

EMBEDDED_PACKAGES = ("gramps",)
HELDOUT_PERCENT = 10


def is_heldout(key: str, percent: int = HELDOUT_PERCENT) -> bool:
    """A message is held out when the first byte of sha1(msgid) falls in the lowest
    ``percent`` of 0..255: a split that depends on the message alone, not on file order."""
    return hashlib.sha1(key.encode("utf-8")).digest()[0] < 256 * percent // 100


class MissingCorpora(BabelzooError, RuntimeError):
    """The packages whose catalogs make the embedded corpora are missing or unreadable."""


@lru_cache(maxsize=4)
def embedded_corpus(packages: Sequence[str] = EMBEDDED_PACKAGES) -> MultiwayCorpus:
    """The multi-way corpus of ``packages`` (cached per process: reading Gramps takes seconds)."""
    try:
        return gettext_corpus(tuple(packages), min_languages=2)
    except Exception as err:
        raise MissingCorpora(f"cannot read the embedded corpora from {list(packages)}: {err}; "
                           f"install them with `pip install babelzoo[corpora]`") from err


def split_rows(corpus: MultiwayCorpus, heldout: bool) -> list[dict[str, str]]:
    """The rows of the training split (``heldout=False``) or of the held-out split."""
    return [row for key, row in zip(corpus.keys, corpus.rows) if is_heldout(key) == heldout]


def aligned(rows: Sequence[dict[str, str]], src: str, tgt: str) -> list[tuple[str, str]]:
    """Distinct (src, tgt) pairs from rows holding both languages."""
    return list(dict.fromkeys((row[src], row[tgt]) for row in rows if src in row and tgt in row))


# --- data sources ----------------------------------------------------------------------------------

def _catalog_rows(packages: Sequence[str], split: str) -> list[dict[str, str]]:
    return split_rows(embedded_corpus(tuple(packages)), heldout=split == "heldout")


def _check_langs(langs: Sequence[str], rows: Sequence[Mapping[str, str]], where: str) -> None:
    present = {lang for row in rows for lang in row}
    missing = [lang for lang in langs if lang not in present]
    if missing:
        raise ConfigError(f"{where}.langs: {missing} not in the catalogs (languages: {', '.join(sorted(present))})")


@register_source
@dataclass
class CatalogText(CorpusSource):
    """``{kind: catalog_text, langs: [en, de], packages: [gramps], split: train}``: the distinct
    messages of each language in the embedded catalogs (this module),
    training or held-out split; one corpus per language, sampled in proportion to their size."""

    kind: ClassVar[str] = "catalog_text"
    provides: ClassVar[str] = "sentence"
    langs: list[str]
    packages: list[str] = field(default_factory=lambda: ["gramps"])
    split: Split = "train"

    def read(self) -> list:
        rows = _catalog_rows(self.packages, self.split)
        _check_langs(self.langs, rows, self.where)
        source = ("+".join(self.packages) + " catalogs",)
        corpora = []
        for lang in self.langs:
            sentences = list(dict.fromkeys(row[lang] for row in rows if lang in row))
            corpora.append(MonolingualCorpus(lang, sentences, ReadReport(source, len(sentences), len(sentences))))
        return corpora


@register_source
@dataclass
class CatalogPairs(CorpusSource):
    """``{kind: catalog_pairs, langs: [en, de, fr], pivot: en}``: pivot↔X translation pairs of
    the embedded catalogs, one corpus per language besides the pivot."""

    kind: ClassVar[str] = "catalog_pairs"
    provides: ClassVar[str] = "pair"
    langs: list[str]
    pivot: str = "en"
    packages: list[str] = field(default_factory=lambda: ["gramps"])
    split: Split = "train"

    def read(self) -> list:
        rows = _catalog_rows(self.packages, self.split)
        _check_langs([self.pivot, *self.langs], rows, self.where)
        source = ("+".join(self.packages) + " catalogs",)
        corpora = []
        for lang in (x for x in self.langs if x != self.pivot):
            got = aligned(rows, self.pivot, lang)
            corpora.append(ParallelCorpus(self.pivot, lang, got, ReadReport(source, len(got), len(got))))
        return corpora


@register_source
@dataclass
class CatalogDocuments(DocumentSource):
    """``{kind: catalog_documents, langs: [de, fr], packages: [django]}``: documents from the
    ``.po`` catalogs of installed packages: the messages of one program source file (the first
    ``#:`` reference of each), in file order, cut into pieces of ``max_sentences``; messages of
    the held-out split (:func:`is_heldout`) are left out unless
    ``split: heldout``; fuzzy, obsolete and untranslated ones always."""

    kind: ClassVar[str] = "catalog_documents"
    langs: list[str]
    packages: list[str] = field(default_factory=lambda: ["django"])
    split: Split = "train"
    max_sentences: int = 8

    def describe(self) -> str:
        return "+".join(self.packages) + " .po catalogs"

    def read_documents(self) -> dict[str, list[list]]:
        out: dict[str, list[list]] = {}
        for path in catalog_files(self.packages, prefer="po"):
            lang = normalize_locale(locale_of(path))
            if lang not in self.langs or path.suffix != ".po":
                continue
            groups: dict[str, list] = {}
            for entry in read_po(path).entries:
                text = entry.strings[0] if entry.strings else ""
                if entry.fuzzy or entry.obsolete or not text.strip():
                    continue
                if is_heldout(entry.msgid) != (self.split == "heldout"):
                    continue
                english, translated = clean_message(entry.msgid), clean_message(text)
                if english and translated:
                    item = (english, translated) if self.provides == "parallel_document" else translated
                    groups.setdefault(entry.source_file or str(path), []).append(item)
            out.setdefault(lang, []).extend(groups.values())
        missing = [lang for lang in self.langs if lang not in out]
        if missing:
            raise ConfigError(f"{self.where}.langs: no .po catalogs of {missing} in {self.packages}")
        return out


@register_source
@dataclass
class CatalogParallelDocuments(CatalogDocuments):
    """``{kind: catalog_parallel_documents, langs: [de, fr]}``: the documents of
    ``catalog_documents`` with each message's English original beside it (English↔X)."""

    kind: ClassVar[str] = "catalog_parallel_documents"
    provides: ClassVar[str] = "parallel_document"


# --- the task that tests on the held-out part ----------------------------------------------------

EMBEDDED_LANGS = ("de", "fr", "es", "ru", "uk", "zh-CN", "ja", "ar")


@TASKS.register
def gettext_retrieval(encoder, context: TaskContext) -> list[Result]:
    """Held-out, human-translated application strings from the Gramps catalogs (embedded:
    installed with the package), English↔X accuracy@1 on the messages that
    :func:`is_heldout` reserves (never trained on)."""
    corpus = embedded_corpus(EMBEDDED_PACKAGES)
    langs = [lang for lang in (context.languages or EMBEDDED_LANGS) if lang in corpus.languages]
    if not langs:
        raise TaskSkipped(f"none of {list(context.languages or EMBEDDED_LANGS)} in the embedded catalogs")
    heldout = split_rows(corpus, heldout=True)
    return per_language(langs, lambda lang: bitext_results(
        "gettext_retrieval", encoder, aligned(heldout, "en", lang), "en", lang,
        {"split": "heldout-10%", "source": "+".join(EMBEDDED_PACKAGES)}, context.limit))
