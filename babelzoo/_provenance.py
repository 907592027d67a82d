"""Where numbers are made: the CPU's name and the babelzoo commit the code ran from, for
leaderboards (:func:`babelzoo.evaluation.leaderboard.provenance`) and results files
(``benchmarks/_results.py``)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Sequence

PACKAGE = Path(__file__).resolve().parent


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def checkout_commit(paths: Sequence[str] = ("babelzoo",), short: bool = False) -> str:
    """HEAD of the babelzoo checkout this package runs from, marked ``+uncommitted changes`` when
    any of ``paths`` (relative to the checkout) differs from it; "" when the package is not in a
    checkout of babelzoo itself (an installed package that happens to sit in another repository)."""
    top = _git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != PACKAGE.parent:
        return ""
    head = _git("rev-parse", *(["--short"] if short else []), "HEAD")
    if head and _git("status", "--porcelain", "--", *(str(PACKAGE.parent / p) for p in paths)):
        head += "+uncommitted changes"
    return head
