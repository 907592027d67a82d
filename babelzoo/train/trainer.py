"""The shared trainer: every objective and modality trains through :class:`Trainer`.

    trainer = Trainer(model, MLM(specials), corpus, TrainConfig(max_steps=1000, precision="bf16"))
    summary = trainer.fit()

One optimizer step = ``grad_accum`` micro-batches per rank, each loss divided by ``grad_accum``
so the summed gradient is that of the mean over the whole global batch (exactly, for losses that
average over equally many items per micro-batch); DDP averages over ranks. The step is skipped
(and counted) when the gradients are not finite, else clipped and applied; the learning-rate
schedule follows the steps attempted. Nothing in a step reads the device (with AdamW; LAMB
decides a skip on the host): losses, metrics and norms stay tensors until the logging interval,
where they are read back in one transfer. Checkpoints are
written every ``checkpoints.every`` steps, at the end, and when SIGTERM/SIGINT arrives (at the
next step boundary, after which ``fit`` returns). ``fit`` resumes from the newest valid
checkpoint in ``output_dir`` and then continues exactly as if never interrupted: same batches,
same masks, same dropout.

``data`` is one map-style dataset of raw examples, or, for a
:class:`~babelzoo.objectives.mixture.Mixture`, a dict ``{name: dataset}`` keyed like the
mixture's objectives; every micro-batch is collated by ``objectives.prepare(examples)`` (a list,
or ``{name: list}``) in DataLoader workers and scored by ``objectives(model, batch)``.

What the trainer trains is a :class:`~babelzoo.train.train_module.TrainModule`; its checkpoints
and resume are :class:`~babelzoo.train.run_checkpoints.RunCheckpoints`, its evaluations and
model selection :class:`~babelzoo.train.run_selection.RunSelection`.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np
import torch
from torch import nn

from .._threads import choose_threads, cpu_threads
from ..zoo.config import ConfigError
from . import distributed as D
from .allocator import cpu_buffers_kept
from .checkpoint import CheckpointManager, rng_kept
from .config import TrainConfig
from .data import DataStream
from .flops import count_flops, measure_matmul_peak
from .logging import RunLogger
from .trackers import build_trackers
from .optim import build_optimizer, build_schedule
from .run_checkpoints import RunCheckpoints
from .run_selection import RunSelection
from .run_folder import claim_output_dir
from .precision import Precision
from .selection import Evaluator, Selection
from .train_module import TrainModule


def _to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, Mapping):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_to_device(v, device) for v in value)
    return value


def check_lengths(model: nn.Module, objectives: nn.Module) -> None:
    """Every objective's ``max_length`` must fit the model's positions; found when the run is
    built, not when the first long batch arrives."""
    config = getattr(model, "config", None)
    text = getattr(config, "text", None)
    if text is None or getattr(text, "position_embedding", "none") == "none":
        return
    named = getattr(objectives, "objectives", None)
    for name, objective in (named.items() if hasattr(named, "items") else [("objective", objectives)]):
        length = getattr(objective, "max_length", None)
        if isinstance(length, int) and length > text.max_positions:
            raise ConfigError(f"objectives.{name}.max_length={length} is longer than the model's "
                              f"max_positions={text.max_positions}; lower max_length or use a model with more positions")


class Trainer(RunCheckpoints, RunSelection):
    """Train ``model`` with ``objectives`` (an :class:`~babelzoo.objectives.base.Objective` or a
    mixture of them) on ``data`` under ``config``. See the module docstring. A ``tokenizer``
    (anything with ``save(directory)``) is saved into every checkpoint, so that a checkpoint
    directory loads with ``from_pretrained`` complete with its tokenizer."""

    def __init__(self, model: nn.Module, objectives: nn.Module, data: Any, config: TrainConfig,
                 tokenizer: Any = None, evaluator: Optional[Evaluator] = None):
        check_lengths(model, objectives)
        self.model, self.objectives, self.data, self.config = model, objectives, data, config
        self.tokenizer = tokenizer
        self.evaluator = evaluator
        self.selection = Selection(evaluator.metric, config.patience) if evaluator is not None else None
        self.output_dir = Path(config.output_dir)
        self.step = 0        # optimizer steps attempted (batches consumed); the schedule follows it
        self.flops_per_token: Optional[float] = None
        self.peak: Optional[float] = None  # matmul FLOP/s that MFU is measured against
        self._resumed_peak: Optional[float] = None  # the peak saved with the checkpoint resumed
        self._stop_signal: Optional[str] = None
        self._compiled = False

    # --- set-up --------------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.config
        self.info = D.init_distributed(cfg.device)
        self.device = self.info.device
        self._seed_everything(cfg.seed + self.info.rank)
        self.module = TrainModule(self.model, self.objectives).to(self.device)
        self.precision = Precision(cfg.precision, self.device)
        self.precision.check_master_params(self.module)
        self.alias = self.module.tied_keys()
        self.strategy = D.choose_strategy(cfg.distributed, self.info)
        self.wrapped = D.wrap(self.module, self.strategy, self.info, cfg.find_unused_parameters)
        self.params = [p for p in self.module.parameters() if p.requires_grad]
        # Fused AdamW skips a non-finite step on the device (FSDP's DTensors take the multi-tensor path).
        self.optimizer = build_optimizer(self.module, cfg, fused=self.strategy != "fsdp"
                                         and self.device.type in ("cpu", "cuda"))
        self.schedule = build_schedule(cfg)
        self.stream = DataStream(self.data, self.objectives.prepare, batch_size=cfg.batch_size,
                                 grad_accum=cfg.grad_accum, rank=self.info.rank, world_size=self.info.world_size,
                                 seed=cfg.seed, num_workers=cfg.num_workers, pin_memory=self.device.type == "cuda")
        self.checkpoints = CheckpointManager(self.output_dir / "checkpoints", cfg.checkpoints.keep, self.info.rank)

    @staticmethod
    def _seed_everything(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed % 2 ** 32)
        torch.manual_seed(seed)

    # --- signals -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            name = signal.Signals(signum).name
            if self._stop_signal is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt  # a second Ctrl-C stops at once
            self._stop_signal = name

        previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    # --- the loop ------------------------------------------------------------------------------
    def _sync_context(self, last_micro: bool):
        """Gradient all-reduce only on the last micro-batch of a step."""
        if self.strategy == "ddp" and not last_micro:
            return self.wrapped.no_sync()
        if self.strategy == "fsdp":
            self.module.set_requires_gradient_sync(last_micro)
        return contextlib.nullcontext()

    def _micro_step(self, batch: Any, accum: int, count_flops_now: bool) -> tuple[torch.Tensor, int, dict]:
        def run():
            with self.precision.autocast():
                value = self.wrapped(batch)
            self.precision.backward(value / accum)
            return value

        if count_flops_now:
            box = {}
            flops = count_flops(lambda: box.setdefault("v", run()))
            value = box["v"]
        else:
            value, flops = run(), None
        loss = self.module.last
        if count_flops_now and int(loss.tokens):  # once per run: the FLOP count's denominator
            self.flops_per_token = flops / int(loss.tokens)
        return value.detach().double(), loss.tokens, dict(loss.metrics)

    def train_step(self) -> dict[str, Any]:
        """One optimizer step; returns its log record. Its measured values (loss, tokens,
        gradient norm, the objectives' metrics) are device tensors, read back together by
        :meth:`read_records` at the logging interval: the step itself never waits for the device."""
        cfg, accum = self.config, self.config.grad_accum
        start = time.perf_counter()
        drawn = self.stream.next_step()
        data_time = time.perf_counter() - start
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        tokens: Any = 0
        metrics: dict[str, Any] = {}
        for m in range(accum):
            batch = _to_device(drawn[m], self.device)
            count_now = (self.flops_per_token is None and m == 0 and self.info.is_main and cfg.logging.measure_mfu)
            with self._sync_context(m == accum - 1):
                value, n, micro_metrics = self._micro_step(batch, accum, count_now)
            loss_sum, tokens = loss_sum + value, tokens + n
            for k, v in micro_metrics.items():
                metrics[k] = metrics.get(k, 0.0) + v / accum
        result = self.precision.step(self.optimizer, self.params, cfg.optim.max_grad_norm)
        self.optimizer.zero_grad(set_to_none=True)
        if cfg.compile and not self._compiled:
            # After the first step: FlopCounterMode does not see inside compiled graphs.
            self.module.compile_model()
            self._compiled = True
        lr = max(g["lr"] for g in self.optimizer.param_groups)  # the top rate under layer-wise decay
        self.step += 1
        self.schedule.apply(self.optimizer, self.step)
        # The global mean loss and token count: a device collective, read with the record.
        stats = torch.stack([loss_sum / accum, torch.as_tensor(tokens, dtype=torch.float64, device=self.device)])
        D.all_reduce_sum(stats)
        # Whether any rank was told to stop (all ranks stop at the same boundary): host values only.
        if D.any_rank(self._stop_signal is not None) and self._stop_signal is None:
            self._stop_signal = "a signal on another rank"
        record = {"step": self.step, "loss": stats[0] / self.info.world_size, "lr": lr, "grad_norm": result.grad_norm,
                  "skipped": result.skipped, "tokens": stats[1], "step_time": time.perf_counter() - start,
                  "data_time": data_time}
        # The objectives' metrics never replace these: their "loss" is this rank's, not the global mean.
        record.update({k: v for k, v in metrics.items() if k not in record})
        scale = self.precision.scale_tensor()
        if scale is not None:
            record["loss_scale"] = scale
        return record

    def read_records(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``records`` with their device tensors read back, all in one transfer, and the
        derived rates (tokens/s, FLOPs, MFU) filled in."""
        cells = [(r, k) for r in records for k, v in r.items() if isinstance(v, torch.Tensor)]
        if cells:
            values = torch.stack([r[k].detach().reshape(()).to(self.device, torch.float64) for r, k in cells]).tolist()
            for (r, k), value in zip(cells, values):
                r[k] = value
        world = self.info.world_size
        for r in records:
            r["skipped"] = bool(r["skipped"])
            r["tokens"] = int(r["tokens"])
            r["tokens_per_s"] = r["tokens"] / r["step_time"] if r["step_time"] > 0 else 0.0
            if self.flops_per_token and self.peak:
                r["flops"] = self.flops_per_token * r["tokens"]
                r["mfu"] = r["flops"] / r["step_time"] / (self.peak * world)
        return records

    # --- the time budget -----------------------------------------------------------------------
    def _out_of_time(self) -> bool:
        """Has the run used its ``max_seconds`` on any rank's clock (every rank gets the same answer)?"""
        cfg = self.config
        if cfg.max_seconds is None:
            return False
        return D.any_rank(self._clock() - self._clock_start > cfg.max_seconds)

    def fit(self) -> dict[str, Any]:
        """Train to ``max_steps`` (or until a signal); return the run summary. What the run
        changes in the process holds for the run only: on the CPU it uses ``threads`` intra-op
        threads (default: :func:`babelzoo._threads.choose_threads`), with ``keep_cpu_buffers``
        glibc's malloc keeps large buffers (:func:`~babelzoo.train.allocator.cpu_buffers_kept`),
        and it seeds the random generators from ``seed``; threads, allocator and the caller's
        random states are restored afterwards."""
        started = time.perf_counter()  # the wall time of this run counts from here
        device = D.resolve_device(self.config.device, int(os.environ.get("LOCAL_RANK", 0)))
        self.cpu_threads, self.cpu_threads_why = self._threads(device)
        kept = self.config.keep_cpu_buffers and device.type == "cpu"
        with cpu_threads(self.cpu_threads), rng_kept(device), \
                (cpu_buffers_kept() if kept else contextlib.nullcontext()):
            return self._fit(started)

    def _threads(self, device: torch.device) -> tuple[int, str]:
        if device.type != "cpu":
            return torch.get_num_threads(), "not on the CPU"
        text = getattr(getattr(self.model, "config", None), "text", None)
        return choose_threads(getattr(text, "hidden_size", None) or 256, self.config.threads)

    def _fit(self, started: float) -> dict[str, Any]:
        cfg = self.config
        self._setup()
        logger = None
        try:
            resumed = self._resume()
            if self.info.is_main:  # after resume, whose differences name the checkpoint; before any write
                claim_output_dir(cfg, self.run_identity(), self.info.world_size)
            # A finished run resumed trains nothing: its summary reports its own figures, with no
            # peak measured now and no progress bar that would show it as done in no time.
            finished = resumed is not None and self.step >= cfg.max_steps
            self.schedule.apply(self.optimizer, self.step)
            self.peak = self._peak(finished)
            logger = self._run_logger(finished, started)
            last_checkpoint, out_of_time = self._train_loop(logger, resumed)
            summary = logger.summary(self._run_summary(resumed, finished, last_checkpoint, out_of_time))
            logger.close(summary)
            return summary
        finally:
            if logger is not None:  # after an error too: no open log file left behind
                logger.close()
            if hasattr(self, "stream"):
                self.stream.close()
            if hasattr(self, "info"):
                D.shutdown(self.info)

    def _peak(self, finished: bool) -> Optional[float]:
        """The matmul peak MFU is measured against: the finished run's own, the recipe's, or
        measured now (on the main process) when the recipe asks for MFU."""
        if finished:
            return self._resumed_peak
        if not self.config.logging.measure_mfu:
            return None
        dtype = self.precision.dtype or torch.float32
        return self.config.logging.peak_flops or (measure_matmul_peak(self.device, dtype) if self.info.is_main else None)

    def _run_logger(self, finished: bool, started: float) -> RunLogger:
        cfg = self.config
        trackers = (build_trackers(cfg.logging.loggers, self.output_dir, cfg.to_dict())
                    if cfg.logging.loggers is not None and self.info.is_main and not finished else [])
        logger = RunLogger(self.output_dir, cfg.max_steps, self.step, enabled=self.info.is_main, trackers=trackers,
                           progress=cfg.logging.progress and not finished,
                           tensorboard=cfg.logging.tensorboard if cfg.logging.loggers is None else False,
                           log_every=cfg.logging.every, started=started)
        logger.truncate_after(self.step)  # records of steps this run will (re)do
        return logger

    def _train_loop(self, logger: RunLogger, resumed: Optional[Path]) -> tuple[Optional[Path], bool]:
        """Step until ``max_steps``, a signal, early stopping or the time budget; evaluate and
        checkpoint on schedule. Returns the last checkpoint and whether the budget ran out."""
        cfg = self.config
        last_checkpoint = resumed
        self.wrapped.train()
        saved_step = self.step if resumed else None
        pending: list[dict[str, Any]] = []  # records whose device values are not read yet

        def write_pending() -> None:
            for done in self.read_records(pending):
                logger.log(done)
            pending.clear()

        self._clock = time.process_time if cfg.budget_clock == "cpu" else time.perf_counter
        self._clock_start = self._clock()
        out_of_time = False
        if resumed is not None:
            last_checkpoint = self._complete_selection() or last_checkpoint
        with self._signals():
            try:
                while (self.step < cfg.max_steps and self._stop_signal is None and not self._stopped_early
                       and not out_of_time):
                    pending.append(self.train_step())
                    out_of_time = self._out_of_time()
                    evaluated = self.evaluator is not None and (
                        self.step == cfg.max_steps or out_of_time
                        or bool(cfg.eval_every and self.step % cfg.eval_every == 0))
                    if evaluated:
                        pending[-1].update(self.evaluate())
                    checkpoint = (self.step % cfg.checkpoints.every == 0 or self.step == cfg.max_steps
                                  or self._stop_signal is not None or self._stopped_early or out_of_time)
                    if checkpoint or evaluated or self.step % cfg.logging.every == 0:
                        write_pending()  # the one read of the device since the last one
                    if checkpoint:
                        last_checkpoint, saved_step = self.save_checkpoint(), self.step
            except Exception as err:
                try:  # what was measured before the failure still reaches the log
                    write_pending()
                except Exception:
                    pass
                if saved_step != self.step:
                    self._emergency_checkpoint(err)
                raise
        return last_checkpoint, out_of_time

    def _run_summary(self, resumed: Optional[Path], finished: bool, last_checkpoint: Optional[Path],
                     out_of_time: bool) -> dict[str, Any]:
        cfg = self.config
        return {
            "checkpoint": str(last_checkpoint) if last_checkpoint else None,
            "resumed_from": str(resumed) if resumed else None,
            "finished_before": finished,
            "max_steps": cfg.max_steps,
            "stopped_by_signal": self._stop_signal,
            "out_of_time": out_of_time,
            "budget_seconds_used": self._clock() - self._clock_start,
            **self._selection_summary(),
            "flops_per_token": self.flops_per_token,
            "peak_flops": self.peak,
            "peak_dtype": str(self.precision.dtype or torch.float32).replace("torch.", ""),
            "skipped_total": self.precision.skipped,
            "world_size": self.info.world_size,
            "strategy": self.strategy,
            "model_dir": str(self.output_dir / cfg.model_dir) if cfg.model_dir else None,
            "cpu_threads": self.cpu_threads if self.device.type == "cpu" else None,
            "cpu_threads_why": self.cpu_threads_why,
        }
