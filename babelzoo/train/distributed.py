"""Data-parallel training under ``torchrun``: process-group set-up, DDP / FSDP2 wrapping, rank
sharding, and an all-gather that carries gradients (for contrastive negatives across ranks).

Launch with ``torchrun --nproc-per-node N -m babelzoo.cli pretrain --config R.yaml``: torchrun sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous address, and
:func:`init_distributed` picks ``nccl`` on GPUs and ``gloo`` on CPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..errors import BabelzooError
from ..zoo.config import ConfigError


class DeviceUnavailable(BabelzooError, RuntimeError):
    """The device a config asks for is not there."""


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    owns_group: bool = False  # True when init_distributed created the process group

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(spec: str, local_rank: int = 0) -> torch.device:
    """``auto``: the GPU of this local rank when CUDA is available, else the CPU."""
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise DeviceUnavailable(f"device={spec!r} requested, but torch sees no CUDA device; use device=cpu, or "
                                "device=auto (a GPU when there is one)")
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the process group described by torchrun's environment variables (or the one
    already initialised by the caller). A single process without those variables runs alone."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
        dev = resolve_device(device, local_rank)
        return DistInfo(rank, world, local_rank, dev, owns_group=False)
    world = int(os.environ.get("WORLD_SIZE", 1))
    dev = resolve_device(device, local_rank)
    if world <= 1:
        return DistInfo(0, 1, 0, dev)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, dev, owns_group=True)


def shutdown(info: DistInfo) -> None:
    if info.owns_group and dist.is_initialized():
        dist.destroy_process_group()


def choose_strategy(strategy: str, info: DistInfo) -> str:
    """``auto`` means DDP when there is more than one process, nothing otherwise. ``ddp`` and
    ``fsdp`` on a single process mean nothing too, unless the caller initialised a process group
    (of one process, say, to run the sharded code path on one GPU): then they are honoured."""
    if strategy == "auto":
        return "ddp" if info.distributed else "none"
    if strategy in ("ddp", "fsdp") and not info.distributed and not (dist.is_available() and dist.is_initialized()):
        return "none"  # one process: there is nothing to replicate or shard
    return strategy


def wrap(module: nn.Module, strategy: str, info: DistInfo, find_unused_parameters: bool = True) -> nn.Module:
    """Wrap ``module`` for data parallelism.

    ``ddp``: one full replica per rank, gradients all-reduced in buckets during backward.
    ``fsdp``: FSDP2 ``fully_shard`` (parameters, gradients and optimizer state sharded across
    ranks; each Transformer block gathers its weights just in time), applied per block, then to
    the root so that the embeddings and heads are sharded too.
    """
    if strategy == "none":
        return module
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(module, device_ids=[info.device.index] if info.device.type == "cuda" else None,
                                       find_unused_parameters=find_unused_parameters)
    if strategy == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        from ..zoo.layers import TransformerBlock

        # DDP broadcasts rank 0's weights when it wraps; fully_shard keeps each rank's own slice,
        # so make every rank start from rank 0's weights first.
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor.data, src=0)
        mesh = init_device_mesh(info.device.type, (info.world_size,))
        for block in [m for m in module.modules() if isinstance(m, TransformerBlock)]:
            fully_shard(block, mesh=mesh)
        fully_shard(module, mesh=mesh)
        return module
    raise ConfigError(f"unknown distributed strategy {strategy!r}; known: none, ddp, fsdp")


def unwrap(module: nn.Module) -> nn.Module:
    """The module inside a DDP wrapper (FSDP2 shards in place, so it has no wrapper)."""
    return getattr(module, "module", module) if type(module).__name__ == "DistributedDataParallel" else module


# --- sharding ----------------------------------------------------------------------------------

# --- collectives -------------------------------------------------------------------------------

def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    if is_distributed():
        dist.all_reduce(tensor)
    return tensor


_HOST_GROUPS: dict[int, Any] = {}


def host_group():
    """A gloo group over the ranks of the default group, for collectives of host values: a
    flag reduced through it never waits for the accelerator's queue. Created on first use
    (every rank must call this at the same point), None outside a process group."""
    if not is_distributed():
        return None
    if dist.get_backend() == "gloo":
        return dist.group.WORLD
    key = id(dist.group.WORLD)
    if key not in _HOST_GROUPS:
        _HOST_GROUPS[key] = dist.new_group(backend="gloo")
    return _HOST_GROUPS[key]


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any rank: a collective of host values over
    :func:`host_group`, which never waits for the device (every rank must call it)."""
    group = host_group()
    if group is None:
        return bool(flag)
    value = torch.tensor([float(flag)])
    dist.all_reduce(value, group=group)
    return bool(value[0] > 0)


def broadcast_object(obj: Any, src: int = 0) -> Any:
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_with_grad(x: torch.Tensor) -> torch.Tensor:
    """Concatenate ``x`` [n_r, ...] from every rank along dim 0, in rank order, keeping the
    autograd graph of this rank's rows (see :func:`babelzoo.objectives.gather.gather_with_grad`,
    which also returns where this rank's rows start). Without a process group it returns ``x``."""
    from ..objectives.gather import gather_with_grad

    return gather_with_grad(x)[0]


def rank_and_world() -> tuple[int, int]:
    if is_distributed():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1

