"""A folder babelzoo wrote as one kind of thing is replaced only by the same kind: a saved model
does not silently become a Hugging Face export or a KG embedding, and a run's best/ is not
replaced by an unrelated model. The error names both kinds; nothing is changed."""

from __future__ import annotations

import json
import re

import pytest
import torch

import babelzoo
from babelzoo._files import OWNED_MARKER, FolderNotOwned, check_replaceable
from babelzoo.knowledge.kge import create_kge, save_kge
from babelzoo.zoo.convert import export_hf
from babelzoo.train.selection import save_best
from babelzoo.zoo.checkpoint_io import WEIGHTS_NAME, model_state, save_weights
from babelzoo.errors import CheckpointError


def tiny():
    torch.manual_seed(0)
    return babelzoo.create_model("mbert_tiny", vocab_size=64, num_layers=1, pad_token_id=0)


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def kge(folder):
    return save_kge(create_kge("transe", 3, 1, 4), ["a", "b", "c"], ["r"], folder)


WRITERS = {
    "model": lambda folder: tiny().save_pretrained(folder),
    "Hugging Face model": lambda folder: export_hf(tiny(), folder),
    "KG embedding": kge,
}


@pytest.mark.parametrize("first", list(WRITERS))
@pytest.mark.parametrize("second", list(WRITERS))
def test_a_folder_is_replaced_only_by_what_it_was_written_as(tmp_path, first, second):
    folder = WRITERS[first](tmp_path / "out")
    assert json.loads((folder / OWNED_MARKER).read_text())["what"] == first
    if first == second:
        WRITERS[second](folder)  # its own kind: replaced
        assert json.loads((folder / OWNED_MARKER).read_text())["what"] == first
        return
    before = snapshot(folder)
    article = "an" if second[0] in "aeiouAEIOU" else "a"
    with pytest.raises((FolderNotOwned, CheckpointError),
                       match=rf"out: babelzoo wrote it as an? {re.escape(first)}, not {article} {re.escape(second)}; "
                             rf"nothing was deleted: write the {re.escape(second)} into a new or empty folder"):
        WRITERS[second](folder)
    assert snapshot(folder) == before


def test_a_runs_best_model_is_not_replaced_by_another_model(tmp_path):
    best = tmp_path / "run" / "best"
    save_best(best, lambda folder: save_weights(model_state(tiny()), folder / WEIGHTS_NAME))  # as the trainer does
    with pytest.raises(CheckpointError, match="best: babelzoo wrote it as a best model, not a model"):
        tiny().save_pretrained(best)
    check_replaceable(best, "best model")  # the run's next best replaces it


def test_an_empty_folder_and_a_missing_one_take_any_kind(tmp_path):
    (tmp_path / "empty").mkdir()
    for what in ("model", "ONNX export", "retrieval memory", "tokenizer"):
        assert check_replaceable(tmp_path / "empty", what) is None  # no FolderNotOwned
        assert check_replaceable(tmp_path / "missing", what) is None
    assert list((tmp_path / "empty").iterdir()) == [] and not (tmp_path / "missing").exists()  # nothing touched
