"""A model directory is loaded and written as a whole: a training checkpoint is verified against
its manifest, a tokenizer must fit the model's vocabulary, and a save replaces every file of the
model that was there before (a directory that is not a model's is refused, untouched)."""

import json

import pytest
import torch

import babelzoo
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.zoo.convert import export_hf
from babelzoo.errors import CheckpointError
from babelzoo.zoo.pretrained import from_pretrained
from babelzoo.zoo.checkpoint_io import load_weights_into

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def words(n: int) -> WordPieceTokenizer:
    return WordPieceTokenizer(SPECIAL + [f"w{i}" for i in range(n - len(SPECIAL))])


def tiny(vocab: int = 64):
    torch.manual_seed(0)
    return babelzoo.create_model("mbert_tiny", vocab_size=vocab, num_layers=1, pad_token_id=0)


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path):
    tiny(64).save_pretrained(tmp_path / "m", words(200))
    with pytest.raises(CheckpointError, match=r"the tokenizer has 200 tokens but the model's vocabulary holds 64"):
        from_pretrained(tmp_path / "m")
    tiny(64).save_pretrained(tmp_path / "ok", words(60))  # a smaller one (padded vocabulary) is fine
    assert from_pretrained(tmp_path / "ok").tokenizer.vocab_size == 60


def test_a_training_checkpoint_is_verified_against_its_manifest(tmp_path):
    from babelzoo.datasets.download import sha256_of

    folder = tiny().save_pretrained(tmp_path / "step-00000004")
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_of(p)} for p in folder.iterdir()}
    (folder / "manifest.json").write_text(json.dumps({"step": 4, "files": files}))
    from_pretrained(folder)  # intact: loads
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-3] ^= 0x01  # same size, one bit flipped in a tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"corrupted checkpoint: .*model.safetensors: sha256 does not match"):
        from_pretrained(folder)
    with pytest.raises(CheckpointError, match=r"corrupted checkpoint: .*model.safetensors: sha256 does not match"):
        load_weights_into(tiny(), folder)


def test_saving_replaces_the_previous_model_whole(tmp_path):
    target = tmp_path / "m"
    tiny().save_pretrained(target, words(40))
    assert (target / "vocab.txt").is_file()
    tiny().save_pretrained(target)  # no tokenizer this time: the earlier one's files go with it
    assert sorted(p.name for p in target.iterdir()) == [".babelzoo-files.json", "config.json", "model.safetensors"]
    assert getattr(from_pretrained(target), "tokenizer", None) is None


def test_a_directory_that_is_not_a_model_is_refused_untouched(tmp_path):
    target = tmp_path / "notes"
    target.mkdir()
    (target / "todo.txt").write_text("keep me")
    with pytest.raises(CheckpointError, match=r"not a folder babelzoo wrote as a model \(it holds todo.txt\); "
                                              r"nothing was deleted"):
        tiny().save_pretrained(target)
    with pytest.raises(CheckpointError, match="not a folder babelzoo wrote as a Hugging Face model"):
        export_hf(tiny(), target)
    assert [p.name for p in target.iterdir()] == ["todo.txt"]


def test_export_over_an_earlier_export_leaves_no_stale_file(tmp_path):
    target = tmp_path / "hf"
    export_hf(tiny(), target, tokenizer=words(40))
    assert (target / "vocab.txt").is_file()
    export_hf(tiny(), target)
    assert sorted(p.name for p in target.iterdir()) == [".babelzoo-files.json", "config.json", "model.safetensors"]
