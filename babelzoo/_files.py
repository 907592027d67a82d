"""Reading the small JSON files babelzoo writes beside weights and data (configs, vocabularies,
indexes), with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path


def read_json_object(path: Path, error: type[Exception], expected: str = "a JSON object") -> dict:
    """The JSON object in ``path``; invalid JSON (with its line) or another JSON value raises
    ``error`` naming the file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise error(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected {expected}, found {type(data).__name__}")
    return data
