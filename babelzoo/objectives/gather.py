"""All-gather across DDP ranks that keeps the autograd graph of the local part.

Contrastive objectives (InfoXLM's XLCo, LaBSE's translation ranking) score each query against
the keys of the *global* batch, so every rank sees the negatives of all the others (LaBSE's
"cross-accelerator negative sampling", Feng et al. 2022). ``torch.distributed.all_gather``
returns tensors without gradient; :func:`gather_with_grad` is differentiable with respect to
this rank's own rows: its backward pass sums the gradient of those rows over all ranks (every
rank's loss used them as negatives) and hands it to the local tensor. With each rank's loss averaged
over its own queries and DDP averaging gradients over ranks, the update equals that of one
process holding the whole global batch.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _GatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        rank = dist.get_rank()
        ctx.sizes, ctx.rank = sizes, rank
        padded = x.new_zeros((max(sizes), *x.shape[1:]))
        padded[: x.shape[0]] = x
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        return torch.cat([part[:n] for part, n in zip(parts, sizes)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)  # Σ over ranks of ∂L_r/∂(gathered rows)
        start = sum(ctx.sizes[: ctx.rank])
        return grad[start: start + ctx.sizes[ctx.rank]], None


def gather_with_grad(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Concatenate ``x`` [n_r, ...] of every rank along dim 0 in rank order and return it with
    the offset of this rank's rows (so query i's positive is row ``offset + i``). Ranks may hold
    different numbers of rows. Without a process group (or with one rank) returns ``(x, 0)``."""
    if not _distributed():
        return x, 0
    count = torch.tensor([x.shape[0]], device=x.device)
    counts = [torch.zeros_like(count) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, count)
    sizes = [int(c) for c in counts]
    return _GatherWithGrad.apply(x, sizes), sum(sizes[: dist.get_rank()])
