"""The device's peaks (matmul in each precision, copy bandwidth) and :mod:`benchmarks.speed`'s cells."""

from __future__ import annotations

import time

import torch

from benchmarks._speed.common import matmul_peak, sync

from .common import Context, Skip, expect


def check_peaks(ctx: Context) -> dict:
    size = ctx.size(8192, 256)
    out = {}
    for label, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                               ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            out[f"matmul_{label}_tflops"] = matmul_peak(ctx.device, dtype, size, repeats=ctx.size(10, 2))["wall"] / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
    n = ctx.size(1 << 29, 1 << 20)  # 2 GiB of float32 on the GPU
    a = torch.rand(n, device=ctx.device)
    b = torch.empty_like(a)
    times = []
    for _ in range(ctx.size(10, 2)):
        sync(ctx.device)
        start = time.perf_counter()
        b.copy_(a)
        sync(ctx.device)
        times.append(time.perf_counter() - start)
    out["copy_gb_per_s"] = 2 * a.numel() * 4 / min(times) / 1e9  # bytes read plus bytes written
    expect(all(v > 0 for v in out.values()), f"peaks: {out}")
    ctx.peaks = out
    return out


def check_speed(ctx: Context) -> dict:
    """:mod:`benchmarks.speed`'s training and inference cells, babelzoo beside transformers."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise Skip("transformers is not installed (the peer side of benchmarks/speed.py)") from None
    from benchmarks import speed

    report = speed.main(ctx.speed_args + ["--out", str(ctx.work / "speed.json")])
    training = {f"{config}/{dtype}": {"babelzoo_tokens_per_s": row["babelzoo"]["tokens_per_s"],
                                      "transformers_tokens_per_s": row["transformers"]["tokens_per_s"],
                                      "ratio": row["ratio"], "babelzoo_mfu": row["babelzoo"]["mfu"],
                                      "transformers_mfu": row["transformers"]["mfu"]}
                for config, section in report.get("training", {}).items() for dtype, row in section["dtypes"].items()}
    inference = {dtype: {"ratio": row["ratio"], "ratio_vs_sorted": row["ratio_vs_sorted"],
                         "ratio_vs_padded": row["ratio_vs_padded"], "max_abs_diff": row["max_abs_diff"]}
                 for dtype, row in report.get("inference", {}).get("dtypes", {}).items()}
    return {"args": ctx.speed_args, "training": training, "inference": inference,
            "peaks": report.get("peaks"), "targets": report.get("targets"),
            "markdown": (ctx.work / "speed.md").read_text(encoding="utf-8")}
