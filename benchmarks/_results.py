"""Where every benchmark writes its results (``OUT.json`` and the Markdown table beside it), and
what they read back from a training run's log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from babelzoo._files import write_json_atomic, write_text_atomic


def write_results(out: str | Path, report: Any, markdown: str, indent: int = 2) -> Path:
    """Write ``report`` as JSON to ``out`` (UTF-8, non-ASCII kept; objects JSON cannot encode are
    written with ``str``) and ``markdown`` to ``out`` with the suffix ``.md``; return ``out``."""
    out = Path(out)
    write_json_atomic(out, report, indent=indent, default=str)
    write_text_atomic(out.with_suffix(".md"), markdown if markdown.endswith("\n") else markdown + "\n")
    return out


def logged_means(run_dir: str | Path, window: int, suffixes: Sequence[str] = ("loss",)) -> dict[str, float]:
    """Mean of each metric in ``run_dir/metrics.jsonl`` whose name ends with one of ``suffixes``,
    over the last ``window`` records that hold it."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    out = {}
    for key in sorted({k for r in records for k in r if k.endswith(tuple(suffixes))}):
        values = [r[key] for r in records if key in r][-window:]
        out[key] = sum(values) / len(values)
    return out
