"""Where every benchmark writes its results: ``OUT.json`` and the Markdown table beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(out: str | Path, report: Any, markdown: str, indent: int = 2) -> Path:
    """Write ``report`` as JSON to ``out`` (UTF-8, non-ASCII kept; objects JSON cannot encode are
    written with ``str``) and ``markdown`` to ``out`` with the suffix ``.md``; return ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=indent, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(markdown if markdown.endswith("\n") else markdown + "\n", encoding="utf-8")
    return out
