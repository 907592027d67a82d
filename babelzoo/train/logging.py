"""Run logging: a progress bar (loss, lr, tokens/s, MFU), a JSONL file with one record per
optimizer step, TensorBoard scalars when ``tensorboard`` is installed, and a final summary.

Only rank 0 logs. Records are plain JSON objects::

    {"step": 12, "loss": 7.91, "lr": 0.00012, "grad_norm": 1.8, "skipped": false,
     "tokens": 4096, "tokens_per_s": 5120.4, "mfu": 0.41, "step_time": 0.8, "data_time": 0.01,
     "mlm/accuracy": 0.02, ...}
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

from .._files import write_json_atomic

# Record keys of evaluations (the trainer's evaluator names its metrics "dev/..."): shown as they
# are on the progress bar, not averaged with the training metrics.
EVAL_PREFIXES = ("dev/", "best ")


class RunLogger:
    def __init__(self, output_dir: str | Path, total_steps: int, start_step: int = 0, enabled: bool = True,
                 progress: bool = True, tensorboard: bool = True, log_every: int = 10):
        self.enabled, self.log_every, self.total = enabled, log_every, total_steps
        self.output_dir = Path(output_dir)
        self.window: list[dict[str, Any]] = []
        self.totals = {"tokens": 0, "time": 0.0, "data_time": 0.0, "steps": 0, "skipped": 0, "flops": 0.0}
        self.last: dict[str, Any] = {}
        self.resumed_steps = 0  # steps counted from the records of earlier runs of this one
        self.evaluation: dict[str, Any] = {}  # the latest evaluation, shown with every progress line
        self._file = self._bar = self._tb = None
        self._started = time.perf_counter()
        if not enabled:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.output_dir / "metrics.jsonl", "a", encoding="utf-8")
        if progress:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                # A log file (not a terminal) gets a line every 30 s rather than ten a second.
                interactive = sys.stderr.isatty()
                self._bar = tqdm(total=total_steps, initial=start_step, desc="train", dynamic_ncols=True,
                                 file=sys.stderr, smoothing=0.1, mininterval=0.1 if interactive else 30.0)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                SummaryWriter = None
            if SummaryWriter is not None:
                self._tb = SummaryWriter(str(self.output_dir / "tensorboard"))
        self.progress_lines = progress and self._bar is None

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` (a resumed run repeats them); the records kept
        count towards the summary, so a resumed run's summary covers the whole run."""
        if not self.enabled:
            return
        path = self.output_dir / "metrics.jsonl"
        if step == 0 and path.stat().st_size == 0:
            return
        self._file.close()
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a crash
                continue
            if record.get("step", 0) <= step:
                kept.append(line)
                self._count(record)
        path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
        self._file = open(path, "a", encoding="utf-8")
        self.resumed_steps = self.totals["steps"]

    def _count(self, record: dict[str, Any]) -> None:
        self.totals["steps"] += 1
        self.totals["tokens"] += record.get("tokens", 0)
        self.totals["time"] += record.get("step_time", 0.0)
        self.totals["data_time"] += record.get("data_time", 0.0)
        self.totals["skipped"] += int(bool(record.get("skipped")))
        self.totals["flops"] += record.get("flops", 0.0)
        self.last = record

    def log(self, record: dict[str, Any]) -> None:
        """Record one optimizer step (every rank may call; only rank 0 writes)."""
        self._count(record)
        self.window.append(record)
        if not self.enabled:
            return
        self._file.write(json.dumps(record, allow_nan=True) + "\n")
        self._file.flush()
        step = record["step"]
        evaluated = {k: v for k, v in record.items() if k.startswith(EVAL_PREFIXES)}
        if evaluated:
            self.evaluation = evaluated
        if self._bar is not None:
            self._bar.update(1)
        if step % self.log_every == 0 or step == self.total or evaluated:
            avg = self._window_average()
            if self._bar is not None:
                self._bar.set_postfix_str(self._format(avg), refresh=False)
            elif self.progress_lines:
                print(f"step {step}/{self.total} {self._format(avg)}", file=sys.stderr, flush=True)
            if self._tb is not None:
                for key, value in avg.items():
                    self._tb.add_scalar(key, value, step)
            self.window = []

    def _window_average(self) -> dict[str, float]:
        keys = {k for r in self.window for k, v in r.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"
                and not k.startswith(EVAL_PREFIXES)}
        out = {}
        for key in sorted(keys):
            values = [r[key] for r in self.window if key in r and isinstance(r[key], (int, float))
                      and math.isfinite(r[key])]
            if values:
                out[key] = sum(values) / len(values)
        tokens, time_ = sum(r.get("tokens", 0) for r in self.window), sum(r.get("step_time", 0.0) for r in self.window)
        if time_ > 0:
            out["tokens_per_s"] = tokens / time_
        return out

    def _format(self, avg: dict[str, float]) -> str:
        parts = [f"loss {avg.get('loss', float('nan')):.4f}", f"lr {avg.get('lr', 0.0):.2e}",
                 f"tok/s {avg.get('tokens_per_s', 0.0):,.0f}"]
        if "mfu" in avg:
            parts.append(f"MFU {100 * avg['mfu']:.1f}%")
        parts += [f"{k} {v:.4f}" for k, v in self.evaluation.items() if isinstance(v, (int, float))]
        return " ".join(parts)

    def summary(self, extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        t = self.totals
        out = {
            "steps": t["steps"],
            "steps_this_run": t["steps"] - self.resumed_steps,
            "skipped_steps": t["skipped"],
            "tokens": t["tokens"],
            "train_time_s": t["time"],
            "wall_time_s": time.perf_counter() - self._started,
            "tokens_per_s": t["tokens"] / t["time"] if t["time"] > 0 else 0.0,
            "data_time_fraction": t["data_time"] / t["time"] if t["time"] > 0 else 0.0,
            "final_loss": self.last.get("loss"),
        }
        out.update(extra or {})
        return out

    def close(self, summary: Optional[dict[str, Any]] = None) -> None:
        """Close the bar, TensorBoard and the log file (again: a no-op); write ``summary``."""
        if self._bar is not None:
            self._bar.close()
        if self._tb is not None:
            self._tb.close()
        if self._file is not None:
            self._file.close()
        self._bar = self._tb = self._file = None
        if self.enabled and summary is not None:
            write_json_atomic(self.output_dir / "summary.json", summary)
            print(format_summary(summary), file=sys.stderr, flush=True)


def format_summary(summary: dict[str, Any]) -> str:
    rows = [("steps", f"{summary['steps']} ({summary['skipped_steps']} skipped: non-finite gradients)"),
            ("final loss", f"{summary['final_loss']:.4f}" if isinstance(summary.get("final_loss"), float) else "-"),
            ("tokens", f"{summary['tokens']:,}"),
            ("throughput", f"{summary['tokens_per_s']:,.0f} tokens/s"),
            ("data wait", f"{100 * summary['data_time_fraction']:.1f}% of step time")]
    if summary.get("mfu") is not None:
        rows.append(("MFU", f"{100 * summary['mfu']:.1f}% of {summary['peak_flops'] / 1e9:,.0f} GFLOP/s "
                            f"(measured {summary.get('peak_dtype', '')} matmul peak)"))
    if summary.get("checkpoint"):
        rows.append(("checkpoint", str(summary["checkpoint"])))
    if summary.get("stopped_by_signal"):
        rows.append(("stopped", f"by {summary['stopped_by_signal']}; resume with the same command"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(["training summary"] + [f"  {k:<{width}}  {v}" for k, v in rows])
