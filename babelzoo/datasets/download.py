"""Downloads with sha256 verification and a local cache.

``download(url, sha256)`` fetches ``http(s)://`` or ``file://`` URLs (and plain paths) into the
cache (``$BABELZOO_CACHE`` or ``~/.cache/babelzoo``), verifies the checksum, and moves the file
into place atomically, so an interrupted or corrupted download never looks complete.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Optional

from ..errors import BabelzooError

CHUNK = 1 << 20


class DownloadError(BabelzooError, RuntimeError):
    """A download failed or its checksum did not match."""


def cache_dir() -> Path:
    return Path(os.environ.get("BABELZOO_CACHE", Path.home() / ".cache" / "babelzoo"))


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_url(source: str | Path) -> bool:
    return urllib.parse.urlparse(str(source)).scheme in ("http", "https", "file")


def _open(url: str):
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        return open(urllib.request.url2pathname(parsed.path), "rb")
    return urllib.request.urlopen(url, timeout=60)  # noqa: S310 (scheme checked by is_url)


def download(url: str, sha256: Optional[str] = None, directory: str | Path | None = None,
             filename: Optional[str] = None, progress: Optional[Callable[[int], None]] = None) -> Path:
    """Fetch ``url`` into ``directory`` (default: the cache) and return the local path.

    The cache keeps one folder per URL (``downloads/<hash of the URL>/<file name>``), so two
    sources with the same file name never share a copy. A copy is reused only when ``sha256``
    is given and matches it: without a checksum nothing proves the copy is what the URL serves
    now, so the URL is fetched again (a republished file is picked up). With ``sha256`` given,
    a mismatch raises :class:`DownloadError` naming both digests and nothing is left behind.
    """
    if not is_url(url):
        path = Path(url)
        if not path.exists():
            raise DownloadError(f"{url}: no such file, and not an http(s):// or file:// URL")
        _verify(path, sha256, url)
        return path
    name = filename or Path(urllib.parse.urlparse(url).path).name or "download"
    if directory is not None:
        target = Path(directory)
    else:
        target = cache_dir() / "downloads" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    target.mkdir(parents=True, exist_ok=True)
    dest = target / name
    if dest.exists() and sha256 is not None and sha256_of(dest) == sha256.lower():
        return dest
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=target)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                source = _open(url)
            except OSError as err:
                raise DownloadError(f"cannot fetch {url}: {err}") from err
            with source:
                for chunk in iter(lambda: source.read(CHUNK), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    if progress is not None:
                        progress(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise DownloadError(f"sha256 mismatch for {url}: expected {sha256.lower()}, got {digest.hexdigest()}")
        os.replace(tmp_name, dest)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return dest


def _verify(path: Path, sha256: Optional[str], label: str) -> None:
    if sha256 is not None:
        actual = sha256_of(path)
        if actual != sha256.lower():
            raise DownloadError(f"sha256 mismatch for {label}: expected {sha256.lower()}, got {actual}")


def manifest_problem(directory: str | Path, manifest: str = "manifest.json") -> Optional[str]:
    """Why ``directory`` does not match its manifest (``{"files": {name: {size, sha256}}}``):
    a missing or unreadable manifest, a missing file, a wrong size or digest; None when every
    listed file is as recorded."""
    directory = Path(directory)
    path = directory / manifest
    if not path.is_file():
        return f"{directory}: no {manifest} (the save did not finish)"
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        entries = [(name, int(meta["size"]), str(meta["sha256"])) for name, meta in files.items()]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as err:
        return f"{path}: unreadable manifest ({type(err).__name__}: {err})"
    for name, size, digest in entries:
        file = directory / name
        if not file.is_file():
            return f"{file}: missing"
        if file.stat().st_size != size:
            return f"{file}: {file.stat().st_size} bytes, manifest says {size}"
        if sha256_of(file) != digest:
            return f"{file}: sha256 does not match the manifest"
    return None


# What a cut-off or corrupted archive raises while it is read: the end of a compressed stream
# (EOFError), a bad header or checksum, bad compressed data (zlib, lzma, bz2 as OSError).
DAMAGED = (EOFError, tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, OSError)


def extract(archive: str | Path, directory: str | Path) -> Path:
    """Unpack a .tar(.gz) or .zip archive into ``directory``, refusing members that would land
    outside it (absolute paths, ``..``, links)."""
    archive, directory = Path(archive), Path(directory)
    if not archive.is_file():
        raise DownloadError(f"{archive}: {'a folder' if archive.is_dir() else 'no such file'}; an archive is a "
                            ".tar, .tar.gz or .zip file")
    directory.mkdir(parents=True, exist_ok=True)
    root = directory.resolve()

    def safe(name: str) -> None:
        dest = (root / name).resolve()
        if root != dest and root not in dest.parents:
            raise DownloadError(f"{archive}: member {name!r} would be written outside {directory}")

    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    safe(name)
                zf.extractall(directory)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                for member in tf.getmembers():
                    safe(member.name)
                    if not (member.isfile() or member.isdir()):
                        raise DownloadError(f"{archive}: member {member.name!r} is not a regular file or folder")
                tf.extractall(directory, filter="data")
        else:
            raise DownloadError(f"{archive}: not a .zip or .tar archive")
    except DAMAGED as err:
        if isinstance(err, OSError) and err.filename is not None:
            raise  # about a file it names (a full disk): already one line
        raise DownloadError(f"{archive}: damaged or truncated archive ({type(err).__name__}: {err}); download it "
                            "again") from None
    return directory


def fetch_directory(url: str, sha256: Optional[str] = None) -> Path:
    """Download an archived checkpoint directory once and return the unpacked folder."""
    archive = download(url, sha256)
    key = sha256 or sha256_of(archive)
    dest = cache_dir() / "unpacked" / key[:16]
    if not (dest / ".complete").exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".unpack.", dir=dest.parent))
        try:
            extract(archive, tmp)
            entries = [p for p in tmp.iterdir()]
            inner = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
            (inner / ".complete").touch()
            if dest.exists():
                shutil.rmtree(dest)
            shutil.move(str(inner), dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
