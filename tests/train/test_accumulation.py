"""Gradient accumulation: k micro-batches of B/k give the same update as one batch of B."""

import json

import pytest
import torch
from safetensors.torch import load_file

from tiny_objectives import fit_fixed, one_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def final(path):
    checkpoint = path / "checkpoints/step-00000004"
    return {**load_file(checkpoint / "model.safetensors"),
            **{f"optimizer/{k}": v for k, v in load_file(checkpoint / "optimizer.safetensors").items()}}


@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_accumulated_micro_batches_equal_one_large_batch(tmp_path, optimizer):
    runs = {}
    for batch_size, accum in ((8, 1), (4, 2), (2, 4)):
        out = tmp_path / f"b{batch_size}"
        fit_fixed(out, contrastive=False, batch_size=batch_size, grad_accum=accum, optimizer=optimizer,
                  max_grad_norm=0.5)
        runs[accum] = (final(out), [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()])
    reference, ref_log = runs[1]
    for accum in (2, 4):
        state, log = runs[accum]
        for key in reference:
            assert torch.allclose(reference[key], state[key], atol=1e-6, rtol=0), (accum, key)
        assert [r["loss"] for r in log] == pytest.approx([r["loss"] for r in ref_log], abs=1e-9)
        assert [r["tokens"] for r in log] == [r["tokens"] for r in ref_log]
    assert all(r["grad_norm"] > 0.5 for r in ref_log)  # clipping was active, and commutes with accumulation
