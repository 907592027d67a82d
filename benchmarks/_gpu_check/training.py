"""Training through the shipped recipes: every model family in bf16 and fp16, the trainer under
``torch.compile`` and under FSDP2 against the plain run."""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path
from typing import Any, Optional

import torch

from .common import Context, Skip, expect, median

# (family, recipe, model override or None): a shipped recipe per family, on the check's data
RUNS = [
    ("transformer", "mlm_tiny", None),
    ("transformer", "xlco_tiny", None),
    ("modernbert", "mlm_tiny", "modernbert_tiny"),
    ("xlnet", "plm_tiny", None),
    ("transformer_xl", "segment_clm_tiny", None),
    ("seq2seq", "bart_denoising_tiny", None),
    ("seq2seq", "t5_span_tiny", None),
    ("seq2seq", "translation_tiny", None),
    ("rnn", "skip_thoughts_tiny", None),
    ("cove", "translation_tiny", "cove_tiny"),
    ("vision", "itm_tiny", None),
    ("speech", "speech_itc_tiny", None),
]


def recipe_config(ctx: Context, recipe: str, model: Optional[str], precision: str, name: str, **changes: Any):
    """The shipped recipe with the check's data, tokenizer, device, precision and steps."""
    from babelzoo.objectives.mixture import objective_class
    from babelzoo.train.config import load_recipe, recipe_path

    path = recipe_path(recipe)
    cfg = load_recipe(path)
    data = {}
    for objective, options in cfg.objectives.items():
        consumes = objective_class(options.get("objective", objective)).consumes
        if consumes == "media_text":
            consumes = "audio" if "speech" in (model or cfg.model) else "image"
        data[objective] = ctx.sources[consumes]
    overrides = {**cfg.model_overrides, **changes.pop("model_overrides", {})}
    overrides.pop("vocab_size", None)
    settings = dict(model=model or cfg.model, model_overrides=overrides, tokenizer={"path": str(ctx.tokenizer_dir)},
                    data=data, output_dir=str(ctx.work / "runs" / name), max_steps=ctx.steps,
                    batch_size=min(cfg.batch_size, 16 if ctx.dry else 32), precision=precision,
                    device=ctx.device.type, num_workers=0, keep_cpu_buffers=False,
                    optim={"optimizer": "adamw", "lr": 1e-4, "warmup_steps": 0},
                    checkpoints={"every": ctx.steps, "keep": 1, "resume": False},
                    logging={"every": 1, "progress": False, "tensorboard": False})
    for group in ("optim", "checkpoints", "logging"):  # a change to a group changes the settings it names
        settings[group] = {**settings[group], **changes.pop(group, {})}
    return cfg.replace(**{**settings, **changes}), path


def train(ctx: Context, recipe: str, model: Optional[str], precision: str, name: str, **changes: Any) -> dict:
    """One recipe run; its per-step losses, skips, speed and peak device memory."""
    import json

    from babelzoo.train.run import build_run

    cfg, path = recipe_config(ctx, recipe, model, precision, name, **changes)
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    start = time.perf_counter()
    run = build_run(cfg, path)
    built = time.perf_counter()
    model_, trainer = run.model, run.trainer()
    summary = trainer.fit()
    records = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "loss" in r]
    losses = [r["loss"] for r in records]
    return {"model": cfg.model, "architecture": model_.config.architecture, "precision": precision,
            "strategy": trainer.strategy,
            "parameters": sum(p.numel() for p in model_.parameters()), "steps": summary["steps"],
            "skipped": summary["skipped_steps"], "losses": losses,
            "step_s": median([r["step_time"] for r in records[1:]]),
            "tokens_per_s": summary["tokens_per_s"], "mfu": summary["mfu"],
            "peak_memory_mb": torch.cuda.max_memory_allocated(ctx.device) / 2 ** 20 if ctx.cuda else None,
            "build_s": built - start, "fit_s": time.perf_counter() - built}


def check_train(ctx: Context) -> dict:
    from babelzoo.zoo.family import FAMILIES, load_builtin_families

    load_builtin_families()
    cells, problems = {}, []
    for family, recipe, model in RUNS:
        for precision in ("bf16", "fp16"):
            key = f"{family}/{model or recipe}/{precision}"
            try:
                cell = train(ctx, recipe, model, precision, key.replace("/", "-"))
            except Exception as err:  # one family's failure must not hide the others
                problems.append(f"{key}: {type(err).__name__}: {err}")
                cells[key] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc(limit=6)}
                ctx.log(f"[train] {key}: FAILED {type(err).__name__}: {err}")
                continue
            cells[key] = cell
            bad = [x for x in cell["losses"] if not math.isfinite(x)]
            if bad or len(cell["losses"]) != ctx.steps:
                problems.append(f"{key}: {len(cell['losses'])} logged losses of {ctx.steps}, {len(bad)} not finite")
            if cell["skipped"] * 2 >= ctx.steps:
                problems.append(f"{key}: {cell['skipped']} of {ctx.steps} steps skipped")
            ctx.log(f"[train] {key}: loss {cell['losses'][0]:.3f} -> {cell['losses'][-1]:.3f}, "
                    f"{cell['skipped']} skipped, {cell['step_s'] * 1000:.1f} ms/step")
    trained = {family for family, *_ in RUNS if not any(k.startswith(family + "/") and "error" in c
                                                        for k, c in cells.items())}
    missing = sorted(set(FAMILIES.list()) - trained)
    if missing:
        problems.append(f"families not trained: {', '.join(missing)}")
    out = {"cells": cells, "families": sorted(trained)}
    expect(not problems, "; ".join(problems), out)
    return out


