"""Data parallelism on CPU (gloo): 2 ranks with the same global batch as 1 process reach the
same parameters, with DDP, with FSDP2 (fully_shard), with gradient accumulation under
``no_sync``, with a contrastive loss whose negatives are gathered across ranks, across a
checkpoint and resume in the middle (FSDP's sharded state and DDP's replicated one), and when
the ranks built different initial weights (rank 0's are used)."""

import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from babelzoo.train.distributed import all_gather_with_grad

from tiny_objectives import fit_fixed, one_thread  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")

RUNS = {  # name: (strategy, batch_size per rank, grad_accum, contrastive)
    "ddp": ("ddp", 4, 1, True),
    "fsdp": ("fsdp", 4, 1, True),
    "ddp_accum": ("ddp", 2, 2, False),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_gather_with_uneven_rows(rank: int) -> None:
    """Rank r holds r+1 rows of value r+1 and weighs the gathered rows by r+1; the gradient of
    the sum of both ranks' losses with respect to any row is 1 + 2 = 3."""
    x = torch.full((rank + 1, 2), float(rank + 1), requires_grad=True)
    gathered = all_gather_with_grad(x)
    assert gathered.tolist() == [[1.0, 1.0], [2.0, 2.0], [2.0, 2.0]]
    (gathered * (rank + 1)).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 3.0)), x.grad


def worker(rank: int, port: int, root: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        check_gather_with_uneven_rows(rank)
        for name, (strategy, batch_size, accum, contrastive) in RUNS.items():
            # rank 1 starts from other weights: DDP and FSDP must both begin from rank 0's
            settings = dict(distributed=strategy, batch_size=batch_size, grad_accum=accum, contrastive=contrastive,
                            model_seed=rank)
            if name == "ddp":
                fit_fixed(f"{root}/{name}", **settings)
            else:  # stop after 2 steps and resume (constant lr: max_steps does not change the schedule)
                fit_fixed(f"{root}/{name}", max_steps=2, checkpoint_every=2, **settings)
                fit_fixed(f"{root}/{name}", **settings)
    finally:
        dist.destroy_process_group()


def final_state(path) -> dict:
    checkpoint = path / "checkpoints/step-00000004"
    heads = checkpoint / "objectives.safetensors"  # absent when the objective has no parameters
    return {**load_file(checkpoint / "model.safetensors"),
            **{f"heads.{k}": v for k, v in (load_file(heads) if heads.is_file() else {}).items()}}


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    # spawn, not fork: once this process has run torch.export (the ONNX tests), PyTorch refuses
    # autograd in a forked child ("Unable to handle autograd's threading ... fork")
    mp.start_processes(worker, args=(free_port(), str(root)), nprocs=2, start_method="spawn")
    return root


@pytest.mark.parametrize("name", list(RUNS))
def test_two_ranks_match_one_process(name, two_rank_runs, tmp_path):
    strategy, batch_size, accum, contrastive = RUNS[name]
    summary = fit_fixed(tmp_path, batch_size=batch_size * accum * 2, contrastive=contrastive)
    assert summary["world_size"] == 1
    one, two = final_state(tmp_path), final_state(two_rank_runs / name)
    assert one.keys() == two.keys()
    start = {k: v for k, v in final_state_at_init(contrastive).items()}
    moved = max(float((one[k] - start[k]).abs().max()) for k in start)
    assert moved > 1e-3  # the runs trained
    for key in one:
        assert torch.allclose(one[key], two[key], atol=1e-6, rtol=0), (key, float((one[key] - two[key]).abs().max()))


def final_state_at_init(contrastive: bool) -> dict:
    from tiny_objectives import FixedMaskMLM, tiny_model
    from babelzoo.zoo.checkpoint_io import model_state

    model = tiny_model(torch.float64, dropout=0.0)
    heads = FixedMaskMLM(contrastive=contrastive).double()
    return {**model_state(model), **{f"heads.{k}": v for k, v in heads.state_dict().items()}}


def test_all_gather_with_grad_without_process_group_is_identity():
    x = torch.randn(3, 4, requires_grad=True)
    assert all_gather_with_grad(x) is x
