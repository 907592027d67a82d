"""babelzoo's own trainer: data time as a share of step time, and the cost of ``import babelzoo``."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from babelzoo.objectives.mlm import MLM

from .common import build_one, median

REPO = Path(__file__).resolve().parents[2]


def trainer_section(texts: list[str], tok, args, log) -> dict:
    """Run :class:`babelzoo.train.trainer.Trainer` (MLM, small config, batch ``args.batch``
    sentences) and read ``data_time``/``step_time`` from its own per-step log."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
    from babelzoo.train.trainer import Trainer

    examples = tok.batch_encode(texts, padding=False, return_tensors=None, add_special_tokens=False)["input_ids"]
    examples = [e for e in examples if e]
    model = build_one("small", "babelzoo", torch.device(args.device), args.seed)
    steps = args.trainer_steps
    with tempfile.TemporaryDirectory() as tmp:
        config = TrainConfig(output_dir=tmp, max_steps=steps, batch_size=args.batch,
                             optim=OptimConfig(optimizer="adamw", lr=1e-4),
                             logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False, every=1),
                             checkpoints=CheckpointConfig(every=steps, resume=False), device=args.device, num_workers=0,
                             keep_cpu_buffers=not args.default_malloc)
        Trainer(model, MLM(tok.specials, max_length=args.seq), examples, config).fit()
        records = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "step_time" in r][1:]  # the first step warms up
    share = [r["data_time"] / r["step_time"] for r in records]
    out = {"config": "small", "batch_sentences": args.batch, "num_workers": 0, "steps": len(records),
           "data_time_s": median([r["data_time"] for r in records]),
           "step_time_s": median([r["step_time"] for r in records]), "data_share": median(share),
           "tokens_per_step": median([r["tokens"] for r in records])}
    log(f"[trainer] data_time {out['data_time_s'] * 1000:.1f} ms of step {out['step_time_s'] * 1000:.0f} ms "
        f"({100 * out['data_share']:.2f}%)")
    return out


FIRST_USE = "import babelzoo; babelzoo.create_model('mbert_tiny')"


def import_time(statement: str = "import babelzoo", repeats: int = 3) -> float:
    """Median wall time of ``statement`` in a fresh interpreter. ``import babelzoo`` loads no
    submodule, and not torch: they load on first use (:data:`FIRST_USE` builds a tiny model)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                                  check=True).stdout.strip().splitlines()[-1]) for _ in range(repeats)]
    return median(times)
