"""Run logging: a progress bar, a JSONL file with one record per optimizer step, TensorBoard
scalars when ``tensorboard`` is installed, and a final summary.

Only rank 0 logs. Records are plain JSON objects::

    {"step": 12, "loss": 7.91, "lr": 0.00012, "grad_norm": 1.8, "skipped": false,
     "tokens": 4096, "tokens_per_s": 5120.4, "mfu": 0.41, "step_time": 0.8, "data_time": 0.01,
     "mlm/accuracy": 0.02, ...}

What each figure averages over, as the labels say:

- the progress bar, every ``log_every`` steps, shows the *window* of steps since its last update:
  their mean loss (under a mixture that samples one objective per step, the mean over whichever
  objectives were drawn), their tokens divided by their own step time (tokens/s) and MFU over
  that same time; ``lr`` is the last step's rate;
- the summary repeats the last window the bar showed, so the two agree, and adds the whole run:
  tokens over the summed step time ("over training steps": no evaluation, checkpoint or start-up),
  tokens of this invocation over its wall time ("wall": all of it included), each objective's
  mean loss in the last window, and the last step's own loss.

A step's time runs from drawing its batch to the optimizer update; evaluation, checkpoints and
the device read at the logging interval fall between steps and count only in the wall time.

The bar, the progress lines and the printed summary are the run's INFO-level output: they are
hidden when the ``babelzoo`` loggers are set above INFO (``babelzoo -q``, or
``logging.getLogger("babelzoo").setLevel(logging.WARNING)``), and shown when no level is set on
them. ``summary.json`` and ``metrics.jsonl`` are written either way.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from .._files import write_json_atomic
from ..errors import ConfigError

# Record keys of evaluations (the trainer's evaluator names its metrics "dev/..."): shown as they
# are on the progress bar, not averaged with the training metrics.
EVAL_PREFIXES = ("dev/", "best ")
OBJECTIVE_LOSS = "/loss"  # a mixture's loss of one objective: "<name>/loss"
BAR = "(as on the progress bar)"

logger = logging.getLogger(__name__)


def shows_progress() -> bool:
    """Whether the bar and the summary show: unless the nearest ``babelzoo`` logger with a level
    set (this module's or a parent's) hides INFO records."""
    # by name, not by ``parent``: until something asks for the ``babelzoo`` logger itself, a
    # module logger's parent is the root logger, whose WARNING is not babelzoo's setting
    parts = logger.name.split(".")
    for end in range(len(parts), 0, -1):
        node = logging.Logger.manager.loggerDict.get(".".join(parts[:end]))
        if isinstance(node, logging.Logger) and node.level != logging.NOTSET:
            return node.level <= logging.INFO
    return True


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def objective_losses(record: dict[str, Any]) -> list[str]:
    """The mixture objectives whose loss a record holds (``"<name>/loss"``): the one a sampling
    mixture drew for that step, or every one of a summing mixture."""
    return [k[:-len(OBJECTIVE_LOSS)] for k in record if k.endswith(OBJECTIVE_LOSS) and k.count("/") == 1]


def window_stats(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The figures of consecutive step records: ``first_step``/``last_step``; ``loss`` (mean of
    the finite losses); ``losses`` (each objective's mean loss and how many steps drew it);
    ``tokens_per_s`` (their tokens over their summed step time); ``mfu`` (over the same time,
    each step against the peak of its own run); ``lr`` (the last step's); and the mean of every
    other numeric metric (for TensorBoard)."""
    records = list(records)
    if not records:
        return {}
    out: dict[str, Any] = {}
    for key in sorted({k for r in records for k in r if k != "step" and not k.startswith(EVAL_PREFIXES)}):
        values = [r[key] for r in records if _number(r.get(key))]
        if values:
            out[key] = sum(values) / len(values)
    names = sorted({name for r in records for name in objective_losses(r)})
    out["losses"] = {name: (out[key], sum(_number(r.get(key)) for r in records))
                     for name in names for key in [name + OBJECTIVE_LOSS] if key in out}
    out["first_step"], out["last_step"] = records[0]["step"], records[-1]["step"]
    if _number(records[-1].get("lr")):
        out["lr"] = records[-1]["lr"]
    tokens = sum(r.get("tokens", 0) for r in records)
    seconds = sum(r.get("step_time", 0.0) for r in records)
    out["tokens_per_s"] = tokens / seconds if seconds > 0 else 0.0
    measured = [r for r in records if _number(r.get("mfu"))]
    measured_time = sum(r.get("step_time", 0.0) for r in measured)
    if measured and measured_time > 0:
        out["mfu"] = sum(r["mfu"] * r.get("step_time", 0.0) for r in measured) / measured_time
    else:
        out.pop("mfu", None)
    return out


