"""Tokenised corpora cached as memory-mapped arrays, and the epoch order over a mixture of them.

A corpus is tokenised once. Its ids go into one flat ``int32`` array per field (``text`` for a
monolingual corpus; ``src`` and ``tgt`` for a parallel one) with ``int64`` offsets, so sentence
*i* is ``tokens[offsets[i]:offsets[i + 1]]``. The arrays live in
``CACHE/tokens/KEY/`` where KEY hashes the source (file bytes, or the sentences of an in-memory
corpus), the read options and the tokenizer's identity; later constructions, later epochs and
every DataLoader worker memory-map them and never call the tokenizer. An entry is written into a
temporary folder and renamed into place, so concurrent builders (one per DDP rank) are safe and
an interrupted build is never read.

:class:`EpochOrder` decides each epoch's order: a permutation of everything, or a draw over
corpora with ``q ∝ p^α`` (:mod:`babelzoo.datasets.sampling`). The trainer's data stream turns
that order into batches, one per (step, slot), and shards them across ranks and workers.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import shutil
import uuid
from array import array
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence

import numpy as np
from torch.utils.data import Dataset

from .._files import read_json_object
from ..errors import BabelzooError, ConfigError, InputTypeError
from .download import cache_dir as default_cache_dir
from .download import sha256_of
from .sampling import cyclic_take, sampling_probabilities
from .text import CorpusError, EmptyPolicy, MonolingualCorpus, ParallelCorpus, ReadReport, iter_sentences
from .tokenizer import TokenizerError

FORMAT_VERSION = 1
ENCODE_CHUNK = 2048  # sentences per batch_encode call while building a cache
INT32_MAX = np.iinfo(np.int32).max


class TextExample(NamedTuple):
    """One tokenised sentence (no special tokens added) and its language."""

    ids: list[int]
    lang: str


class PairExample(NamedTuple):
    """One tokenised translation pair (no special tokens added) and its languages."""

    src: list[int]
    tgt: list[int]
    src_lang: str
    tgt_lang: str


def tokenizer_fingerprint(tokenizer: Any, fingerprint: Optional[str] = None) -> str:
    """The tokenizer's identity for cache keys: ``fingerprint`` if given, else the tokenizer's
    ``fingerprint`` attribute (a string, or a method returning one). Two tokenizers that may
    encode any text differently must have different identities."""
    identity = fingerprint if fingerprint is not None else getattr(tokenizer, "fingerprint", None)
    if callable(identity):
        identity = identity()
    if not isinstance(identity, str) or not identity:
        raise TokenizerError(f"{type(tokenizer).__name__} has no string 'fingerprint'; pass fingerprint= "
                             "(e.g. a hash of its model file) so cached token ids can be told apart")
    return identity


def _key(**parts: Any) -> str:
    text = json.dumps({"format": FORMAT_VERSION, **parts}, sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _content_digest(columns: Sequence[Iterable[str]]) -> str:
    digest = hashlib.sha256()
    for column in columns:
        digest.update(b"\x00column")
        for text in column:
            data = text.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little"))  # length-prefixed: no separator ambiguity
            digest.update(data)
    return digest.hexdigest()


class _FieldWriter:
    """Appends token-id lists to ``NAME.tokens.bin`` (int32) and collects offsets (int64)."""

    FLUSH = 1 << 20

    def __init__(self, folder: Path, name: str):
        self.name = name
        self.handle = open(folder / f"{name}.tokens.bin", "wb")
        self.folder = folder
        self.offsets = array("q", [0])
        self.pending: list[int] = []

    def add(self, ids: Sequence[int], where: str) -> None:
        ids = list(ids)
        if ids and (min(ids) < 0 or max(ids) > INT32_MAX):
            bad = min(ids) if min(ids) < 0 else max(ids)
            raise TokenizerError(f"{where}: tokenizer returned id {bad}, outside 0..{INT32_MAX}")
        self.pending.extend(ids)
        self.offsets.append(self.offsets[-1] + len(ids))
        if len(self.pending) >= self.FLUSH:
            self.flush()

    def flush(self) -> None:
        self.handle.write(np.asarray(self.pending, dtype=np.int32).tobytes())
        self.pending = []

    def close(self) -> dict[str, int]:
        self.flush()
        self.handle.close()
        np.asarray(self.offsets, dtype=np.int64).tofile(self.folder / f"{self.name}.offsets.bin")
        return {"sentences": len(self.offsets) - 1, "tokens": int(self.offsets[-1])}


class TokenCacheError(BabelzooError, RuntimeError):
    """A token cache folder that is damaged or is not one; the message says to delete it."""


def _open_array(path: Path, dtype: Any, length: int) -> np.ndarray:
    expected = length * np.dtype(dtype).itemsize
    if not path.is_file() or path.stat().st_size != expected:
        found = path.stat().st_size if path.is_file() else "missing"
        raise TokenCacheError(f"token cache {path.parent} is corrupt: {path.name} should have {expected} bytes, "
                           f"has {found}; delete the folder to rebuild it")
    if length == 0:  # mmap cannot map an empty file
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", shape=(length,))


class TokenizedCorpus(Dataset):
    """A tokenised monolingual or parallel corpus backed by memory-mapped arrays.

    Build with :meth:`from_corpus` (any :class:`MonolingualCorpus`/:class:`ParallelCorpus`) or
    :meth:`from_text_files` (streams large monolingual files). Items are :class:`TextExample` or
    :class:`PairExample`. ``cache_hit`` tells whether the arrays were already there; ``report``
    is the :class:`ReadReport` of the original read, kept with the cache.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
            raise TokenCacheError(f"{self.folder} is not a token cache (no meta.json)")
        self.meta = read_json_object(meta_path, TokenCacheError)
        self.langs: dict[str, str] = self.meta["langs"]
        self.fields: list[str] = list(self.meta["fields"])
        self.report = ReadReport(**{**self.meta["report"], "files": tuple(self.meta["report"]["files"])})
        self.cache_hit = True
        self._arrays: Optional[dict[str, tuple[np.ndarray, np.ndarray]]] = None
        self._length = int(self.meta["fields"][self.fields[0]]["sentences"])
        self.arrays()  # validate sizes now, not in a worker

    def __getstate__(self) -> dict:  # workers re-open the memory maps instead of copying them
        return {**self.__dict__, "_arrays": None}

    def arrays(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{field: (tokens, offsets)}`` as read-only memory maps."""
        if self._arrays is None:
            self._arrays = {}
            for name, sizes in self.meta["fields"].items():
                offsets = _open_array(self.folder / f"{name}.offsets.bin", np.int64, sizes["sentences"] + 1)
                tokens = _open_array(self.folder / f"{name}.tokens.bin", np.int32, sizes["tokens"])
                self._arrays[name] = (tokens, offsets)
        return self._arrays

    @property
    def fingerprint(self) -> str:
        """The cache key: changes with the text, its languages, the read report or the tokenizer."""
        return self.folder.name

    @property
    def is_parallel(self) -> bool:
        return self.fields == ["src", "tgt"]

    def __len__(self) -> int:
        return self._length

    def ids(self, index: int, name: Optional[str] = None) -> list[int]:
        tokens, offsets = self.arrays()[name or self.fields[0]]
        return tokens[offsets[index]:offsets[index + 1]].tolist()

    def lengths(self, name: Optional[str] = None) -> np.ndarray:
        """Token count of every sentence in a field (for length bucketing or token budgets)."""
        return np.diff(self.arrays()[name or self.fields[0]][1])

    def __getitem__(self, index: int) -> TextExample | PairExample:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} out of range for a corpus of {len(self)} sentences")
        index %= len(self)
        if self.is_parallel:
            return PairExample(self.ids(index, "src"), self.ids(index, "tgt"), self.langs["src"], self.langs["tgt"])
        return TextExample(self.ids(index, "text"), self.langs["text"])

    @classmethod
    def from_corpus(cls, corpus: MonolingualCorpus | ParallelCorpus, tokenizer: Any, *,
                    cache_dir: str | Path | None = None, fingerprint: Optional[str] = None,
                    encode_lang: bool = True) -> "TokenizedCorpus":
        """Tokenise an in-memory corpus (from any reader, e.g. :func:`~babelzoo.datasets.text.
        read_parallel`), or map its cached arrays if this exact text was already tokenised by the
        same tokenizer: the key hashes the sentences themselves, their languages, the read report
        and the tokenizer's identity. ``encode_lang=False`` calls ``tokenizer.encode(text,
        lang=None)``, for tokenizers that know no languages (the examples keep their language)."""
        if isinstance(corpus, ParallelCorpus):
            langs = {"src": corpus.src_lang, "tgt": corpus.tgt_lang}
            columns = {"src": corpus.sources, "tgt": corpus.targets}
        elif isinstance(corpus, MonolingualCorpus):
            langs, columns = {"text": corpus.lang}, {"text": corpus.sentences}
        else:
            raise InputTypeError(f"expected a MonolingualCorpus or ParallelCorpus, got {type(corpus).__name__}")
        identity = tokenizer_fingerprint(tokenizer, fingerprint)
        report = {k: v for k, v in asdict(corpus.report).items() if k != "files"}  # kept with the arrays
        key = _key(source="corpus", content=_content_digest(list(columns.values())), langs=langs, report=report,
                   tokenizer=identity, encode_lang=encode_lang)
        return _build(cache_dir, key, langs, tokenizer, lambda: (zip(*columns.values()), corpus.report), encode_lang)

    @classmethod
    def from_text_files(cls, paths: str | Path | Sequence[str | Path], lang: str, tokenizer: Any, *,
                        empty: EmptyPolicy = "skip", cache_dir: str | Path | None = None,
                        fingerprint: Optional[str] = None, encode_lang: bool = True) -> "TokenizedCorpus":
        """Tokenise monolingual files (one sentence per line, plain or gzip), streaming them; the
        key hashes the files' bytes, so a cache hit reads no text at all. Options as
        :meth:`from_corpus`; ``empty`` as :func:`~babelzoo.datasets.text.read_monolingual`."""
        files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        for path in files:
            if not path.is_file():
                raise FileNotFoundError(f"{path}: no such file")
        identity = tokenizer_fingerprint(tokenizer, fingerprint)
        key = _key(source="files", files=[sha256_of(p) for p in files], empty=empty, langs={"text": lang},
                   tokenizer=identity, encode_lang=encode_lang)

        def rows() -> tuple[Iterable[tuple[str]], ReadReport]:
            report = ReadReport(files=tuple(str(f) for f in files))
            return ((text,) for text in iter_sentences(files, empty, report)), report

        return _build(cache_dir, key, {"text": lang}, tokenizer, rows, encode_lang)


def _build(cache_dir: str | Path | None, key: str, langs: dict[str, str], tokenizer: Any,
           rows: Any, encode_lang: bool) -> TokenizedCorpus:
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "tokens"
    final = root / key
    if (final / "meta.json").is_file():
        return TokenizedCorpus(final)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir()
    writers: list[_FieldWriter] = []
    try:
        names = list(langs)
        writers = [_FieldWriter(tmp, name) for name in names]
        records, report = rows()
        index = 0
        for chunk in _chunks(records, ENCODE_CHUNK):
            for column, (writer, name) in enumerate(zip(writers, names)):
                texts = [record[column] for record in chunk]
                lang = langs[name] if encode_lang else None
                encoded = _encode_all(tokenizer, texts, lang)
                for offset, ids in enumerate(encoded):
                    writer.add(ids, f"{langs[name]} sentence {index + offset} ({name})")
            index += len(chunk)
        fields = {w.name: w.close() for w in writers}
        meta = {"format": FORMAT_VERSION, "key": key, "langs": langs, "fields": fields, "report": asdict(report)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
        try:
            os.rename(tmp, final)
        except OSError:  # another process published the same entry first: use theirs
            if not (final / "meta.json").is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        for writer in writers:
            writer.handle.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    corpus = TokenizedCorpus(final)
    corpus.cache_hit = False
    return corpus


def _encode_all(tokenizer: Any, texts: list[str], lang: Optional[str]) -> list[list[int]]:
    """Token ids of ``texts`` without special tokens: one batch call for a babelzoo
    :class:`~babelzoo.datasets.tokenizer.Tokenizer`, else ``encode`` per text."""
    if hasattr(tokenizer, "batch_encode"):
        return tokenizer.batch_encode(texts, langs=None if lang is None else [lang] * len(texts), padding=False, truncation=False,
                                      add_special_tokens=False, return_tensors=None)["input_ids"]
    return [tokenizer.encode(text, lang=lang, add_special_tokens=False) for text in texts]


def _chunks(records: Iterable[Any], size: int) -> Iterable[list]:
    chunk: list = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class CorpusMixture(Dataset):
    """Several tokenised corpora (e.g. one per language or language pair) as one map-style
    dataset; global index ``offsets[k] + i`` is item *i* of corpus *k*. ``sizes`` feeds
    :class:`EpochOrder` for α-sampling over the corpora."""

    def __init__(self, corpora: Mapping[Any, Dataset]):
        if not corpora:
            raise CorpusError("CorpusMixture needs at least one corpus")
        self.keys = list(corpora)
        self.corpora = [corpora[k] for k in self.keys]
        self.sizes = {k: len(c) for k, c in zip(self.keys, self.corpora)}  # type: ignore[arg-type]
        self.starts = np.cumsum([0] + list(self.sizes.values())).tolist()

    def __len__(self) -> int:
        return self.starts[-1]

    def _find(self, index: int) -> tuple[int, int]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for a mixture of {len(self)} items")
        k = bisect.bisect_right(self.starts, index) - 1
        return k, index - self.starts[k]

    def locate(self, index: int) -> tuple[Any, int]:
        """``(corpus key, index within that corpus)`` of a global index."""
        k, local = self._find(int(index))
        return self.keys[k], local

    def __getitem__(self, index: int) -> Any:
        k, local = self._find(int(index))
        return self.corpora[k][local]


class EpochOrder:
    """Each epoch's order of ``num_samples`` dataset indices over one or more corpora, a pure
    function of ``(seed, epoch)`` (the trainer's :class:`~babelzoo.train.data.DataStream` reads
    it and shards it across ranks and workers itself):

    * ``alpha=None``: a random permutation of every index (in order with ``shuffle=False``);
      ``num_samples`` other than the total cycles through fresh permutations;
    * ``alpha=a``: each position picks a corpus with ``q ∝ p^a`` (Lample & Conneau 2019) and
      the next item of that corpus's stream of fresh permutations, so no sentence repeats within
      a corpus before all of it has been seen (``shuffle`` does not apply). With
      ``group_size=g`` one corpus is drawn per run of *g* positions: set *g* to the global batch
      size and every step's batch holds one language, as XLM's per-language batches do.

    ``sizes``: a corpus length, a list of lengths, or a ``{key: length}`` mapping (e.g.
    :attr:`CorpusMixture.sizes`), in the dataset's order.
    """

    def __init__(self, sizes: int | Sequence[int] | Mapping[Any, int], *, alpha: Optional[float] = None,
                 num_samples: Optional[int] = None, group_size: int = 1, shuffle: bool = True, seed: int = 0):
        if isinstance(sizes, int):
            sizes = [sizes]
        self.sizes = dict(sizes) if isinstance(sizes, Mapping) else dict(enumerate(sizes))
        self.total = int(sum(self.sizes.values()))
        self.alpha, self.shuffle, self.seed = alpha, shuffle, seed
        if group_size < 1:
            raise ConfigError(f"group_size={group_size}: expected >= 1")
        self.group_size = int(group_size)
        self.num_samples = self.total if num_samples is None else int(num_samples)
        if self.num_samples < 0 or (self.num_samples and not self.total):
            raise CorpusError(f"cannot draw {self.num_samples} samples from corpora of sizes {self.sizes}")
        self.probabilities = sampling_probabilities(self.sizes, alpha) if alpha is not None else None

    def epoch_order(self, epoch: int = 0) -> np.ndarray:
        """The epoch's order of dataset indices."""
        rng = np.random.default_rng([self.seed, epoch])
        if self.probabilities is None:
            if not self.shuffle:
                return np.arange(self.num_samples, dtype=np.int64) % max(self.total, 1)
            return cyclic_take(rng, self.total, self.num_samples)
        q = np.array(list(self.probabilities.values()))
        groups = -(-self.num_samples // self.group_size)
        corpus_of = np.repeat(rng.choice(len(q), size=groups, p=q), self.group_size)[:self.num_samples]
        order = np.empty(self.num_samples, dtype=np.int64)
        start = 0
        for k, size in enumerate(self.sizes.values()):
            where = np.flatnonzero(corpus_of == k)
            order[where] = start + cyclic_take(rng, size, len(where))
            start += size
        return order