def check_compile(ctx: Context) -> dict:
    """``compile: true`` trains to the eager losses (dropout off); step times of both."""
    changes = {"model_overrides": {"max_positions": 128, "dropout": 0.0}}
    eager = train(ctx, "mlm_tiny", None, "bf16", "compile-eager", **changes)
    compiled = train(ctx, "mlm_tiny", None, "bf16", "compile-on", compile=True, **changes)
    error = max(abs(a - b) / abs(a) for a, b in zip(eager["losses"], compiled["losses"]))
    out = {"max_relative_loss_difference": error, "eager_step_s": eager["step_s"],
           "compiled_step_s": median(compiled_step_times(ctx)), "compile_fit_s": compiled["fit_s"],
           "eager_fit_s": eager["fit_s"]}
    expect(len(eager["losses"]) == len(compiled["losses"]) and error < 2e-2,
           f"compiled losses drift from eager by {error:.3g} (relative)")
    return out


def compiled_step_times(ctx: Context) -> list[float]:
    import json

    path = ctx.work / "runs" / "compile-on" / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    times = [r["step_time"] for r in records if "step_time" in r]
    return times[3:] or times[-1:]  # step 2 compiles, step 3 recompiles for dynamic shapes


def check_fsdp(ctx: Context) -> dict:
    """The trainer under FSDP2 on a one-process group: the plain run's losses, and a checkpoint;
    then a run with sharded checkpoints (torch.distributed.checkpoint) stopped half way and
    resumed: its losses after the resume are the uninterrupted FSDP run's, and
    ``from_pretrained`` assembles the model from its slices."""
    import torch.distributed as dist

    from babelzoo.zoo.pretrained import from_pretrained

    if not dist.is_available():
        raise Skip("torch.distributed is not available in this build")
    # a constant learning rate: stopping half way does not change the schedule
    common = dict(model_overrides={"max_positions": 128, "dropout": 0.0}, optim={"schedule": "constant"})
    plain = train(ctx, "mlm_tiny", None, "bf16", "fsdp-plain", **common)
    store = dist.FileStore(str(ctx.work / "fsdp-store"), 1)
    if ctx.cuda:
        torch.cuda.set_device(ctx.device)
        dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=ctx.device)
    else:
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    half = ctx.steps // 2
    try:
        sharded = train(ctx, "mlm_tiny", None, "bf16", "fsdp-on", distributed="fsdp", **common)
        slices = dict(distributed="fsdp", **common)
        train(ctx, "mlm_tiny", None, "bf16", "fsdp-sliced", max_steps=half,
              checkpoints={"format": "sharded", "every": half}, **slices)
        resumed = train(ctx, "mlm_tiny", None, "bf16", "fsdp-sliced", checkpoints={"format": "sharded", "resume": True},
                        **slices)
    finally:
        dist.destroy_process_group()
    error = max(abs(a - b) / abs(a) for a, b in zip(plain["losses"], sharded["losses"]))
    checkpoints = sorted(p.name for p in (ctx.work / "runs" / "fsdp-on" / "checkpoints").glob("step-*"))
    after = resumed["losses"][-(ctx.steps - half):]
    resume_error = max(abs(a - b) / abs(a) for a, b in zip(sharded["losses"][half:], after))
    folder = ctx.work / "runs" / "fsdp-sliced" / "checkpoints" / f"step-{ctx.steps:08d}"
    loaded = from_pretrained(folder)
    out = {"strategy": sharded["strategy"], "max_relative_loss_difference": error, "plain_step_s": plain["step_s"],
           "fsdp_step_s": sharded["step_s"], "checkpoints": checkpoints,
           "sharded_resume_max_relative_loss_difference": resume_error,
           "sharded_files": sorted(p.name for p in (folder / "sharded").iterdir()),
           "sharded_loaded_parameters": sum(p.numel() for p in loaded.parameters())}
    expect(sharded["strategy"] == "fsdp", f"the trainer ran {sharded['strategy']!r}, not fsdp")
    expect(len(plain["losses"]) == len(sharded["losses"]) and error < 2e-2,
           f"FSDP losses differ from the plain run's by {error:.3g} (relative)")
    expect(bool(checkpoints), "the FSDP run left no checkpoint")
    expect(len(after) == ctx.steps - half and resume_error < 1e-2,
           f"after resuming from sharded checkpoints the losses differ by {resume_error:.3g} (relative)")
    return out
