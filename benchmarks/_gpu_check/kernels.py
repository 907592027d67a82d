"""Mixed precision, the fused optimizer and attention: the device's kernels against references."""

from __future__ import annotations

import math
from typing import Any

import torch

from benchmarks._speed.common import sync

from .common import Context, expect, relative_error


def check_grad_scaler(ctx: Context) -> dict:
    """An fp16 overflow skips the fused AdamW step on the device and backs the scale off."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.settings import OptimConfig
    from babelzoo.train.optim import build_optimizer
    from babelzoo.train.precision import Precision, skips_on_device

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)).to(ctx.device)
    optimizer = build_optimizer(model, TrainConfig(optim=OptimConfig(optimizer="adamw", lr=1e-3)), fused=True)
    precision = Precision("fp16", ctx.device)
    x = torch.randn(32, 64, device=ctx.device)

    def step(blow_up: float) -> Any:
        with precision.autocast():
            loss = (model(x) * blow_up).float().pow(2).mean()
        precision.backward(loss)
        result = precision.step(optimizer, model.parameters(), max_grad_norm=1.0)
        optimizer.zero_grad(set_to_none=True)
        return result

    step(1.0)
    before = [p.detach().clone() for p in model.parameters()]
    steps_before = [int(s["step"]) for s in optimizer.state.values()]
    scale = precision.scale
    result = step(1e30)  # overflows fp16 (max 65504) in the forward: non-finite gradients
    unchanged = all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    steps_after = [int(s["step"]) for s in optimizer.state.values()]
    out = {"fused": bool(optimizer.defaults.get("fused")), "skips_on_device": skips_on_device(optimizer),
           "skipped": bool(result.skipped), "parameters_unchanged": unchanged, "scale_before": scale,
           "scale_after": precision.scale, "optimizer_steps": [steps_before[0], steps_after[0]]}
    step(1.0)
    out["updated_after"] = not all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    out["skipped_total"] = precision.skipped
    expect(out["fused"] and out["skips_on_device"], "the trainer's AdamW is not the fused one")
    expect(out["skipped"] and unchanged and steps_before == steps_after, f"overflow not skipped cleanly: {out}")
    expect(out["scale_after"] == scale / 2 and precision.skipped == 1 and out["updated_after"], f"scaler: {out}")
    return out


def check_fused_adamw(ctx: Context) -> dict:
    """Fused AdamW against the multi-tensor one: three steps on the same gradients."""
    torch.manual_seed(0)
    shapes = [(512, 512), (512,), (2048, 512), (7,)]
    params = [torch.randn(s, device=ctx.device) for s in shapes]
    grads = [[torch.randn(s, device=ctx.device) for s in shapes] for _ in range(3)]
    sides = {}
    for kind in ("fused", "foreach"):
        copies = [torch.nn.Parameter(p.clone()) for p in params]
        opt = torch.optim.AdamW(copies, lr=1e-3, weight_decay=0.01, **{kind: True})
        for g in grads:
            for p, gi in zip(copies, g):
                p.grad = gi.clone()
            opt.step()
        sides[kind] = torch.cat([p.detach().flatten() for p in copies])
    moved = torch.cat([p.flatten() for p in params])
    # The updates (about 3e-3 here) are differences of parameters near 1, whose float32 spacing
    # is 1.2e-7: rounding alone moves the update by ~4e-5 of itself. A wrong formula moves it by
    # far more than 1e-3.
    error = relative_error(sides["fused"] - moved, sides["foreach"] - moved)
    expect(error < 1e-3, f"fused and foreach updates differ by {error:.2e} (relative)")
    return {"update_relative_difference": error}


def check_sdpa(ctx: Context) -> dict:
    """``attend`` under each SDPA backend, with a padding mask and without, against float64."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from babelzoo.zoo.layers.attention import attend

    b, h, n, d = (2, 2, 24, 16) if ctx.dry else (8, 12, 512, 64)
    dtype = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, device=ctx.device, dtype=dtype) for _ in range(3))
    lengths = torch.randint(n // 2, n + 1, (b,), device=ctx.device)
    mask = (torch.arange(n, device=ctx.device)[None, :] < lengths[:, None])[:, None, None, :]
    out: dict[str, Any] = {"dtype": str(dtype).replace("torch.", ""), "shape": [b, h, n, d]}
    for label, m in (("no_mask", None), ("padding_mask", mask)):
        scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(d)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        ref = scores.softmax(-1) @ v.double()
        row = {"default": relative_error(attend(q, k, v, mask=m), ref)}
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                        SDPBackend.MATH):
            try:
                with sdpa_kernel([backend]):
                    result = attend(q, k, v, mask=m)
                    sync(ctx.device)
                    row[backend.name.lower()] = relative_error(result, ref)
            except RuntimeError as err:  # no kernel of this backend for these inputs on this device
                row[backend.name.lower()] = f"no kernel: {str(err).splitlines()[0][:120]}"
        out[label] = row
    bound = 2e-2 if dtype == torch.bfloat16 else 1e-5
    errors = [v for row in (out["no_mask"], out["padding_mask"]) for v in row.values() if isinstance(v, float)]
    expect(all(e < bound for e in errors), f"an SDPA backend is off by more than {bound}: {out}")
    if ctx.cuda:
        fused = [name for name in ("flash_attention", "efficient_attention", "cudnn_attention")
                 if isinstance(out["padding_mask"][name], float)]
        expect(bool(fused), "no fused SDPA kernel serves a padding mask on this GPU")
    return out
