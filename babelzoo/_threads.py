"""How many CPU threads a training run or an encoder uses: as many as make its matrix products
faster on the cores this process actually gets.

PyTorch starts one intra-op thread per core and each parallel region waits for its slowest
thread. When another process keeps a core busy, the thread that shares it runs at half speed and
every product waits for it: on a 2-core machine a tiny model's step took 5.4× longer with one
competing process, where one thread would have taken 1.7× (``benchmarks/results/cpu_contention/xeon.md``).
So before a run the candidates (the threads the caller allows, then halves of it down to one) are
timed on a product of the model's width, in seven interleaved windows each (about 0.3 s in all),
and the fewest threads within 15% of the fastest median are kept. The caller's
``torch.get_num_threads()`` is the upper bound (a process told to use one thread uses one), and
``BABELZOO_THREADS`` or an explicit count skip the probe. The count is set for the run only
(:func:`cpu_threads`) and restored after it.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Iterator, Optional

import torch

from .errors import ConfigError

ENV = "BABELZOO_THREADS"
TOLERANCE = 1.15  # fewer threads win unless more are at least this much faster


def allowed_threads() -> int:
    """The threads this process may use: torch's setting, at most the cores it may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores))


def candidates(limit: int) -> list[int]:
    """``limit``, then halves of it, down to one: [8, 4, 2, 1], [6, 3, 1], [2, 1]."""
    out = [limit]
    while out[-1] > 1:
        out.append(max(1, out[-1] // 2))
    return out


def product_seconds(width: int, threads: list[int], window: float = 0.02, rounds: int = 7) -> dict[int, float]:
    """Median time of a [rows, width] @ [width, 4·width] float32 product (256 to 1024 rows) with each thread count,
    over ``rounds`` interleaved windows of about ``window`` seconds each: longer than a
    scheduler's time slice, so that a competitor's turns reach every count alike, and a median,
    not a minimum, so that one lucky window does not hide a busy core."""
    rows = int(min(1024, max(256, 4e7 / width ** 2)))  # products of about a millisecond on one core
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, width, generator=generator)
    w = torch.randn(width, 4 * width, generator=generator)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        a @ w
        start = time.perf_counter()
        a @ w
        repeats = max(1, min(256, int(window / max(time.perf_counter() - start, 1e-7))))
        samples: dict[int, list[float]] = {n: [] for n in threads}
        for _ in range(rounds):
            for n in threads:
                torch.set_num_threads(n)
                a @ w
                start = time.perf_counter()
                for _ in range(repeats):
                    a @ w
                samples[n].append((time.perf_counter() - start) / repeats)
        return {n: statistics.median(times) for n, times in samples.items()}
    finally:
        torch.set_num_threads(before)


def choose_threads(width: int, requested: Optional[int] = None) -> tuple[int, str]:
    """(threads, why): ``requested`` or ``BABELZOO_THREADS`` when set, else the fewest
    candidates within :data:`TOLERANCE` of the fastest on a product of ``width``."""
    if requested is None and os.environ.get(ENV, "").strip():
        try:
            requested = int(os.environ[ENV])
        except ValueError:
            raise ConfigError(f"{ENV}={os.environ[ENV]!r} must be a whole number of threads") from None
        if requested < 1:
            raise ConfigError(f"{ENV}={requested} must be at least 1")
        return requested, f"{ENV}={requested}"
    if requested is not None:
        return requested, "set by the caller"
    limit = allowed_threads()
    if limit == 1:
        return 1, "one thread allowed"
    times = product_seconds(width, candidates(limit))
    fastest = min(times.values())
    chosen = min(n for n, t in times.items() if t <= TOLERANCE * fastest)
    shown = ", ".join(f"{n}: {1e3 * t:.2f} ms" for n, t in sorted(times.items(), reverse=True))
    return chosen, f"fastest product of width {width} ({shown})"


_ENCODER_CHOICES: dict[tuple[int, int], tuple[float, int]] = {}  # (width, allowed) -> (when, threads)
ENCODER_PROBE_SECONDS = 30.0


def encoder_threads(width: int) -> int:
    """:func:`choose_threads` for encoders, probed again at most every
    :data:`ENCODER_PROBE_SECONDS` (an evaluation encodes hundreds of small sets in a row)."""
    key, now = (width, allowed_threads()), time.monotonic()
    known = _ENCODER_CHOICES.get(key)
    if known is None or now - known[0] > ENCODER_PROBE_SECONDS or os.environ.get(ENV, "").strip():
        known = (now, choose_threads(width)[0])
        _ENCODER_CHOICES[key] = known
    return known[1]


@contextlib.contextmanager
def cpu_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads, then restore the caller's count."""
    before = torch.get_num_threads()
    if threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
