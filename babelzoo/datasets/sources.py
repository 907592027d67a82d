"""Data sources: what a recipe's ``data:`` entries name, as registered components.

A source is a typed dataclass whose fields are its YAML keys (checked by :func:`babelzoo.typed.build`),
with a ``kind`` (its registry name) and the one *example type* it ``provides``. Objectives declare
the example type they consume (``Objective.consumes``), so a recipe that gives an objective the
wrong kind of data is refused before anything is read::

    data:
      sop:
        - {kind: text, path: de.txt, lang: de}
    # ConfigError: objective 'sop' consumes 'document' examples (consecutive sentences of one
    # document); data.sop[0] (kind 'text') provides 'sentence' ... sources that provide 'document': ...

A source gives the raw text a recipe's tokenizer is trained on (:meth:`DataSource.texts`) and,
once the tokenizer and the model exist, a dataset of its examples (:meth:`DataSource.dataset`).
Sources of the layers above this one (knowledge bases, the offline sources) are found through
the ``babelzoo.data_sources`` entry-point group, as an installed package's are (babelzoo's own
are declared in its ``setup.py``); a source in another module of this layer is a built-in entry
point of :data:`SOURCES`. Each registers with :func:`register_source`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Mapping, Optional, Sequence, Union

import numpy as np
from torch.utils.data import Dataset

from .._files import expand_path
from ..errors import ConfigError
from ..registry import Registry, RegistryError
from ..typed import Where, build
from .labelled import read_conllu
from .loader import CorpusMixture, TokenizedCorpus
from .multimodal import MultimodalDataset
from .multimodal_manifest import read_manifest
from .text import (MonolingualCorpus, ParallelCorpus, ReadReport, iter_lines, read_monolingual, read_parallel,
                   read_parallel_tsv)

EXAMPLE_TYPES: dict[str, str] = {
    "sentence": "one tokenised sentence and its language",
    "pair": "a tokenised translation pair and its languages",
    "document": "consecutive sentences of one document",
    "parallel_document": "consecutive sentences of one document, each with its translation",
    "entity_mentions": "a sentence with the token spans of its entity mentions",
    "entity_alignment": "token ids with the knowledge-base entity each token is aligned to",
    "sentence_tree": "a K-BERT sentence tree: a sentence with knowledge-base facts hung on its mentions",
    "media_text": "an image or an utterance with a text about it",
    "labelled_text": "a text (or text pair) with a class label",
    "labelled_tokens": "the words of a sentence, each with a tag",
}

ENTRY_POINT_GROUP = "babelzoo.data_sources"


@dataclass
class BuildContext:
    """What building a dataset may use: the run's tokenizer and its fingerprint, the token
    cache, the model being trained (its config sizes images and audio; knowledge sources align to
    its entities) and the run's seed."""

    tokenizer: Any
    fingerprint: str
    cache_dir: Path
    model: Any = None
    seed: int = 0


class DataSource(ABC):
    """Base class of a data source (subclasses are dataclasses of their options)."""

    kind: ClassVar[str] = ""
    provides: ClassVar[str] = ""
    # set by parse_source: where the source's spec was (for messages)
    where: ClassVar[str] = ""

    @abstractmethod
    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        """The source's raw sentences by language, for training the recipe's tokenizer (the
        context has no tokenizer and no model yet)."""

    @abstractmethod
    def dataset(self, context: BuildContext) -> Dataset:
        """A dataset of ``provides`` examples."""

    def load(self) -> list[str]:
        """Read what the source reads before the tokenizer exists; returns lines to report
        (what reading dropped). Sources that read nothing ahead return ``[]``."""
        return []

    def check_model(self, model: Any) -> None:
        """Raise ConfigError when ``model`` cannot take this source's examples (before step 0)."""

    def describe(self) -> str:
        return self.kind


class EmptySource(ConfigError):
    """A source with nothing to train on; ``reports`` says what reading dropped."""

    def __init__(self, message: str, reports: Sequence[str] = ()):
        super().__init__(message)
        self.reports = list(reports)


# the sources of this module register as it is defined; those of this layer's other modules are
# its built-in entry points; those of the layers above (knowledge bases, offline sources) and of
# installed packages register through the entry-point group; all found when first named
SOURCES: Registry[type[DataSource]] = Registry("data source", group=ENTRY_POINT_GROUP,
                                               builtin={"hf_dataset": "babelzoo.datasets.streaming"},
                                               listed_by="babelzoo list sources")


