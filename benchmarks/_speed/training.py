"""Training throughput, side by side: the same MLM step on the same batch, interleaved."""

from __future__ import annotations

import gc

import torch

from babelzoo.train.flops import count_flops, model_flops_per_token

from .common import (
    CONFIGS,
    DTYPES,
    SIDES,
    TrainStep,
    build_pair,
    load_average,
    loss_fn,
    matmul_peak,
    median,
    paired_ratio,
    timed,
)


def loss_check(ours, hf, batch, specials) -> dict[str, float]:
    """Same loss on both sides (babelzoo's MLM objective, transformers' labels= loss): fp32,
    dropout off."""
    ours.eval(), hf.eval()
    with torch.no_grad():
        a = float(loss_fn("babelzoo", ours, batch, specials)())
        b = float(loss_fn("transformers", hf, batch, specials)())
    ours.train(), hf.train()
    return {"babelzoo": a, "transformers": b, "abs_diff": abs(a - b)}


GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")


def gemm_profile(step: TrainStep) -> dict[str, float]:
    """Where one step's time goes (CPU): torch.profiler's self time of the matrix multiplies
    against that of every operator (a multi-threaded operator counts its wall time once)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step.forward_backward()
        step.update()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    gemm = sum(e.self_cpu_time_total for e in events if e.key in GEMM_OPS) / 1e6
    return {"gemm_s": gemm, "op_s": total, "gemm_share": gemm / total}


def train_section(name: str, dtypes: list[str], batch: dict, tok, args, device, log) -> dict:
    ours, hf = build_pair(name, device, args.seed)
    batch = {k: v.to(device) for k, v in batch.items()}
    tokens = int(batch["attention_mask"].sum())
    masked = int(batch["labels"].ne(-100).sum())
    result = {"config": CONFIGS[name], "batch": list(batch["input_ids"].shape), "masked_tokens": masked,
              "loss_check": loss_check(ours, hf, batch, tok.specials),
              "model_flops_per_token": model_flops_per_token(ours, args.seq, masked / tokens), "dtypes": {}}
    log(f"[{name}] loss check {result['loss_check']}")
    if args.compile:  # after the eager loss check; the warm-up steps below pay the compile
        ours.compile()
    models = {"babelzoo": ours, "transformers": hf}
    for dname in dtypes:
        dtype = DTYPES[dname]
        steps = {side: TrainStep(side, models[side], batch, device, dtype, tok.specials) for side in SIDES}
        executed = {}
        for side in SIDES:  # warm-up: the first step also counts executed FLOPs
            executed[side] = count_flops(steps[side].forward_backward) / tokens
            steps[side].update()
        for _ in range(args.warmup - 1):
            for side in SIDES:
                steps[side].forward_backward()
                steps[side].update()
        # The machine's speed can drift during a run: a matmul peak measured right before this
        # cell's repeats gives a second MFU ("adjacent") beside the one against the run's best peak.
        adjacent = matmul_peak(device, dtype or torch.float32, 4096 if device.type == "cuda" else 1024)
        times = {side: {"step": [], "fwd_bwd": [], "step_cpu": []} for side in SIDES}
        for i in range(args.repeats):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                w1, c1 = timed(steps[side].forward_backward, device)
                w2, c2 = timed(steps[side].update, device)
                times[side]["fwd_bwd"].append(w1)
                times[side]["step"].append(w1 + w2)
                times[side]["step_cpu"].append(c1 + c2)
        out = {}
        for side in SIDES:
            t = {k: median(v) for k, v in times[side].items()}
            out[side] = {"tokens_per_s": tokens / t["step"], "fwd_bwd_tokens_per_s": tokens / t["fwd_bwd"],
                         "step_s": t["step"], "step_s_all": times[side]["step"], "fwd_bwd_s": t["fwd_bwd"],
                         "executed_flops_per_token": executed[side]}
            if device.type == "cpu":
                out[side]["cpu_time_tokens_per_s"] = tokens / (t["step_cpu"] / torch.get_num_threads())
                out[side]["profile"] = {**gemm_profile(steps[side]), "tokens": tokens}
        # Ratios: median over repeats of transformers' time ÷ babelzoo's time in the same repeat
        # (adjacent steps see the same machine load).
        out["ratio"] = paired_ratio(times, "step")
        out["ratio_fwd_bwd"] = paired_ratio(times, "fwd_bwd")
        if device.type == "cpu":
            out["ratio_cpu_time"] = paired_ratio(times, "step_cpu")
        out["load_average"] = load_average()
        out["adjacent_peak"] = adjacent
        result["dtypes"][dname] = out
        log(f"[{name} {dname}] babelzoo {out['babelzoo']['tokens_per_s']:.0f} tok/s, transformers "
            f"{out['transformers']['tokens_per_s']:.0f} tok/s, ratio {out['ratio']:.2f} "
            f"(fwd+bwd {out['ratio_fwd_bwd']:.2f}), load {out['load_average']}")
        del steps
        gc.collect()
    return result


def add_mfu(training: dict, peaks: dict) -> None:
    """MFU = model FLOP/s ÷ matmul peak in the step's precision; HFU uses executed FLOPs."""
    for result in training.values():
        for dname, out in result["dtypes"].items():
            peak = peaks[dname]
            for side in SIDES:
                row = out[side]
                row["mfu"] = row["tokens_per_s"] * result["model_flops_per_token"] / peak["wall"]
                row["hfu"] = row["tokens_per_s"] * row["executed_flops_per_token"] / peak["wall"]
                if "adjacent_peak" in out:
                    row["mfu_adjacent"] = row["tokens_per_s"] * result["model_flops_per_token"] / out["adjacent_peak"]["wall"]
                if "cpu_time_tokens_per_s" in row:
                    row["mfu_cpu_time"] = row["cpu_time_tokens_per_s"] * result["model_flops_per_token"] / peak["cpu_time"]
                if "profile" in row:  # how fast the matrix multiplies alone run (executed FLOPs)
                    p = row["profile"]
                    p["gemm_efficiency"] = row["executed_flops_per_token"] * p["tokens"] / p["gemm_s"] / peak["wall"]
