"""Peak training memory: one fresh subprocess per side, config and precision."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from .common import DTYPES, SIDES, TrainStep, build_one, mlm_batches, sentences, sync, tokenizer

REPO = Path(__file__).resolve().parents[2]


def _rss_kib(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_probe(name: str, side: str, dname: str, args) -> dict[str, Any]:
    device = torch.device(args.device)
    tok = tokenizer(args.vocab)
    texts, _ = sentences(Path(args.data_dir), 4096)
    batch = {k: v.to(device) for k, v in mlm_batches(tok, texts, args.batch, args.seq, args.seed).items()}
    model = build_one(name, side, device, args.seed).train()
    step = TrainStep(side, model, batch, device, DTYPES[dname], tok.specials)
    gc.collect()
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        method = "torch.cuda.max_memory_allocated"
    else:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current resident set
            method = "VmHWM after reset"
        except OSError:
            method = "VmHWM (no reset: includes model construction)"
        base = _rss_kib("VmRSS") * 1024
    for _ in range(2):
        step.forward_backward()
        step.update()
    sync(device)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else _rss_kib("VmHWM") * 1024
    return {"peak_bytes": peak - base, "baseline_bytes": base, "method": method}


def memory_section(name: str, dtypes: list[str], args, log) -> dict:
    out = {}
    for dname in dtypes:
        row = {}
        for side in SIDES:
            cmd = [sys.executable, str(REPO / "benchmarks" / "speed.py"), "--memory-probe", f"{name},{side},{dname}",
                   "--device", args.device, "--batch", str(args.batch), "--seq", str(args.seq),
                   "--data-dir", args.data_dir, "--seed", str(args.seed), "--threads", str(torch.get_num_threads())]
            if args.default_malloc:
                cmd.append("--default-malloc")
            if args.vocab:
                cmd += ["--vocab", args.vocab]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"memory probe {name}/{side}/{dname} failed:\n{done.stderr[-3000:]}")
            row[side] = json.loads(done.stdout.strip().splitlines()[-1])
        row["ratio"] = row["babelzoo"]["peak_bytes"] / row["transformers"]["peak_bytes"]
        out[dname] = row
        log(f"[{name} {dname}] peak memory babelzoo {row['babelzoo']['peak_bytes'] / 2**20:.0f} MiB, "
            f"transformers {row['transformers']['peak_bytes'] / 2**20:.0f} MiB, ratio {row['ratio']:.2f}")
    return out