def register_source(cls: type[DataSource]) -> type[DataSource]:
    """Class decorator: register a source under ``cls.kind``; ``cls.provides`` must be an
    example type of :data:`EXAMPLE_TYPES`."""
    if not cls.kind or cls.provides not in EXAMPLE_TYPES:
        raise ConfigError(f"{cls.__name__}: a data source needs a kind and provides one of "
                          f"{', '.join(EXAMPLE_TYPES)} (got kind={cls.kind!r}, provides={cls.provides!r})")
    SOURCES.register(cls, name=cls.kind)
    return cls


def source_class(kind: str) -> type[DataSource]:
    """The registered source ``kind`` (built-in and installed plug-in sources imported on demand)."""
    return SOURCES.get(kind)


def source_kinds() -> list[str]:
    """Every source kind: those of the layers above and installed plug-ins included."""
    return SOURCES.list()


def parse_source(spec: Any, where: Where) -> DataSource:
    """A source from its recipe mapping ``{kind: K, **options}``; errors name ``where``."""
    if not isinstance(spec, Mapping) or "kind" not in spec:
        raise ConfigError(f"{where}: a source is a mapping with kind: one of {', '.join(source_kinds())}; "
                          f"got {spec!r}")
    try:
        cls = source_class(str(spec["kind"]))
    except RegistryError as err:
        raise ConfigError(f"{where.key('kind')}: {err}") from None
    source = build(cls, {k: v for k, v in spec.items() if k != "kind"}, where, what=f"source kind {cls.kind!r}")
    source.where = str(where)
    return source


def check_consumes(objective: str, consumes: str, source: DataSource) -> None:
    """Refuse a source whose examples are not those the objective consumes."""
    if source.provides == consumes:
        return
    fitting = [k for k in source_kinds() if SOURCES.get(k).provides == consumes]
    raise ConfigError(f"{source.where}: objective {objective!r} consumes {consumes!r} examples "
                      f"({EXAMPLE_TYPES.get(consumes, consumes)}); source kind {source.kind!r} provides "
                      f"{source.provides!r} ({EXAMPLE_TYPES[source.provides]}). Sources that provide {consumes!r}: "
                      f"{', '.join(fitting) or 'none registered'}")


# --- shared helpers -----------------------------------------------------------------------------

def tokenized(corpus, context: BuildContext):
    # a tokenizer that knows no languages (WordPiece, e5's unigram) encodes without them; the
    # examples keep their language either way
    encode_lang = bool(getattr(context.tokenizer, "languages", ()))
    return TokenizedCorpus.from_corpus(corpus, context.tokenizer, cache_dir=context.cache_dir,
                                       fingerprint=context.fingerprint, encode_lang=encode_lang)


def _one_or_mixture(parts: list) -> Dataset:
    return parts[0] if len(parts) == 1 else CorpusMixture(dict(enumerate(parts)))


def with_prefix(corpus, prefix: str):
    """``corpus`` (monolingual or parallel) with ``prefix`` before each of its sentences."""
    if isinstance(corpus, MonolingualCorpus):
        return dataclasses.replace(corpus, sentences=[prefix + s for s in corpus.sentences])
    return dataclasses.replace(corpus, pairs=[(prefix + a, prefix + b) for a, b in corpus.pairs])


def texts_of(corpora: Sequence[Any]) -> dict[str, list[str]]:
    by_lang: dict[str, list[str]] = {}
    for corpus in corpora:
        if isinstance(corpus, ParallelCorpus):
            by_lang.setdefault(corpus.src_lang, []).extend(corpus.sources)
            by_lang.setdefault(corpus.tgt_lang, []).extend(corpus.targets)
        else:
            by_lang.setdefault(corpus.lang, []).extend(corpus.sentences)
    return by_lang


@dataclass
class CorpusSource(DataSource):
    """A source read into Monolingual/ParallelCorpus objects once, then tokenised and cached.

    ``prefix`` (every corpus source takes it): text put before every sentence, both sides of a
    pair included, for a model that expects its inputs framed (multilingual-e5's
    ``"query: "``), so that training sees what inference will."""

    prefix: str = field(default="", kw_only=True)

    def corpora(self) -> list:
        if getattr(self, "_corpora", None) is None:
            self._corpora = [with_prefix(c, self.prefix) for c in self.read()] if self.prefix else self.read()
        return self._corpora

    def load(self) -> list[str]:
        reports = [f"{self.where} ({', '.join(c.report.files)}): {c.report}" for c in self.corpora()
                   if c.report.skipped]
        for corpus in self.corpora():
            if not len(corpus):
                raise EmptySource(f"{self.where} ({', '.join(corpus.report.files)}): no sentences to train on "
                                  f"({corpus.report})", reports)
        return reports

    @abstractmethod
    def read(self) -> list:
        """The source's corpora."""

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        return texts_of(self.corpora())

    def dataset(self, context: BuildContext) -> Dataset:
        return _one_or_mixture([tokenized(c, context) for c in self.corpora()])



