"""Sharded checkpoints (``checkpoint_format: sharded``): every rank writes its own slices through
torch.distributed.checkpoint in safetensors, nothing pickled; a 2-process FSDP2 (and DDP) run on
CPU (gloo) resumes from them on 2 processes and on 1 and ends where an uninterrupted run ends;
``from_pretrained`` and ``babelzoo convert`` assemble the model from the slices."""

import json
import shutil

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

import babelzoo
from babelzoo.cli import main as cli_main
from babelzoo.train.checkpoint import CheckpointManager, read_part
from babelzoo.errors import CheckpointError
from babelzoo.zoo.checkpoint_io import read_sharded

from test_ddp import free_port
from tiny_objectives import fit_fixed, fit_random, one_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

SHARDED = dict(checkpoint_format="sharded")


def worker(rank: int, port: int, root: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        for strategy in ("fsdp", "ddp"):
            # rank 1 starts from other weights: both strategies begin from rank 0's
            settings = dict(distributed=strategy, batch_size=4, model_seed=rank, **SHARDED)
            fit_fixed(f"{root}/{strategy}", max_steps=2, checkpoint_every=2, **settings)
            if rank == 0:  # the step-2 checkpoint, for a one-process run to resume
                shutil.copytree(f"{root}/{strategy}", f"{root}/{strategy}-then-one")
            dist.barrier()
            fit_fixed(f"{root}/{strategy}", **settings)  # resumed on 2 processes, to step 4
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two-process sharded runs stopped at step 2 and resumed to 4 (and copies of their step-2
    folders), and the uninterrupted one-process run with full checkpoints at steps 2 and 4
    (constant learning rate: stopping at step 2 does not change the schedule)."""
    root = tmp_path_factory.mktemp("sharded")
    mp.start_processes(worker, args=(free_port(), str(root)), nprocs=2, start_method="spawn")
    fit_fixed(root / "uninterrupted", batch_size=8, checkpoint_every=2)
    return root


def checkpoint(root, name, step):
    return root / name / "checkpoints" / f"step-{step:08d}"


def full_weights(folder) -> dict:
    return {**{f"model.{k}": v for k, v in load_file(folder / "model.safetensors").items()},
            **{f"objectives.{k}": v for k, v in load_file(folder / "objectives.safetensors").items()}}


def sharded_weights(folder) -> dict:
    return {**{f"model.{k}": v for k, v in read_sharded(folder / "sharded", "model.").items()},
            **{f"objectives.{k}": v for k, v in read_sharded(folder / "sharded", "objectives.").items()}}


def assert_same(ours: dict, reference: dict, earlier: dict | None = None) -> None:
    assert ours.keys() == reference.keys()
    if earlier is not None:  # the steps in between trained
        assert max(float((reference[k] - earlier[k]).abs().max()) for k in earlier) > 1e-3
    for key in reference:
        assert torch.allclose(ours[key], reference[key], atol=1e-9, rtol=0), key


@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_two_processes_resume_from_their_slices_where_an_uninterrupted_run_ends(runs, strategy):
    folder = checkpoint(runs, strategy, 2)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    # no model.safetensors: the model lives in each rank's slices; nothing is pickled
    assert "model.safetensors" not in files and all(f.endswith((".json", ".safetensors")) for f in files)
    keys = [set(load_file(folder / f)) for f in files if f.startswith("sharded/") and f.endswith(".safetensors")]
    assert len(keys) == 2  # one file a rank
    # FSDP: each rank writes its slice of every weight; a tensor every rank holds whole (DDP's
    # replicas, FSDP's step counts) is written by one rank
    weights = {k for k in keys[0] | keys[1] if k.startswith("model.")}
    assert weights <= (keys[0] & keys[1]) if strategy == "fsdp" else not (keys[0] & keys[1])
    assert set(json.loads((folder / "manifest.json").read_text())["files"]) == set(files) - {"manifest.json"}
    start = full_weights(checkpoint(runs, "uninterrupted", 2))
    assert_same(sharded_weights(folder), start)  # the same weights at step 2...
    assert_same(sharded_weights(checkpoint(runs, strategy, 4)), full_weights(checkpoint(runs, "uninterrupted", 4)),
                start)  # ...and after resuming (Adam's moments came back too)


@pytest.mark.parametrize("strategy", ["fsdp", "ddp"])
def test_one_process_resumes_the_slices_two_processes_wrote(runs, strategy):
    with pytest.warns(RuntimeWarning, match="written by 2 ranks, this run has 1"):
        summary = fit_fixed(runs / f"{strategy}-then-one", batch_size=8, **SHARDED)  # the same global batch
    assert summary["world_size"] == 1 and summary["steps_this_run"] == 2
    ours = sharded_weights(checkpoint(runs, f"{strategy}-then-one", 4))
    assert len(list((checkpoint(runs, f"{strategy}-then-one", 4) / "sharded").glob("*.safetensors"))) == 1
    assert_same(ours, full_weights(checkpoint(runs, "uninterrupted", 4)),
                full_weights(checkpoint(runs, "uninterrupted", 2)))


def test_from_pretrained_and_convert_read_a_sharded_checkpoint(runs, tmp_path):
    folder = checkpoint(runs, "fsdp", 4)
    ours = babelzoo.from_pretrained(folder).state_dict()
    theirs = babelzoo.from_pretrained(checkpoint(runs, "uninterrupted", 4)).state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.allclose(ours[k], theirs[k], atol=1e-7, rtol=0) for k in theirs)  # float32, as the model is
    assert cli_main(["convert", "--to-hf", str(tmp_path / "hf"), "--from", str(folder)]) == 0
    assert cli_main(["convert", "--to-hf", str(tmp_path / "hf-ref"), "--from",
                              str(checkpoint(runs, "uninterrupted", 4))]) == 0
    ours, theirs = load_file(tmp_path / "hf" / "model.safetensors"), load_file(tmp_path / "hf-ref" / "model.safetensors")
    assert ours.keys() == theirs.keys()
    assert all(torch.allclose(ours[k], theirs[k], atol=1e-7, rtol=0) for k in theirs)


def test_a_missing_or_damaged_slice_file_is_refused(runs, tmp_path):
    folder = shutil.copytree(checkpoint(runs, "fsdp", 4), tmp_path / "step-00000004")
    rank1 = sorted((folder / "sharded").glob("*.safetensors"))[1]
    rank1.write_bytes(rank1.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match=r"corrupted checkpoint: .*sharded/shard-00002.*manifest"):
        babelzoo.from_pretrained(folder)
    rank1.unlink()
    (folder / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match=r"the slices of '.*' hold \d+ of its \d+ elements; a rank's file is "
                                              r"missing"):
        read_sharded(folder / "sharded")


@pytest.mark.parametrize("optimizer", ["lamb", "adamw"])
def test_one_process_sharded_resume_is_bit_exact(tmp_path, optimizer):
    # dropout on: the RNG states come back too; the unused pooler has no optimizer state to save
    settings = dict(schedule="constant", warmup_steps=0, optimizer=optimizer, **SHARDED)
    uninterrupted = fit_random(tmp_path / "a", max_steps=12, checkpoint_every=6, **settings)
    fit_random(tmp_path / "b", max_steps=6, checkpoint_every=6, **settings)
    resumed = fit_random(tmp_path / "b", max_steps=12, checkpoint_every=6, **settings)
    assert resumed["steps_this_run"] == 6 and resumed["final_loss"] == uninterrupted["final_loss"]
    ours = read_sharded(checkpoint(tmp_path, "b", 12) / "sharded", "")
    theirs = read_sharded(checkpoint(tmp_path, "a", 12) / "sharded", "")
    assert ours.keys() == theirs.keys() and any(k.startswith("optimizer.state.") for k in ours)
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    values = read_part(checkpoint(tmp_path, "b", 12), "optimizer")
    assert values and all(k.startswith("param_groups.") for k in values)
    assert CheckpointManager(tmp_path / "b" / "checkpoints").latest() == checkpoint(tmp_path, "b", 12)


def test_the_batch_per_process_may_change_with_the_processes_when_the_global_batch_stays():
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.identity import ResumeMismatch, check_same_run

    saved = {"config": TrainConfig(batch_size=4).to_dict()}  # written by 2 processes: 8 examples a step

    def resume(world: int, **settings) -> None:
        check_same_run("step-2", saved, {"config": TrainConfig(**settings).to_dict()}, 2, world_sizes=(2, world))

    resume(1, batch_size=8)
    resume(1, batch_size=4, grad_accum=2)
    resume(4, batch_size=2)
    with pytest.raises(ResumeMismatch, match=r"batch_size: 4 \(checkpoint\) → 8 \(now\)"):
        resume(2, batch_size=8)  # the same processes: the global batch would double
    with pytest.raises(ResumeMismatch, match=r"batch_size: 4 \(checkpoint\) → 6 \(now\)"):
        resume(1, batch_size=6)
