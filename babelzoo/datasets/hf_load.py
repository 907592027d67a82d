"""Loading one split through Hugging Face ``datasets`` (the ``datasets`` extra), for the
``hf_dataset`` corpus source (:mod:`babelzoo.datasets.streaming`) and fine-tuning splits
(:mod:`babelzoo.datasets.hf_labelled`). Light: ``datasets`` is imported when a split is loaded."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from .._files import expand_path
from ..errors import ConfigError

DataFiles = Union[None, str, list[str], dict[str, Union[str, list[str]]]]


# a file is known by its size, modification time and the sha256 of this much of its start and end
ENDS = 1 << 16


def _datasets(where: str):
    try:
        import datasets
    except ImportError as err:
        raise ConfigError(f"{where}: hf_dataset needs the datasets package (pip install 'babelzoo[datasets]')") \
            from err
    return datasets


@contextlib.contextmanager
def _no_progress_bars(datasets) -> Iterator[None]:
    """``datasets``' own progress bars off while babelzoo reads a split (babelzoo's progress and
    the command line own the terminal), as they were after."""
    shown = datasets.utils.logging.is_progress_bar_enabled()
    datasets.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            datasets.utils.logging.enable_progress_bar()


def load_split(path: str, name: Optional[str], data_files: DataFiles, split: str, revision: Optional[str],
               streaming: bool, where: str, described: str):
    """``datasets.load_dataset(...)`` (an IterableDataset when ``streaming``); a dataset it cannot
    load is a :class:`ConfigError` naming ``where``."""
    datasets = _datasets(where)
    try:
        with _no_progress_bars(datasets):
            return datasets.load_dataset(path, name, data_files=data_files, split=split, revision=revision,
                                         streaming=streaming)
    except (FileNotFoundError, ValueError, datasets.exceptions.DatasetNotFoundError) as err:
        raise ConfigError(f"{where}: datasets cannot load {described}: {err}") from None


def split_files(path: str, name: Optional[str], data_files: DataFiles, split: str, revision: Optional[str],
                where: str, described: str) -> list[str]:
    """The files ``datasets.load_dataset`` reads for ``split``, found as it finds them (its
    builder's ``data_files``: a dataset folder's files of its one format, a glob's matches); empty
    for a dataset that names none (a Hub dataset from the cache, a loading script)."""
    datasets = _datasets(where)
    try:
        with _no_progress_bars(datasets):
            builder = datasets.load_dataset_builder(path, name, data_files=data_files, revision=revision)
    except (FileNotFoundError, ValueError, datasets.exceptions.DatasetNotFoundError) as err:
        raise ConfigError(f"{where}: datasets cannot load {described}: {err}") from None
    names = {re.sub(r"\[.*\]$", "", part.strip()) for part in split.split("+")}  # train+test[:10%]
    found = builder.config.data_files or {}
    return [str(file) for key, files in found.items() if str(key) in names for file in files]


def file_identity(path: str) -> dict[str, Any]:
    """A local file as a resumed run must find it again: its size, modification time and the
    sha256 of its first and last :data:`ENDS` bytes (all of it when smaller). Cheap for a corpus
    larger than the disk's cache, and a file replaced by other text of the same size and time
    still differs in its ends unless the change lies wholly in its middle."""
    stat = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        digest.update(handle.read(ENDS))
        if stat.st_size > ENDS:
            handle.seek(max(ENDS, stat.st_size - ENDS))
            digest.update(handle.read(ENDS))
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ends_sha256": digest.hexdigest()}


def dataset_path(path: str, where: str, expand: Callable[[str, str], str] = expand_path) -> str:
    """``path`` with ``~`` and variables expanded (by ``expand(value, where)``) when that names a
    local folder or file, else as written (a packaged builder such as ``json``, a Hub id)."""
    expanded = expand(path, where)
    return expanded if Path(expanded).exists() else path


def expand_data_files(data_files: DataFiles, where: str, expand: Callable[[str, str], str] = expand_path) -> DataFiles:
    """``data_files`` (a path, a list, or ``{split: path or list}``) with every path expanded."""
    def one(value: str) -> str:
        return expand(value, where)

    if data_files is None or isinstance(data_files, str):
        return data_files if data_files is None else one(data_files)
    if isinstance(data_files, list):
        return [one(v) for v in data_files]
    return {k: one(v) if isinstance(v, str) else [one(x) for x in v] for k, v in data_files.items()}
