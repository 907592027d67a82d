"""Checkpoints load strictly, never partly, never by running code."""

import os
import pickle
import tarfile

import pytest
import torch
from safetensors.torch import load_file, save_file

import babelzoo
from babelzoo.datasets.download import DownloadError, sha256_of
from babelzoo.errors import CheckpointError
from babelzoo.zoo.checkpoint_io import read_weights


@pytest.fixture
def checkpoint(tmp_path):
    model = babelzoo.create_model("xlm_tiny").eval()
    return model, model.save_pretrained(tmp_path / "ckpt")


def test_missing_unexpected_and_shape_mismatch_are_listed(checkpoint):
    model, path = checkpoint
    state = load_file(path / "model.safetensors")
    del state["encoder.layers.1.ffn.up.weight"]
    state["extra.weight"] = torch.zeros(2)
    state["pooler.dense.bias"] = torch.zeros(7)
    save_file(state, path / "model.safetensors")
    with pytest.raises(CheckpointError) as err:
        babelzoo.from_pretrained(path)
    message = str(err.value)
    assert "missing keys (1): encoder.layers.1.ffn.up.weight" in message
    assert "unexpected keys (1): extra.weight" in message
    assert "pooler.dense.bias: checkpoint (7,) vs model (128,)" in message


def test_wrong_vocab_size_is_a_shape_error(checkpoint):
    _, path = checkpoint
    with pytest.raises(CheckpointError, match=r"embeddings.word.weight: checkpoint \(8000, 128\) vs model \(9000, 128\)"):
        babelzoo.create_model("xlm_tiny", vocab_size=9000, weights=path)


def test_truncated_weights_file_is_reported_by_name(checkpoint):
    _, path = checkpoint
    weights = path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model.safetensors: corrupted or truncated safetensors file"):
        babelzoo.from_pretrained(path)


def test_corrupted_header_is_reported(checkpoint):
    _, path = checkpoint
    weights = path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:20] = b"not json !!!"
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted or truncated"):
        babelzoo.from_pretrained(path)


def test_pickle_weights_load_with_weights_only(checkpoint, tmp_path):
    model, path = checkpoint
    state = load_file(path / "model.safetensors")
    os.remove(path / "model.safetensors")
    torch.save(state, path / "pytorch_model.bin")
    loaded = babelzoo.from_pretrained(path).eval()
    ids = torch.randint(5, 8000, (2, 6))
    assert torch.equal(loaded(ids).last_hidden, model(ids).last_hidden)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_pickle_that_would_run_code_is_refused(tmp_path):
    path = tmp_path / "model.bin"
    with open(path, "wb") as handle:
        pickle.dump({"w": _Evil()}, handle)
    with pytest.raises(CheckpointError, match=r"cannot read weights with torch.load\(weights_only=True\)"):
        read_weights(path)


def test_missing_config_and_weights(tmp_path):
    with pytest.raises(CheckpointError, match="no config.json"):
        babelzoo.from_pretrained(tmp_path)
    babelzoo.ModelConfig().to_json(tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="no weights file"):
        babelzoo.from_pretrained(tmp_path)


def test_weights_only_false_is_refused(checkpoint):
    with pytest.raises(ValueError, match="must not execute code"):
        babelzoo.from_pretrained(checkpoint[1], weights_only=False)


def test_from_archive_url_with_checksum(checkpoint, tmp_path, monkeypatch):
    model, path = checkpoint
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    archive = tmp_path / "xlm_tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(path, arcname="xlm_tiny")
    digest = sha256_of(archive)
    loaded = babelzoo.from_pretrained(archive.as_uri(), sha256=digest).eval()
    ids = torch.randint(5, 8000, (1, 9))
    assert torch.equal(loaded(ids).last_hidden, model(ids).last_hidden)
    with pytest.raises(DownloadError, match=r"sha256 mismatch for .*xlm_tiny.tar.gz: expected 0{64}, got " + digest):
        babelzoo.from_pretrained(archive.as_uri(), sha256="0" * 64)


def test_create_model_with_weights_file(checkpoint):
    model, path = checkpoint
    again = babelzoo.create_model("xlm_tiny", weights=path / "model.safetensors").eval()
    ids = torch.randint(5, 8000, (1, 9))
    assert torch.equal(again(ids).last_hidden, model(ids).last_hidden)


def test_pretrained_without_weights_says_which_have_them():
    with pytest.raises(ValueError, match="model 'xlm_tiny' has no pretrained weights"):
        babelzoo.create_model("xlm_tiny", pretrained=True)


def test_a_model_class_loads_its_own_checkpoints_and_names_the_class_of_others(checkpoint, tmp_path):
    from babelzoo.zoo.multimodal import FusionModel
    from babelzoo.zoo.model import BabelModel
    from babelzoo.zoo.families.seq2seq.model import Seq2SeqModel

    saved, checkpoint = checkpoint
    loaded = BabelModel.from_pretrained(checkpoint)
    assert type(loaded) is BabelModel
    for key, tensor in saved.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key
    with pytest.raises(CheckpointError, match=r"holds a BabelModel, not a Seq2SeqModel: load it with babelzoo"):
        Seq2SeqModel.from_pretrained(checkpoint)
    with pytest.raises(CheckpointError, match=r"holds a BabelModel, not a FusionModel"):
        FusionModel.from_pretrained(checkpoint)
    babelzoo.create_model("vl_dual_tiny").save_pretrained(tmp_path / "fusion")
    assert type(FusionModel.from_pretrained(tmp_path / "fusion")) is FusionModel
    with pytest.raises(CheckpointError, match=r"holds a fusion model, not a BabelModel"):
        BabelModel.from_pretrained(tmp_path / "fusion")
