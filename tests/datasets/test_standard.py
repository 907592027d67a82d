"""Standard-set downloads, tested against a local file:// mirror of the real files."""

import shutil

import pytest

from babelzoo.datasets.download import DownloadError
from babelzoo.datasets.standard import ensure_standard_set, standard_sets
from babelzoo.datasets.text import multi30k_pairs


def test_catalog_covers_the_three_sets():
    sets = standard_sets()
    assert len(sets["tatoeba"]) == 212 and len(sets["multi30k"]) == 12
    assert sets["codex-s"]["train.txt"]["url"].endswith("/data/triples/codex-s/train.txt")
    assert all(len(e["sha256"]) == 64 for s in sets.values() for e in s.values())


def test_fetch_from_file_mirror_verifies_every_file(shared_data, tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(shared_data / "multi30k", mirror / "multi30k")
    target = tmp_path / "data"
    files = ["test_2016_flickr.en.gz", "test_2016_flickr.de.gz"]
    ensure_standard_set("multi30k", target, mirror=mirror.as_uri(), files=files)
    corpus = multi30k_pairs(target, "test_2016_flickr", "en", "de")
    assert len(corpus) == 1000
    # A tampered mirror file fails its checksum and is not written.
    (mirror / "multi30k" / "val.en.gz").write_bytes(b"tampered")
    with pytest.raises(DownloadError, match="sha256 mismatch"):
        ensure_standard_set("multi30k", target, mirror=mirror.as_uri(), files=["val.en.gz"])
    assert not (target / "multi30k" / "val.en.gz").exists()


def test_existing_local_file_with_wrong_digest_is_reported(tmp_path):
    folder = tmp_path / "codex-s"
    folder.mkdir()
    (folder / "train.txt").write_text("Q1\tP1\tQ2\n")
    with pytest.raises(DownloadError, match="train.txt: sha256 does not match the codex-s release"):
        ensure_standard_set("codex-s", tmp_path, files=["train.txt"])


def test_unknown_set_and_file():
    with pytest.raises(KeyError, match="unknown standard set 'xnli'"):
        ensure_standard_set("xnli", "/tmp")
    with pytest.raises(KeyError, match=r"multi30k has no file\(s\) \['nope.gz'\]"):
        ensure_standard_set("multi30k", "/tmp", files=["nope.gz"])
