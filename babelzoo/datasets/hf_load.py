"""Loading one split through Hugging Face ``datasets`` (the ``datasets`` extra), for the
``hf_dataset`` corpus source (:mod:`babelzoo.datasets.streaming`) and fine-tuning splits
(:mod:`babelzoo.datasets.hf_labelled`). Light: ``datasets`` is imported when a split is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Union

from .._files import expand_path
from ..errors import ConfigError

DataFiles = Union[None, str, list[str], dict[str, Union[str, list[str]]]]


def load_split(path: str, name: Optional[str], data_files: DataFiles, split: str, revision: Optional[str],
               streaming: bool, where: str, described: str):
    """``datasets.load_dataset(...)`` (an IterableDataset when ``streaming``); a dataset it cannot
    load is a :class:`ConfigError` naming ``where``."""
    try:
        import datasets
    except ImportError as err:
        raise ConfigError(f"{where}: hf_dataset needs the datasets package (pip install 'babelzoo[datasets]')") \
            from err
    try:
        return datasets.load_dataset(path, name, data_files=data_files, split=split, revision=revision,
                                     streaming=streaming)
    except (FileNotFoundError, ValueError, datasets.exceptions.DatasetNotFoundError) as err:
        raise ConfigError(f"{where}: datasets cannot load {described}: {err}") from None


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
