"""Cross-rank negatives: gather_with_grad over two real (gloo) processes gives the same
gradient as one process holding the whole batch."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from babelzoo.objectives import additive_margin_loss, gather_with_grad


def global_batch():
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 3, generator=g)
    return weight, torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)


def bidirectional(src, tgt, src_all, tgt_all, offset):
    return (additive_margin_loss(src, tgt_all, 0.3, 5.0, offset)[0]
            + additive_margin_loss(tgt, src_all, 0.3, 5.0, offset)[0])


def worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        weight, xs, ys = global_batch()
        weight.requires_grad_(True)
        # Unequal shards: rank 0 holds rows 0-1, rank 1 rows 2-5.
        rows = slice(0, 2) if rank == 0 else slice(2, 6)
        gathered, offset = gather_with_grad(xs[rows] * (rank + 1))
        # Equal shards for the gradient check: rows 0-2 and 3-5.
        half = slice(3 * rank, 3 * rank + 3)
        src, tgt = xs[half] @ weight, ys[half] @ weight
        src_all, offset_src = gather_with_grad(src)
        tgt_all, offset_tgt = gather_with_grad(tgt)
        assert offset_src == offset_tgt == 3 * rank
        bidirectional(src, tgt, src_all, tgt_all, offset_src).backward()
        torch.save({"gathered": gathered.detach(), "offset": offset, "grad": weight.grad}, f"{out_dir}/{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_gather_without_process_group_is_identity():
    x = torch.randn(3, 2)
    gathered, offset = gather_with_grad(x)
    assert gathered is x and offset == 0


def test_two_ranks_match_one_process(tmp_path):
    mp.spawn(worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "1.pt", weights_only=True)
    weight, xs, ys = global_batch()
    expected = torch.cat([xs[0:2], xs[2:6] * 2])
    assert torch.equal(r0["gathered"], expected) and torch.equal(r1["gathered"], expected)
    assert (r0["offset"], r1["offset"]) == (0, 2)
    # DDP averages gradients over ranks; that average equals the single-process gradient of the
    # loss over the whole batch (each rank's loss is a mean over its own queries).
    weight.requires_grad_(True)
    src, tgt = xs @ weight, ys @ weight
    bidirectional(src, tgt, src, tgt, 0).backward()
    assert torch.allclose((r0["grad"] + r1["grad"]) / 2, weight.grad, atol=1e-5)
    # Without the cross-rank gradient sum the ranks would disagree with it.
    assert not torch.allclose(r0["grad"], weight.grad, atol=1e-3)
