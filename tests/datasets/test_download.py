import hashlib
import io
import tarfile

import pytest

from babelzoo.datasets.download import DownloadError, download, extract, fetch_directory, sha256_of


def test_file_url_download_verifies_and_caches(tmp_path):
    src = tmp_path / "data.txt"
    src.write_bytes(b"hello babel\n" * 1000)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dest = download(src.as_uri(), digest, directory=tmp_path / "cache")
    assert dest.read_bytes() == src.read_bytes() and sha256_of(dest) == digest
    src.write_bytes(b"changed")  # the cached, verified copy is reused
    assert download(src.as_uri(), digest, directory=tmp_path / "cache").read_bytes().startswith(b"hello")


def test_checksum_mismatch_leaves_nothing_behind(tmp_path):
    src = tmp_path / "data.bin"
    src.write_bytes(b"\x00" * 10)
    with pytest.raises(DownloadError, match="sha256 mismatch .* expected 0{64}, got "):
        download(src.as_uri(), "0" * 64, directory=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(DownloadError, match="cannot fetch file://"):
        download((tmp_path / "nope.bin").as_uri(), directory=tmp_path / "cache")


def test_extract_refuses_paths_outside_the_target(tmp_path):
    archive = tmp_path / "evil.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(DownloadError, match="would be written outside"):
        extract(archive, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_fetch_directory_unpacks_once(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    archive = tmp_path / "ckpt.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="ckpt")
    out = fetch_directory(archive.as_uri(), sha256_of(archive))
    assert (out / "config.json").read_text() == "{}"
    assert fetch_directory(archive.as_uri(), sha256_of(archive)) == out


def test_cache_is_keyed_by_url_not_file_name(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    first, second = tmp_path / "a" / "ckpt.tar.gz", tmp_path / "b" / "ckpt.tar.gz"
    for path, body in ((first, b"model A"), (second, b"model B")):
        path.parent.mkdir()
        path.write_bytes(body)
    assert download(first.as_uri()).read_bytes() == b"model A"
    assert download(second.as_uri()).read_bytes() == b"model B"  # same name, other source
    assert download(first.as_uri(), sha256_of(first)).read_bytes() == b"model A"


def test_without_checksum_a_republished_url_is_fetched_again(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "weights.bin"
    src.write_bytes(b"version 1")
    assert download(src.as_uri()).read_bytes() == b"version 1"
    src.write_bytes(b"version 2")
    assert download(src.as_uri()).read_bytes() == b"version 2"
