"""JSONL manifests of image–text and speech–text pairs, and the error every media problem raises.

One JSON object per line, paths relative to the manifest::

    {"image": "images/1F600.png", "text": "grinning face", "lang": "en", "group": "1F600"}
    {"audio": "audio/000001.wav", "text": "visage souriant", "lang": "fr"}

``group`` (optional) marks examples that show the same thing (one emoji named in several
languages): contrastive objectives treat them as positives of each other, never as negatives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from .._files import refuse_utf16
from ..errors import BabelzooError

KINDS = ("image", "audio")


class MediaError(BabelzooError, ValueError):
    """A manifest line, image or audio file that cannot be used; the message names it."""


@dataclass(frozen=True)
class MediaRecord:
    kind: str
    path: Path
    text: str
    lang: str
    group: Optional[str]
    where: str  # "manifest.jsonl:12"



def read_manifest(path: str | Path) -> list[MediaRecord]:
    """Parse and check a JSONL manifest; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"{path}: no such manifest")
    allowed = {"image", "audio", "text", "lang", "group"}
    records = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path}:{number}"
            if number == 1:
                refuse_utf16(path, raw, MediaError)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise MediaError(f"{where}: not UTF-8 text (byte 0x{raw[err.start]:02x}); save it as UTF-8") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise MediaError(f"{where}: invalid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                raise MediaError(f"{where}: expected a JSON object")
            unknown = sorted(set(row) - allowed)
            if unknown:
                raise MediaError(f"{where}: unknown key(s) {unknown}; valid keys: {', '.join(sorted(allowed))}")
            kinds = [k for k in KINDS if k in row]
            if len(kinds) != 1:
                raise MediaError(f"{where}: give exactly one of 'image' or 'audio'")
            for key in (kinds[0], "text", "lang"):
                if not isinstance(row.get(key), str) or not row[key].strip():
                    raise MediaError(f"{where}: field {key!r} must be a non-empty string")
            group = row.get("group")
            if group is not None and not isinstance(group, str):
                raise MediaError(f"{where}: field 'group' must be a string")
            records.append(MediaRecord(kinds[0], path.parent / row[kinds[0]], row["text"], row["lang"], group, where))
    return records


def write_manifest(path: str | Path, rows: Iterable[dict]) -> Path:
    """Write ``rows`` (dicts) as a UTF-8 JSONL manifest at ``path``, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