# --- files ----------------------------------------------------------------------------------------

Empty = Literal["skip", "error", "keep"]
Split = Literal["train", "heldout"]  # of a corpus with a fixed held-out part


@register_source
@dataclass
class TextSource(CorpusSource):
    """``{kind: text, path: P or [P, ...], lang: de}``: one sentence per line (plain or gzip)."""

    kind: ClassVar[str] = "text"
    provides: ClassVar[str] = "sentence"
    path: Union[str, list[str]]
    lang: str
    empty: Empty = "skip"

    def read(self) -> list:
        paths = [self.path] if isinstance(self.path, str) else self.path
        return [read_monolingual([expand_path(p, f"{self.where}.path") for p in paths], self.lang, empty=self.empty)]


@register_source
@dataclass
class ParallelSource(CorpusSource):
    """``{kind: parallel, src: P, tgt: P, src_lang: en, tgt_lang: de}``: line-aligned files."""

    kind: ClassVar[str] = "parallel"
    provides: ClassVar[str] = "pair"
    src: str
    tgt: str
    src_lang: str
    tgt_lang: str
    empty: Empty = "skip"

    def read(self) -> list:
        return [read_parallel(expand_path(self.src, f"{self.where}.src"), expand_path(self.tgt, f"{self.where}.tgt"),
                              self.src_lang, self.tgt_lang, empty=self.empty)]


@register_source
@dataclass
class TsvSource(CorpusSource):
    """``{kind: tsv, path: P, src_lang: en, tgt_lang: de, src_column: 0, tgt_column: 1}``."""

    kind: ClassVar[str] = "tsv"
    provides: ClassVar[str] = "pair"
    path: str
    src_lang: Optional[str] = None
    tgt_lang: Optional[str] = None
    src_column: Union[int, str] = 0
    tgt_column: Union[int, str] = 1
    header: Optional[bool] = None
    num_fields: Optional[int] = None
    empty: Empty = "skip"

    def read(self) -> list:
        return [read_parallel_tsv(expand_path(self.path, f"{self.where}.path"), self.src_lang, self.tgt_lang,
                                  src_column=self.src_column, tgt_column=self.tgt_column, header=self.header,
                                  num_fields=self.num_fields, empty=self.empty)]


# --- documents ------------------------------------------------------------------------------------

class TokenizedDocuments(Dataset):
    """Documents over a tokenised corpus: document *i* is sentences ``starts[i]:starts[i + 1]``
    (``TextExample`` items, or ``PairExample`` items of a parallel corpus)."""

    def __init__(self, corpus, starts: Sequence[int]):
        self.corpus, self.starts = corpus, np.asarray([*starts, len(corpus)], dtype=np.int64)
        digest = hashlib.sha256(self.starts.tobytes()).hexdigest()[:16]
        self.fingerprint = f"{corpus.fingerprint}-documents-{digest}"

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, index: int) -> list:
        if not 0 <= index < len(self):
            raise IndexError(f"document {index} out of range ({len(self)} documents)")
        return [self.corpus[i] for i in range(int(self.starts[index]), int(self.starts[index + 1]))]


def chunk_documents(documents: Sequence[Sequence[Any]], max_sentences: int, min_sentences: int) -> list[list[Any]]:
    """Documents cut into pieces of at most ``max_sentences`` consecutive sentences; pieces
    shorter than ``min_sentences`` (a document's last piece, a one-sentence document) are kept by
    joining them to the piece before, or left out when the document itself is shorter."""
    out = []
    for document in documents:
        pieces = [list(document[i:i + max_sentences]) for i in range(0, len(document), max_sentences)]
        if len(pieces) > 1 and len(pieces[-1]) < min_sentences:
            pieces[-2].extend(pieces.pop())
        out.extend(p for p in pieces if len(p) >= min_sentences)
    return out


