"""The standard benchmark sets (Tatoeba, Multi30k, CoDEx-S): their official locations and sha256
digests, and a fetcher that fills a data folder from them or from a mirror.

    ensure_standard_set("tatoeba", data_dir)                     # official locations
    ensure_standard_set("tatoeba", data_dir, mirror="file:///srv/mirror")  # a local mirror

Files already in ``data_dir`` are verified against their digests and kept; missing ones are
downloaded into ``data_dir/<set>/`` and verified. A mirror holds the same layout as a data folder
(``<set>/<file>``)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..registry import RegistryError
from .download import DownloadError, download, sha256_of

CATALOG = Path(__file__).with_name("standard_sets.json")


@lru_cache(maxsize=1)
def standard_sets() -> dict[str, dict[str, dict[str, str]]]:
    """``{set: {relative file name: {"url": ..., "sha256": ...}}}``."""
    return json.loads(CATALOG.read_text(encoding="utf-8"))


def ensure_standard_set(name: str, data_dir: str | Path, mirror: Optional[str] = None,
                        files: Optional[Sequence[str]] = None,
                        log: Callable[[str], None] = lambda message: None) -> Path:
    """Make ``data_dir/name`` hold the verified files of standard set ``name`` (all of them, or
    only ``files``); returns that folder."""
    catalog = standard_sets()
    if name not in catalog:
        raise RegistryError(f"unknown standard set {name!r}; known: {', '.join(sorted(catalog))}")
    entries = catalog[name]
    wanted = list(files) if files is not None else sorted(entries)
    unknown = sorted(set(wanted) - set(entries))
    if unknown:
        raise RegistryError(f"{name} has no file(s) {unknown}")
    folder = Path(data_dir) / name
    for rel in wanted:
        entry = entries[rel]
        local = folder / rel
        if local.exists():
            if sha256_of(local) != entry["sha256"]:
                raise DownloadError(f"{local}: sha256 does not match the {name} release "
                                    f"(expected {entry['sha256']}); delete it to download it again")
            continue
        url = f"{mirror.rstrip('/')}/{name}/{rel}" if mirror else entry["url"]
        log(f"fetching {url}")
        download(url, entry["sha256"], directory=local.parent, filename=local.name)
    return folder
