"""Keep large CPU buffers in the process between training steps.

glibc's ``malloc`` serves every block above its mmap threshold (at most 32 MiB) with a fresh
``mmap`` and unmaps it on ``free``: a training step that allocates the same large activations,
gradients and logits every time pays for page faults on every one of their pages, every step
(for BERT-base with a 120k vocabulary on 2 cores, about a quarter of the step). With mmap
allocation off and a high trim threshold, freed blocks stay in the heap and the next step reuses
them. Peak memory is unchanged; memory freed after the peak is kept by the process rather than
returned to the system. Numerics are untouched.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt parameters, <malloc.h>
TRIM_THRESHOLD = 2 ** 31 - 1  # the largest value mallopt takes (an int): 2 GiB


@lru_cache(maxsize=1)
def keep_cpu_buffers() -> bool:
    """Set glibc's ``M_MMAP_MAX = 0`` and ``M_TRIM_THRESHOLD`` = 2 GiB for this process (once).
    Returns False, changing nothing, where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
