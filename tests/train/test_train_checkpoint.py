"""Checkpoint files: structures round-trip through JSON + safetensors exactly (no pickle), the
manifest catches corruption, saves are atomic and keep the last K, and a checkpoint directory is
a model directory that ``from_pretrained`` loads."""

import json
import random

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo.train.checkpoint import (CheckpointCorrupted, CheckpointManager, encode, read_part,
                                       rng_state, set_rng_state, verify, write_part)


def test_encode_decode_round_trip_with_ties_tuples_int_keys_and_arrays(tmp_path):
    shared = torch.randn(3, 2)
    obj = {"state": {0: {"exp_avg": torch.randn(4), "step": torch.tensor(3.0)}, 1: {"m": shared}},
           "param_groups": [{"params": [0, 1], "betas": (0.9, 0.99), "lr": 1e-3, "amsgrad": False, "x": None}],
           "tied": shared, "rng": ("MT19937", np.arange(5, dtype=np.uint32), 2, 0, 0.0), "empty": torch.zeros(0)}
    skeleton, tensors = encode(obj)
    json.dumps(skeleton)  # JSON-able
    assert len(tensors) == 4  # the tied tensor is stored once
    write_part(tmp_path, "part", obj)
    back = read_part(tmp_path, "part")
    assert back["param_groups"][0]["betas"] == (0.9, 0.99) and list(back["state"]) == [0, 1]
    assert torch.equal(back["state"][0]["exp_avg"], obj["state"][0]["exp_avg"])
    assert back["tied"] is back["state"][1]["m"] and torch.equal(back["tied"], shared)
    assert back["rng"][0] == "MT19937" and back["rng"][1].dtype == np.uint32 and back["rng"][1].tolist() == [0, 1, 2,
                                                                                                              3, 4]
    assert back["empty"].shape == (0,)
    with pytest.raises(TypeError, match="cannot store a value of type object"):
        encode({"bad": object()})


def test_rng_states_restore_every_generator(tmp_path):
    write_part(tmp_path, "rng", rng_state())
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    set_rng_state(read_part(tmp_path, "rng"))
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def save(manager, step, value):
    return manager.save(step, lambda: {"trainer": {"step": step}}, {"rng": rng_state()},
                        lambda: ({"w": torch.full((2,), float(value))}, None))


def test_manager_keeps_last_k_verifies_and_falls_back(tmp_path):
    manager = CheckpointManager(tmp_path, keep=2)
    for step in (1, 2, 3):
        save(manager, step, step)
    assert manager.steps() == [2, 3]
    assert manager.latest().name == "step-00000003"
    assert json.loads((manager.path(3) / "manifest.json").read_text())["step"] == 3
    (manager.path(3) / "trainer.json").write_text('{"step": 4}')  # same size, different bytes
    with pytest.raises(CheckpointCorrupted, match="sha256"):
        verify(manager.path(3))
    with pytest.warns(RuntimeWarning, match="step-00000003 is corrupted"):
        assert manager.latest().name == "step-00000002"
    (manager.path(2) / "model.safetensors").write_bytes(b"short")
    with pytest.warns(RuntimeWarning), pytest.raises(CheckpointCorrupted, match="5 bytes, manifest says"):
        manager.latest()


def test_interrupted_save_is_never_used(tmp_path):
    manager = CheckpointManager(tmp_path, keep=3)
    save(manager, 1, 1)
    (tmp_path / ".tmp-step-00000002").mkdir()  # a crash mid-save leaves only a temporary folder
    (tmp_path / "step-00000003").mkdir()  # or a folder without manifest
    with pytest.warns(RuntimeWarning, match="no manifest.json"):
        assert manager.latest().name == "step-00000001"
    save(manager, 2, 2)  # a new save replaces the stale temporary folder
    assert not (tmp_path / ".tmp-step-00000002").exists() and manager.path(2).is_dir()


def test_training_checkpoint_is_a_model_directory(tmp_path):
    from tiny_objectives import fit_random

    fit_random(tmp_path, 2, 2)
    checkpoint = tmp_path / "checkpoints/step-00000002"
    model = babelzoo.from_pretrained(checkpoint)
    from safetensors.torch import load_file

    stored = load_file(checkpoint / "model.safetensors")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in stored.items())
    assert model.lm_head.decoder.weight is model.embeddings.word.weight  # tied again on load
    assert not list(checkpoint.glob("*.pt")) and not list(checkpoint.glob("*.bin"))


def test_a_large_tensor_of_mostly_zero_rows_stores_its_other_rows_and_rebuilds_bit_for_bit(tmp_path):
    from babelzoo.train.checkpoint import SPARSE_MIN_ELEMENTS

    rows = SPARSE_MIN_ELEMENTS // 8 + 1
    moments = torch.zeros(rows, 8)
    moments[3] = torch.randn(8)
    moments[7, 2] = -0.0  # a signed zero is a written value, kept as such
    moments[11, 0] = float("nan")
    counts = torch.zeros(rows, 8, dtype=torch.int64)
    counts[5, 1] = 9
    dense = torch.randn(rows, 8)  # no zero rows: stored whole
    obj = {"exp_avg": moments, "tied": moments, "counts": counts, "dense": dense}
    skeleton, tensors = encode(obj)
    assert skeleton["exp_avg"] == {"__rows__": "exp_avg", "shape": [rows, 8]}
    assert skeleton["tied"] == {"__alias__": "exp_avg"}
    assert tensors["exp_avg#rows"].tolist() == [3, 7, 11] and tensors["exp_avg"].shape == (3, 8)
    assert tensors["counts#rows"].tolist() == [5] and skeleton["dense"] == {"__tensor__": "dense"}
    write_part(tmp_path, "part", obj)
    back = read_part(tmp_path, "part")
    for name in ("exp_avg", "counts", "dense"):
        assert back[name].dtype == obj[name].dtype and back[name].shape == obj[name].shape
        assert torch.equal(back[name].view(torch.int32 if name != "counts" else torch.int64),
                           obj[name].view(torch.int32 if name != "counts" else torch.int64)), name  # bit for bit
    assert back["tied"] is back["exp_avg"]
