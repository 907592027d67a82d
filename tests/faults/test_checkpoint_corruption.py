"""Every way the newest checkpoint can be damaged (truncated or bit-flipped files, a missing or
broken manifest, a missing part) is found on resume: the run falls back to the previous
checkpoint, with a warning naming the damage, and ends with the weights of an uninterrupted run.
SIGKILL during training is covered by tests/train/test_resume.py."""

import json

import pytest
import torch
from safetensors.torch import load_file

from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.mlm import MLM
from babelzoo.train.checkpoint import CheckpointCorrupted
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.factory import create_model

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=64)
ROWS = [[5 + (i * 7 + j) % 50 for j in range(6 + i % 5)] for i in range(48)]


def fit(folder, steps=6):
    torch.manual_seed(0)
    model = create_model("xlmr_tiny", vocab_size=64, num_layers=1, max_positions=32)  # dropout 0.1
    cfg = TrainConfig(output_dir=str(folder), max_steps=steps, batch_size=4, optim=OptimConfig(lr=1e-3),
                      checkpoints=CheckpointConfig(every=3, keep=2),
                      logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), device="cpu")
    return Trainer(model, MLM(SPECIALS, max_length=32, use_language_ids=False), ROWS, cfg).fit()


def truncate(folder):
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])


def flip(folder):
    path = folder / "optimizer.safetensors"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def no_manifest(folder):
    (folder / "manifest.json").unlink()


def broken_manifest(folder):
    (folder / "manifest.json").write_text('{"files": ')


def missing_part(folder):
    next(folder.glob("trainer*")).unlink()


def foreign_file_listed(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["extra.bin"] = {"size": 1, "sha256": "0" * 64}
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("damage, why", [
    (truncate, "model.safetensors: .* bytes, manifest says"),
    (flip, "optimizer.safetensors: sha256 does not match"),
    (no_manifest, "no manifest.json"),
    (broken_manifest, "unreadable manifest"),
    (missing_part, "trainer.*: missing"),
    (foreign_file_listed, "extra.bin: missing"),
])
def test_a_damaged_newest_checkpoint_falls_back_and_resumes_exactly(tmp_path, damage, why):
    fit(tmp_path / "whole")
    fit(tmp_path / "run")
    damage(tmp_path / "run" / "checkpoints" / "step-00000006")
    with pytest.warns(RuntimeWarning, match=f"step-00000006 is corrupted .*{why}"):
        summary = fit(tmp_path / "run")
    assert summary["resumed_from"].endswith("step-00000003") and summary["steps_this_run"] == 3
    a = load_file(tmp_path / "whole" / "checkpoints" / "step-00000006" / "model.safetensors")
    b = load_file(tmp_path / "run" / "checkpoints" / "step-00000006" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_when_no_checkpoint_verifies_resume_stops_with_every_reason(tmp_path):
    fit(tmp_path / "run")
    for step in ("step-00000003", "step-00000006"):
        flip(tmp_path / "run" / "checkpoints" / step)
    with pytest.warns(RuntimeWarning):
        with pytest.raises(CheckpointCorrupted, match="no usable checkpoint .*step-00000006.*step-00000003"):
            fit(tmp_path / "run")


def test_a_checkpoint_folder_renamed_to_another_step_is_skipped_with_a_warning(tmp_path):
    fit(tmp_path / "run")
    checkpoints = tmp_path / "run" / "checkpoints"
    renamed = checkpoints / "step-99999999"
    (checkpoints / "step-00000006").rename(renamed)
    message = (f"checkpoint folder {renamed} is named for step 99999999, but its manifest.json records step 6; "
               "skipped \\(rename it step-00000006 to resume from it\\)")
    with pytest.warns(RuntimeWarning, match=message):
        summary = fit(tmp_path / "run")
    assert summary["resumed_from"].endswith("step-00000003") and summary["steps_this_run"] == 3
    # the next run resumes from the step-6 checkpoint it wrote, and the renamed folder is left as it was
    with pytest.warns(RuntimeWarning, match=message):
        again = fit(tmp_path / "run")
    assert again["resumed_from"].endswith("step-00000006") and again["steps_this_run"] == 0
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-00000003", "step-00000006", "step-99999999"]
