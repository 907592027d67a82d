"""Keep large CPU buffers in the process between training steps, for the length of a run.

glibc's ``malloc`` serves every block above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and unmaps it on ``free``: a training step that allocates the same large activations,
gradients and logits every time pays for page faults on every one of their pages, every step
(for BERT-base with a 120k vocabulary on 2 cores, about a quarter of the step). With mmap
allocation off and a high trim threshold, freed blocks stay in the heap and the next step reuses
them. Peak memory is unchanged; memory freed after the peak is kept by the process while the run
lasts. Numerics are untouched.

:func:`cpu_buffers_kept` scopes the change to a block (the trainer's run): on leaving it, glibc's
default limits come back and the heap's free memory is returned to the system. One thing glibc
offers no way to restore: once its limits have been set, its mmap threshold no longer adapts to
the block sizes freed (it stays where it was, 128 KiB in a fresh process).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import threading
from functools import lru_cache
from typing import Iterator, Optional

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt parameters, <malloc.h>
TRIM_THRESHOLD = 2 ** 31 - 1  # the largest value mallopt takes (an int): 2 GiB
DEFAULTS = {M_MMAP_MAX: 65536, M_TRIM_THRESHOLD: 128 * 1024}  # glibc's DEFAULT_MMAP_MAX and DEFAULT_TRIM_THRESHOLD
KEPT = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: TRIM_THRESHOLD}

_lock = threading.Lock()
_depth = 0  # runs inside one another share one change, undone by the outermost


@lru_cache(maxsize=1)
def _libc() -> Optional[ctypes.CDLL]:
    """glibc, or None where the C library has no ``mallopt`` (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def _set(libc: ctypes.CDLL, options: dict[int, int]) -> bool:
    return all([bool(libc.mallopt(option, value)) for option, value in options.items()])


@contextlib.contextmanager
def cpu_buffers_kept() -> Iterator[bool]:
    """Within the block, glibc keeps freed large blocks in the heap (``M_MMAP_MAX = 0``,
    ``M_TRIM_THRESHOLD`` = 2 GiB); after it, its default limits are back and ``malloc_trim``
    returns the free memory. Yields whether the change applies (False, changing nothing, where
    the C library is not glibc)."""
    global _depth
    libc = _libc()
    if libc is None:
        yield False
        return
    with _lock:
        _depth += 1
        applied = _set(libc, KEPT) if _depth == 1 else True
    try:
        yield applied
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _set(libc, DEFAULTS)
                libc.malloc_trim(0)