class DocumentSource(DataSource):
    """Documents by language, each a list of sentences, or of ``(pivot, translation)`` pairs
    for a ``parallel_document`` source; tokenised as one flat corpus per language."""

    provides: ClassVar[str] = "document"
    pivot: ClassVar[str] = "en"

    @abstractmethod
    def read_documents(self) -> dict[str, list[list]]:
        """``{lang: documents}`` before cutting."""

    def documents(self) -> dict[str, list[list]]:
        if getattr(self, "_documents", None) is None:
            self._documents = {lang: chunk_documents(docs, self.max_sentences, 2)
                               for lang, docs in self.read_documents().items()}
            self._documents = {lang: docs for lang, docs in self._documents.items() if docs}
            if not self._documents:
                raise ConfigError(f"{self.where}: no document with at least two sentences")
        return self._documents

    def _corpus(self, lang: str, sentences: list):
        report = ReadReport((self.describe(),), len(sentences), len(sentences))
        if self.provides == "parallel_document":
            return ParallelCorpus(self.pivot, lang, sentences, report)
        return MonolingualCorpus(lang, sentences, report)

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        return texts_of([self._corpus(lang, [s for d in docs for s in d]) for lang, docs in self.documents().items()])

    def dataset(self, context: BuildContext) -> Dataset:
        parts = []
        for lang, docs in self.documents().items():
            corpus = tokenized(self._corpus(lang, [s for d in docs for s in d]), context)
            parts.append(TokenizedDocuments(corpus, np.cumsum([0] + [len(d) for d in docs[:-1]]).tolist()))
        return _one_or_mixture(parts)


@register_source
@dataclass
class DocumentsSource(DocumentSource):
    """``{kind: documents, path: P, lang: en, format: blank_line | conllu}``.

    ``blank_line``: one sentence per line, documents separated by an empty line (BERT's
    pre-training format). ``conllu``: a CoNLL-U file; a document starts at ``# newdoc`` (the
    whole file is one document without them), and a sentence is its ``# text`` (else its words
    joined by spaces). Documents longer than ``max_sentences`` are cut into pieces."""

    kind: ClassVar[str] = "documents"
    path: Union[str, list[str]]
    lang: str
    format: Literal["blank_line", "conllu"] = "blank_line"
    max_sentences: int = 16

    def describe(self) -> str:
        return ", ".join([self.path] if isinstance(self.path, str) else self.path)

    def read_documents(self) -> dict[str, list[list]]:
        paths = [self.path] if isinstance(self.path, str) else self.path
        documents: list[list[str]] = []
        for raw in paths:
            path = Path(expand_path(raw, f"{self.where}.path"))
            if not path.is_file():
                raise ConfigError(f"{self.where}.path: {path}: no such file")
            if self.format == "conllu":
                documents.extend(_conllu_documents(path))
                continue
            current: list[str] = []
            for _, text in iter_lines(path):
                if text:
                    current.append(text)
                elif current:
                    documents.append(current)
                    current = []
            if current:
                documents.append(current)
        return {self.lang: documents}


def _conllu_documents(path: Path) -> list[list[str]]:
    documents: list[list[str]] = []
    for sentence in read_conllu(path, tags=None):
        if sentence.newdoc or not documents:
            documents.append([])
        documents[-1].append(sentence.text or " ".join(sentence.words))
    return documents


# --- media ---------------------------------------------------------------------------------------

class MediaSource(DataSource):
    provides: ClassVar[str] = "media_text"
    modality: ClassVar[str] = "image"

    @abstractmethod
    def records(self, context: BuildContext) -> list:
        """The manifest records (rendering the media into the run's cache where the source makes them)."""

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        by_lang: dict[str, list[str]] = {}
        for record in self.records(context):
            by_lang.setdefault(record.lang or "und", []).append(record.text)
        return by_lang

    def check_model(self, model: Any) -> None:
        config = getattr(model, "config", None)
        needs = "audio" if self.modality == "audio" else "vision"
        if getattr(config, needs, None) is None:
            raise ConfigError(f"{self.where}: kind {self.kind!r} gives {self.modality} examples; model "
                              f"{getattr(config, 'architecture', type(model).__name__)!r} has no {needs} tower")

    def dataset(self, context: BuildContext) -> Dataset:
        tokenizer = context.tokenizer

        def encode(text: str, lang: Optional[str]) -> list[int]:
            return tokenizer.encode(text, lang if lang in tokenizer.languages else None, add_special_tokens=False)

        return MultimodalDataset.from_records(self.records(context), encode, context.model.config)


@register_source
@dataclass
class MediaManifest(MediaSource):
    """``{kind: media_manifest, path: manifest.jsonl, modality: image | audio}``: image–text or
    speech–text pairs listed in a manifest (:mod:`babelzoo.datasets.multimodal_manifest`)."""

    kind: ClassVar[str] = "media_manifest"
    path: str
    modality: Literal["image", "audio"] = "image"

    def records(self, context: BuildContext) -> list:
        if getattr(self, "_records", None) is None:
            records = read_manifest(expand_path(self.path, f"{self.where}.path"))
            wrong = [r for r in records if r.kind != self.modality]
            if wrong:
                raise ConfigError(f"{self.where}: modality {self.modality!r}, but {wrong[0].where} lists a "
                                  f"{wrong[0].kind} file")
            self._records = records
        return self._records
