"""Corpora read through Hugging Face ``datasets``, tokenised once into the cache or streamed.

``{kind: hf_dataset, path: text, data_files: big.txt, lang: de}`` names what
``datasets.load_dataset`` reads: a packaged builder (``text``, ``json``, ``csv``, ``parquet``)
with local ``data_files``, a dataset folder, or a Hub id found in the ``datasets`` cache
(``HF_DATASETS_OFFLINE=1`` keeps it offline). ``column`` holds the sentence; ``columns: [en, de]``
with ``src_lang``/``tgt_lang`` makes translation pairs instead.

With ``streaming: false`` the split is read whole and tokenised once into the token cache, like
every corpus source. With ``streaming: true`` (the default) nothing is read ahead: training asks
for each step's examples and :class:`StreamedCorpus` reads, shuffles (a seeded buffer of
``shuffle_buffer`` rows) and tokenises just those. Its position is a small state, saved with
every checkpoint: the ``datasets`` iterator's own (shard and offset within it), the buffer's rows
and the generator's state. Resuming reopens the stream at that offset (``datasets`` seeks to it
without handing back the rows before it, and nothing before it is tokenised again) and continues
with the same examples in the same order an uninterrupted run would have drawn. The run's
identity names every local file the stream reads, found as ``datasets`` finds them
(:meth:`HfDataset.identity`), so a resume after one was replaced, added or removed is refused.

Several streamed sources of one objective are drawn from with XLM's q ∝ p^α
(:class:`StreamedMixture`); their sizes come from the dataset's metadata or a source's ``size``.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional, Sequence, Union

import numpy as np

from ..errors import ConfigError, InputError, InputTypeError
from .hf_load import DataFiles, dataset_path, expand_data_files, file_identity, load_split, split_files
from .loader import PairExample, TextExample, tokenizer_fingerprint
from .sources import BuildContext, CorpusSource, register_source


@register_source
@dataclass
class HfDataset(CorpusSource):
    """``{kind: hf_dataset, path: P, name: N, data_files: F, split: train, column: text, lang: de,
    streaming: true}``, or ``columns: [src, tgt]`` with ``src_lang``/``tgt_lang`` for pairs (see
    the module's docstring)."""

    kind: ClassVar[str] = "hf_dataset"
    provides: ClassVar[str] = "sentence"  # "pair" for a source with columns
    path: str
    name: Optional[str] = None
    data_files: DataFiles = None
    split: str = "train"
    revision: Optional[str] = None
    column: str = "text"
    lang: Optional[str] = None
    columns: Optional[list[str]] = None
    src_lang: Optional[str] = None
    tgt_lang: Optional[str] = None
    streaming: bool = True
    shuffle_buffer: int = 10_000
    size: Optional[int] = None  # examples in the split, for α-sampling when the dataset does not say
    tokenizer_sentences: int = 100_000  # a streamed source's first sentences train a recipe's tokenizer

    def __post_init__(self) -> None:
        if self.columns is not None:
            if len(self.columns) != 2 or not (self.src_lang and self.tgt_lang) or self.lang:
                raise ConfigError(f"{self.where or 'hf_dataset'}: columns: [src, tgt] makes translation pairs and "
                                  f"needs src_lang and tgt_lang (not lang); got columns={self.columns!r}, "
                                  f"src_lang={self.src_lang!r}, tgt_lang={self.tgt_lang!r}")
            self.provides = "pair"
        elif not self.lang:
            raise ConfigError(f"{self.where or 'hf_dataset'}: lang: the language of column {self.column!r} "
                              "(or columns: [src, tgt] with src_lang and tgt_lang for pairs)")
        if self.shuffle_buffer < 1 or (self.size is not None and self.size < 1) or self.tokenizer_sentences < 1:
            raise ConfigError(f"{self.where or 'hf_dataset'}: shuffle_buffer, size and tokenizer_sentences must be "
                              "at least 1")

    # --- reading -------------------------------------------------------------------------------
    def describe(self) -> str:
        return f"{self.path}" + (f" ({self.name})" if self.name else "") + f", split {self.split}"

    def open(self, streaming: bool):
        """``datasets.load_dataset`` of this source (an IterableDataset when ``streaming``)."""
        return load_split(self._path(), self.name, self._files(), self.split, self.revision, streaming,
                          self.where or "hf_dataset", self.describe())

    def _path(self) -> str:
        return dataset_path(self.path, f"{self.where}.path")

    def _files(self) -> DataFiles:
        return expand_data_files(self.data_files, f"{self.where}.data_files")

    def row_text(self, row: Mapping[str, Any], index: int) -> Optional[Union[str, tuple[str, str]]]:
        """A row's sentence (or pair), None for an empty one; a row without the column is an
        error naming it."""
        names = self.columns or [self.column]
        missing = [c for c in names if c not in row]
        if missing:
            raise InputError(f"{self.where} ({self.describe()}): row {index} has no column {missing[0]!r} (its "
                             f"columns: {', '.join(row)})")
        values = [row[c] for c in names]
        empty = [c for c, v in zip(names, values) if v is None]  # a JSON row without the key
        if empty:
            raise InputError(f"{self.where} ({self.describe()}): row {index} has no value in column {empty[0]!r}")
        bad = [c for c, v in zip(names, values) if not isinstance(v, str)]
        if bad:
            raise InputError(f"{self.where} ({self.describe()}): row {index}, column {bad[0]!r} holds "
                             f"{type(row[bad[0]]).__name__}, not text")
        values = [self.prefix + v.strip() if v.strip() else "" for v in values]
        if not all(values):
            return None
        return (values[0], values[1]) if self.columns else values[0]

    def read(self) -> list:
        """The whole split as a corpus (``streaming: false``)."""
        from .text import MonolingualCorpus, ParallelCorpus, ReadReport

        rows, skipped = [], 0
        for index, row in enumerate(self.open(streaming=False)):
            text = self.row_text(row, index)
            if text is None:
                skipped += 1
            else:
                rows.append(text)
        report = ReadReport((self.describe(),), len(rows) + skipped, len(rows), skipped)
        if self.columns:
            return [ParallelCorpus(self.src_lang, self.tgt_lang, rows, report)]
        return [MonolingualCorpus(self.lang, rows, report)]

    def corpora(self) -> list:
        # read() adds the prefix itself (streamed rows take it one by one)
        if getattr(self, "_corpora", None) is None:
            self._corpora = self.read()
        return self._corpora

    def load(self) -> list[str]:
        return [] if self.streaming else super().load()

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        if not self.streaming:
            return super().texts(context)
        out: dict[str, list[str]] = {}
        for index, row in enumerate(self.open(streaming=True)):
            if index >= self.tokenizer_sentences:
                break
            text = self.row_text(row, index)
            if text is None:
                continue
            if self.columns:
                out.setdefault(self.src_lang, []).append(text[0])
                out.setdefault(self.tgt_lang, []).append(text[1])
            else:
                out.setdefault(self.lang, []).append(text)
        return out

    def dataset(self, context: BuildContext):
        if not self.streaming:
            return super().dataset(context)
        return StreamedCorpus(self, context.tokenizer, tokenizer_fingerprint(context.tokenizer, context.fingerprint),
                              context.seed)

    def known_size(self) -> Optional[int]:
        """The split's number of rows: ``size``, else the dataset's metadata, else None."""
        if self.size is not None:
            return self.size
        info = getattr(self.open(streaming=True), "info", None)
        split = (getattr(info, "splits", None) or {}).get(self.split)
        return getattr(split, "num_examples", None) or None

    def identity(self) -> dict[str, Any]:
        """What the stream's content depends on: the dataset's name and every local file it
        reads, found as ``datasets`` finds them (a folder's files, a glob's matches), each by
        :func:`~babelzoo.datasets.hf_load.file_identity` (its bytes are not all read: a corpus
        may be larger than the disk's cache). A file replaced, added or removed changes it."""
        files = split_files(self._path(), self.name, self._files(), self.split, self.revision,
                            self.where or "hf_dataset", self.describe())
        return {"path": self.path, "name": self.name, "split": self.split, "revision": self.revision,
                "columns": self.columns or [self.column], "prefix": self.prefix,
                "files": {f: file_identity(f) for f in files if os.path.isfile(f)}}


class StreamedCorpus:
    """The examples of a streamed :class:`HfDataset`, endless (epoch after epoch), in an order
    drawn from a seeded shuffle buffer, tokenised as they are taken. ``state_dict`` is its whole
    position; ``load_state_dict`` continues from it without reading the rows before it again."""

    streamed: ClassVar[bool] = True

    def __init__(self, source: HfDataset, tokenizer: Any, tokenizer_id: str, seed: int):
        self.source, self.tokenizer, self.seed = source, tokenizer, seed
        self.encode_lang = bool(getattr(tokenizer, "languages", ()))
        self.fingerprint = {"dataset": source.identity(), "tokenizer": tokenizer_id,
                            "shuffle_buffer": source.shuffle_buffer}
        self.epoch, self.rows_read, self.skipped = 0, 0, 0
        self.buffer: list = []
        self.rng = np.random.default_rng([seed, 0x5EED])
        self._dataset = self._iter = None

    def __len__(self) -> int:  # a stream has no length; DataStream asks streamed corpora for chunks instead
        raise InputTypeError("a streamed corpus has no length")

    def _open(self, state: Optional[dict] = None) -> None:
        # every epoch reads the rows in the dataset's order (the buffer shuffles them): no
        # set_epoch, whose epoch a resumed stream's state would not restore
        self._dataset = self.source.open(streaming=True)
        if state is not None:
            self._dataset.load_state_dict(state)
        self._iter = iter(self._dataset)

    def _next_row(self) -> Union[str, tuple[str, str]]:
        """The next non-empty row, a new epoch after the last one."""
        if self._iter is None:
            self._open()
        restarts = 0
        while True:
            try:
                row = next(self._iter)
            except StopIteration:
                if self.rows_read == 0 or restarts:
                    raise InputError(f"{self.source.where} ({self.source.describe()}): the split holds no "
                                     "non-empty row") from None
                self.epoch, restarts = self.epoch + 1, restarts + 1
                self._open()
                continue
            text = self.source.row_text(row, self.rows_read)
            self.rows_read += 1
            if text is None:
                self.skipped += 1
                continue
            return text

    def take_text(self, n: int) -> list:
        """The next ``n`` rows (sentences or pairs) in the shuffled order."""
        size = self.source.shuffle_buffer
        while len(self.buffer) < size:  # the first fill
            self.buffer.append(self._next_row())
        out = []
        for _ in range(n):
            j = int(self.rng.integers(len(self.buffer)))
            out.append(self.buffer[j])
            self.buffer[j] = self._next_row()
        return out

    def take(self, n: int) -> list:
        """The next ``n`` examples, tokenised."""
        from .loader import _encode_all

        rows = self.take_text(n)
        if self.source.columns:
            src_lang, tgt_lang = self.source.src_lang, self.source.tgt_lang
            src = _encode_all(self.tokenizer, [r[0] for r in rows], src_lang if self.encode_lang else None)
            tgt = _encode_all(self.tokenizer, [r[1] for r in rows], tgt_lang if self.encode_lang else None)
            return [PairExample(s, t, src_lang, tgt_lang) for s, t in zip(src, tgt)]
        lang = self.source.lang
        return [TextExample(ids, lang) for ids in _encode_all(self.tokenizer, rows, lang if self.encode_lang else None)]

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "rows_read": self.rows_read, "skipped": self.skipped,
                "stream": None if self._dataset is None else copy.deepcopy(self._dataset.state_dict()),
                "buffer": list(self.buffer),  # a shallow copy: rows are immutable (JSON writes a pair as a list)
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.epoch, self.rows_read, self.skipped = int(state["epoch"]), int(state["rows_read"]), int(state["skipped"])
        self.buffer = [tuple(r) if isinstance(r, list) else r for r in state["buffer"]]
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = dict(state["rng"])
        self._dataset = self._iter = None
        if state["stream"] is not None:
            self._open(state["stream"])


class StreamedMixture:
    """Several streamed corpora of one objective as one stream: each example comes from corpus
    k with probability q_k ∝ p_k^α (p: the corpora's sizes; α=1: in proportion to their size), the
    choice a seeded function of the example's position."""

    streamed: ClassVar[bool] = True

    def __init__(self, corpora: Sequence[StreamedCorpus], sizes: Sequence[int], alpha: Optional[float], seed: int):
        from .sampling import sampling_probabilities

        self.corpora, self.seed, self.taken = list(corpora), seed, 0
        self.probabilities = np.array(list(sampling_probabilities(dict(enumerate(sizes)),
                                                                  1.0 if alpha is None else alpha).values()))
        self.fingerprint = {"corpora": [c.fingerprint for c in self.corpora], "sizes": list(sizes), "alpha": alpha}

    def __len__(self) -> int:
        raise InputTypeError("a streamed corpus has no length")

    def take(self, n: int) -> list:
        rng = np.random.default_rng([self.seed, 0x313, self.taken])
        choice = rng.choice(len(self.corpora), size=n, p=self.probabilities)
        drawn = {k: iter(self.corpora[k].take(int((choice == k).sum()))) for k in range(len(self.corpora))}
        self.taken += n
        return [next(drawn[int(k)]) for k in choice]

    def state_dict(self) -> dict[str, Any]:
        return {"taken": self.taken, "corpora": [c.state_dict() for c in self.corpora]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.taken = int(state["taken"])
        for corpus, saved in zip(self.corpora, state["corpora"]):
            corpus.load_state_dict(saved)


def streamed_mixture(parts: Sequence[StreamedCorpus], alpha: Optional[float], seed: int) -> StreamedMixture:
    """One objective's streamed corpora as a :class:`StreamedMixture`, their sizes from the
    sources (a source that cannot say its size is an error naming it)."""
    sizes = []
    for corpus in parts:
        size = corpus.source.known_size()
        if size is None:
            raise ConfigError(f"{corpus.source.where}: a streamed source mixed with others needs its size (size: N, "
                              f"the rows of {corpus.source.describe()}), which its dataset does not record")
        sizes.append(size)
    return StreamedMixture(parts, sizes, alpha, seed)