def steps_label(first: int, last: int, mean: bool = True) -> str:
    """``"mean of steps 41-60"`` (``"steps 41-60"`` without ``mean``), or ``"step 60"`` for one step."""
    return f"step {last}" if first == last else f"{'mean of ' if mean else ''}steps {first}-{last}"


def format_window(stats: dict[str, Any]) -> str:
    """The progress bar's text for a window: what it averages over, then the figures."""
    parts = [f"loss {stats.get('loss', float('nan')):.4f}", f"{stats.get('tokens_per_s', 0.0):,.0f} tok/s"]
    if "mfu" in stats:
        parts.append(f"MFU {100 * stats['mfu']:.1f}%")
    text = f"{steps_label(stats['first_step'], stats['last_step'])}: " + ", ".join(parts)
    return text + f" | lr {stats.get('lr', 0.0):.2e}"


class RunLogger:
    """Rank 0's log of a run; ``started`` is the ``time.perf_counter()`` from which the wall
    time counts (default: now)."""

    def __init__(self, output_dir: str | Path, total_steps: int, start_step: int = 0, enabled: bool = True,
                 progress: bool = True, tensorboard: bool = True, log_every: int = 10,
                 started: Optional[float] = None, trackers: Sequence[Any] = ()):
        self.enabled, self.log_every, self.total = enabled, log_every, total_steps
        self.output_dir = Path(output_dir)
        self.window: list[dict[str, Any]] = []
        self.shown: dict[str, Any] = {}  # the window the progress bar shows last
        self.totals = {"tokens": 0, "time": 0.0, "data_time": 0.0, "steps": 0, "skipped": 0,
                       "mfu_time": 0.0, "mfu_weighted": 0.0, "first_step": None}
        self.last: dict[str, Any] = {}
        self.resumed_steps = 0  # steps counted from the records of earlier runs of this one
        self.resumed_tokens = 0
        self.evaluation: dict[str, Any] = {}  # the latest evaluation, shown with every progress line
        self._file = self._bar = None
        self.trackers: list[Any] = []  # babelzoo.train.trackers: each logging window and the summary
        self._started = time.perf_counter() if started is None else started
        if not enabled:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.output_dir / "metrics.jsonl", "a", encoding="utf-8")
        progress = progress and shows_progress()
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
        self.trackers = list(trackers)
        if tensorboard and not any(t.name == "tensorboard" for t in self.trackers):
            from .trackers import TensorBoardTracker

            try:
                self.trackers.append(TensorBoardTracker(self.output_dir, {}))
            except ConfigError:  # tensorboard is optional unless a recipe's loggers name it
                pass
        self.progress_lines = progress and self._bar is None

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` (a resumed run repeats them); the records kept
        count towards the summary, so a resumed run's summary covers the whole run, and the
        window that ended at ``step`` is what the summary shows when no step follows."""
        if not self.enabled:
            return
        path = self.output_dir / "metrics.jsonl"
        if step == 0 and path.stat().st_size == 0:
            return
        self._file.close()
        kept, tail = [], deque(maxlen=self.log_every)
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a crash
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int) and 1 <= record["step"] <= step:
                kept.append(line)
                self._count(record)
                tail.append(record)
        path.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
        self._file = open(path, "a", encoding="utf-8")
        self.resumed_steps, self.resumed_tokens = self.totals["steps"], self.totals["tokens"]
        if tail:  # the last window of the earlier run: steps after the last multiple of log_every
            boundary = (tail[-1]["step"] - 1) // self.log_every * self.log_every
            self.shown = window_stats(r for r in tail if r["step"] > boundary)

    def _count(self, record: dict[str, Any]) -> None:
        t = self.totals
        t["steps"] += 1
        if t["first_step"] is None:
            t["first_step"] = record.get("step")
        t["tokens"] += record.get("tokens", 0)
        t["time"] += record.get("step_time", 0.0)
        t["data_time"] += record.get("data_time", 0.0)
        t["skipped"] += int(bool(record.get("skipped")))
        if _number(record.get("mfu")):
            t["mfu_time"] += record.get("step_time", 0.0)
            t["mfu_weighted"] += record["mfu"] * record.get("step_time", 0.0)
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
            self._show_window()

    def _show_window(self) -> None:
        """Put the window on the bar (or a progress line) and TensorBoard, and start a new one."""
        stats = window_stats(self.window)
        self.window = []
        if not stats:
            return
        self.shown = stats
        text = self._format(stats)
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)
        elif self.progress_lines:
            print(f"step {stats['last_step']}/{self.total} {text}", file=sys.stderr, flush=True)
        if self.trackers:
            metrics = {k: v for k, v in {**stats, **self.evaluation}.items() if k not in ("first_step", "last_step")}
            for tracker in self.trackers:
                tracker.log_metrics(metrics, stats["last_step"])

    def _format(self, stats: dict[str, Any]) -> str:
        return " | ".join([format_window(stats)] + [f"{k} {v:.4f}" for k, v in self.evaluation.items()
                                                    if _number(v)])

    def summary(self, extra: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """The run's figures (see the module docstring); steps not yet shown on the bar are
        shown first, so that the bar's last figures are the summary's ``last_window``."""
        if self.enabled and self.window:
            self._show_window()
        t = self.totals
        wall = time.perf_counter() - self._started
        tokens_now = t["tokens"] - self.resumed_tokens
        shown = self.shown
        out = {
            "steps": t["steps"],
            "steps_this_run": t["steps"] - self.resumed_steps,
            "skipped_steps": t["skipped"],
            "tokens": t["tokens"],
            "train_time_s": t["time"],
            "wall_time_s": wall,
            "tokens_per_s": t["tokens"] / t["time"] if t["time"] > 0 else 0.0,
            "mfu": t["mfu_weighted"] / t["mfu_time"] if t["mfu_time"] > 0 else None,
            "wall_tokens_per_s": tokens_now / wall if tokens_now and wall > 0 else None,
            "data_time_fraction": t["data_time"] / t["time"] if t["time"] > 0 else 0.0,
            "final_loss": self.last.get("loss"),
            "first_step": t["first_step"],
            "final_step": self.last.get("step"),
            "final_objectives": objective_losses(self.last),
            "last_window": {key: shown[key] for key in ("first_step", "last_step", "loss", "losses", "tokens_per_s",
                                                        "mfu", "lr") if key in shown} or None,
        }
        out.update(extra or {})
        return out

    def close(self, summary: Optional[dict[str, Any]] = None) -> None:
        """Close the bar, the trackers and the log file (again: a no-op); write ``summary``. The
        trackers get the summary (None: the run failed)."""
        if self._bar is not None:
            self._bar.close()
        trackers, self.trackers = self.trackers, []
        for tracker in trackers:
            tracker.finish(summary)
        if self._file is not None:
            self._file.close()
        self._bar = self._file = None
        if self.enabled and summary is not None:
            write_json_atomic(self.output_dir / "summary.json", summary)
            if shows_progress():
                print(format_summary(summary), file=sys.stderr, flush=True)


def _loss_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    window = summary.get("last_window") or {}
    last, step = summary.get("final_loss"), summary.get("final_step")
    drew = summary.get("final_objectives") or []
    last_text = (f"step {step} alone {last:.4f}" + (f" (objective {drew[0]})" if len(drew) == 1 else "")
                 if _number(last) else "")
    if not _number(window.get("loss")):
        return [("loss", last_text or "-")]
    span = (steps_label(window["first_step"], window["last_step"]) if window["first_step"] != window["last_step"]
            else f"at step {window['last_step']}")
    text = f"{window['loss']:.4f} {span} {BAR}"
    if last_text and window["first_step"] != window["last_step"]:
        text += f"; {last_text}"
    rows = [("loss", text)]
    losses = window.get("losses") or {}
    if len(losses) > 1:
        rows.append(("by objective", ", ".join(f"{name} {mean:.4f} ({count} of those steps)"
                                               for name, (mean, count) in losses.items())))
    return rows


def _throughput_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    window = summary.get("last_window") or {}
    span = f"over {steps_label(window['first_step'], window['last_step'], mean=False)}" if window else None
    first, last = summary.get("first_step"), summary.get("final_step")
    run = f"over training steps {first}-{last}" if first is not None and first != last else f"over training step {last}"
    rows = [("throughput", f"{summary['tokens_per_s']:,.0f} tokens/s {run} (their own time)"
             + (f"; {window['tokens_per_s']:,.0f} {span} {BAR}" if span else ""))]
    if summary.get("wall_tokens_per_s") is not None:
        wall = (f"{summary['wall_tokens_per_s']:,.0f} tokens/s over this run's {summary['wall_time_s']:,.1f} s, "
                "incl. start-up, evaluation and checkpoints")
        rows.append(("wall throughput", wall))
    else:
        rows.append(("wall throughput", "not measured: no step was trained in this run"))
    if summary.get("mfu") is not None:
        peak = summary.get("peak_flops")
        against = (f"peak {peak / 1e9:,.0f} GFLOP/s (measured {summary.get('peak_dtype', '')} matmul)" if peak
                   else "against the matmul peak measured when those steps ran")
        window_mfu = (f"; {100 * window['mfu']:.1f}% {span} {BAR}" if span and window.get("mfu") is not None else "")
        rows.append(("MFU", f"{100 * summary['mfu']:.1f}% {run}{window_mfu}; {against}"))
    return rows


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as people read it; every figure says what it averages over."""
    rows = [("steps", f"{summary['steps']} ({summary['skipped_steps']} skipped: non-finite gradients)")]
    rows += _loss_rows(summary)
    rows.append(("tokens", f"{summary['tokens']:,}"))
    rows += _throughput_rows(summary)
    rows.append(("data wait", f"{100 * summary['data_time_fraction']:.1f}% of step time"))
    if summary.get("cpu_threads"):
        rows.append(("CPU threads", f"{summary['cpu_threads']} ({summary.get('cpu_threads_why', '')})"))
    if summary.get("checkpoint"):
        rows.append(("checkpoint", str(summary["checkpoint"])))
    if summary.get("stopped_by_signal"):
        rows.append(("stopped", f"by {summary['stopped_by_signal']}; resume with the same command"))
    title = "training summary"
    if summary.get("finished_before"):
        title += (f": nothing trained now; {summary.get('resumed_from')} had already reached max_steps="
                  f"{summary.get('max_steps')}, and the figures are that run's (to train again, use another "
                  "output_dir or remove this one)")
    width = max(len(k) for k, _ in rows)
    return "\n".join([title] + [f"  {k:<{width}}  {v}" for k, v in rows])
