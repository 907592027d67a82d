"""Exact resume: a run stopped by SIGTERM (checkpoint at the step boundary, clean exit), resumed,
killed by SIGKILL and resumed again from its last periodic checkpoint produces the same loss
sequence and final weights as an uninterrupted run; a corrupted newest checkpoint falls back to
the previous one."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tiny_objectives import HERE, fit_random, one_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = HERE.parents[1]
SCRIPT = HERE / "tiny_objectives.py"
STEPS = 60  # long enough that the victim cannot finish between two polls of its log


def launch(output_dir: Path, max_steps: int, checkpoint_every: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]), OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, str(SCRIPT), str(output_dir), str(max_steps), str(checkpoint_every)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def records(output_dir: Path) -> list[dict]:
    path = output_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line being written
    return out


def wait_for_step(proc: subprocess.Popen, output_dir: Path, step: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        logged = records(output_dir)
        if logged and logged[-1]["step"] >= step:
            return logged[-1]["step"]
        if proc.poll() is not None:
            raise AssertionError(f"run ended before step {step}: {proc.stdout.read()}")
        time.sleep(0.005)
    proc.kill()
    raise AssertionError(f"no step {step} within {timeout}s")


def weights(checkpoint: Path) -> dict:
    return {**load_file(checkpoint / "model.safetensors"),
            **{f"optimizer/{k}": v for k, v in load_file(checkpoint / "optimizer.safetensors").items()}}


def test_sigterm_and_sigkill_then_resume_give_identical_losses(tmp_path):
    run = tmp_path / "interrupted"
    # 1. SIGTERM: the run checkpoints at the next step boundary and exits cleanly
    proc = launch(run, STEPS, 5)
    wait_for_step(proc, run, 2)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, output
    summary = json.loads((run / "summary.json").read_text())
    stopped = records(run)[-1]["step"]
    assert summary["stopped_by_signal"] == "SIGTERM" and stopped < STEPS
    assert summary["checkpoint"].endswith(f"step-{stopped:08d}")
    assert json.loads((Path(summary["checkpoint"]) / "trainer.json").read_text())["step"] == stopped

    # 2. resumed from there, then SIGKILL: no chance to save anything
    proc = launch(run, STEPS, 5)
    killed_at = wait_for_step(proc, run, stopped + 8)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert killed_at < STEPS, "the run finished before it could be killed"
    saved = sorted(int(p.name.split("-")[1]) for p in (run / "checkpoints").glob("step-*"))
    assert len(saved) <= 2 and saved[-1] % 5 == 0 and saved[-1] > stopped, saved  # periodic saves, keep 2

    # 3. resumed again, to the end
    summary = fit_random(run, STEPS, 5)
    assert summary["resumed_from"].endswith(f"step-{saved[-1]:08d}")

    reference = tmp_path / "reference"
    fit_random(reference, STEPS, 5)
    expected = [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in records(reference)]
    got = [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in records(run)]
    assert [s for s, *_ in expected] == list(range(1, STEPS + 1))
    assert got == expected  # bit-identical: same batches, masks, dropout and optimizer state
    final = f"checkpoints/step-{STEPS:08d}"
    a, b = weights(reference / final), weights(run / final)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_measuring_the_matmul_peak_on_resume_leaves_dropout_as_it_was(tmp_path):
    # a resumed run measures the peak again (for its MFU figures) after the checkpoint's random
    # states came back: it must not draw from them, or every later dropout mask shifts
    settings = dict(schedule="constant", warmup_steps=0, measure_mfu=True)
    uninterrupted = fit_random(tmp_path / "a", 8, 4, **settings)
    fit_random(tmp_path / "b", 4, 4, **settings)
    resumed = fit_random(tmp_path / "b", 8, 4, **settings)
    assert resumed["steps_this_run"] == 4 and resumed["final_loss"] == uninterrupted["final_loss"]


def test_measure_matmul_peak_draws_nothing_from_the_global_generator():
    from babelzoo.train.flops import measure_matmul_peak

    before = torch.get_rng_state()
    assert measure_matmul_peak("cpu", torch.float32, size=96, repeats=1) > 0
    assert torch.equal(torch.get_rng_state(), before)


def test_corrupted_latest_checkpoint_falls_back_to_previous(tmp_path):
    fit_random(tmp_path / "full", 6, 3)
    fit_random(tmp_path / "broken", 6, 3)
    bad = tmp_path / "broken/checkpoints/step-00000006/optimizer.safetensors"
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    # a save that never finished (no manifest, temporary name) is ignored as well
    (tmp_path / "broken/checkpoints/.tmp-step-00000009").mkdir()
    with pytest.warns(RuntimeWarning, match="step-00000006 is corrupted.*sha256"):
        summary = fit_random(tmp_path / "broken", 6, 3)
    assert summary["resumed_from"].endswith("step-00000003")
    assert summary["steps"] == 6 and summary["steps_this_run"] == 3  # the summary covers the whole run
    a = weights(tmp_path / "full/checkpoints/step-00000006")
    b = weights(tmp_path / "broken/checkpoints/step-00000006")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_all_checkpoints_corrupted_is_an_error(tmp_path):
    from babelzoo.train.checkpoint import CheckpointCorrupted

    fit_random(tmp_path, 2, 2)
    (tmp_path / "checkpoints/step-00000002/manifest.json").write_text("{not json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CheckpointCorrupted, match="no usable checkpoint.*unreadable manifest"):
            fit_random(tmp_path, 4, 2)
