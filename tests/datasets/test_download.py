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
