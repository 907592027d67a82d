"""Resumable, rank-sharded micro-batches, prepared in DataLoader workers.

Each dataset is a map-style dataset of raw examples (``len`` + ``__getitem__``). Its epoch ``e``
is a permutation drawn from ``(seed, dataset name, e)``; the permutation is cut into *chunks*
of one global batch (``batch_size × grad_accum × world_size`` examples; a tail shorter than a
chunk is dropped, so every rank runs the same number of steps and no rank waits forever in a
collective). Optimizer step ``s`` uses chunk ``s mod chunks_per_epoch`` of epoch
``s div chunks_per_epoch``, and micro-batch ``m`` of rank ``r`` takes slot ``m × W + r``::

    chunk = perm[c·G : (c+1)·G]          slot = m·W + r          examples = chunk[slot·B : (slot+1)·B]

so one process with batch B·W, or with ``grad_accum`` × W micro-batches of B, sees exactly the
examples that W ranks see together. With several datasets (a mixture of objectives) each one
keeps its own epochs and every step draws one micro-batch's worth from each.

The objective's ``prepare`` (masking, pairing, negatives) runs in the DataLoader workers under
an RNG seeded from ``(seed, step, slot)``, so a batch is the same whatever the number of
workers and whether or not the run was resumed: the whole data position is the step count.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import zlib
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from ..errors import InputError, InputTypeError
from ..zoo.config import ConfigError
from .identity import ResumeMismatch

SINGLE = "data"  # the name of the dataset when ``data`` is not a dict


@contextlib.contextmanager
def seeded(seed: int):
    """Run a block under torch/python/numpy RNGs seeded with ``seed``; restore them after, so
    collation never perturbs the training loop's own random stream (dropout)."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed % 2 ** 32)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


class BatchPlan:
    """Which indices of one dataset form micro-batch ``micro`` of ``rank`` at step ``step``.

    ``order(epoch)``, when given, replaces the uniform permutation with another global epoch
    order of ``size`` positions (e.g. α-sampling over corpora,
    :meth:`babelzoo.datasets.loader.EpochOrder.epoch_order`)."""

    def __init__(self, name: str, size: int, batch_size: int, grad_accum: int, world_size: int, seed: int,
                 order: Optional[Callable[[int], Sequence[int]]] = None):
        self.name, self.size, self.batch_size, self.order = name, size, batch_size, order
        self.world_size, self.seed = world_size, seed
        self.global_batch = batch_size * grad_accum * world_size
        self.chunks_per_epoch = size // self.global_batch
        if self.chunks_per_epoch == 0:
            raise ConfigError(f"dataset {name!r} has {size} examples, fewer than one global batch of "
                              f"{self.global_batch} (batch_size={batch_size} × grad_accum={grad_accum} × "
                              f"world_size={world_size}); lower batch_size or add data")
        self._cached: tuple[int, np.ndarray] | None = None

    def permutation(self, epoch: int) -> np.ndarray:
        if self._cached is None or self._cached[0] != epoch:
            if self.order is not None:
                perm = np.asarray(self.order(epoch), dtype=np.int64)
                if len(perm) != self.size:
                    raise InputError(f"dataset {self.name!r}: epoch {epoch} order has {len(perm)} positions, "
                                     f"epoch 0 had {self.size}; an epoch order must keep its length")
            else:
                key = zlib.crc32(self.name.encode("utf-8"))
                perm = np.random.default_rng([self.seed, key, epoch]).permutation(self.size)
            self._cached = (epoch, perm)
        return self._cached[1]

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, chunk) used by optimizer step ``step`` (0-based)."""
        return divmod(step, self.chunks_per_epoch)

    def indices(self, step: int, micro: int, rank: int) -> list[int]:
        epoch, chunk = self.position(step)
        start = chunk * self.global_batch + (micro * self.world_size + rank) * self.batch_size
        return self.permutation(epoch)[start: start + self.batch_size].tolist()


class StreamPlan:
    """The global batches of a streamed corpus (``take(n)``, ``state_dict``), read in step order:
    step ``s`` takes the next ``batch_size × grad_accum × world_size`` examples, and micro-batch
    ``m`` of rank ``r`` takes slot ``m × W + r`` of them, as :class:`BatchPlan` cuts a chunk. Every
    rank reads the whole stream (the same examples, in the same order) and keeps its slots.

    While a step trains, a background thread reads and tokenises the next step's examples
    (``prefetch``): the stream is drawn in the same order either way, and the position saved for
    a step is the one before its examples were drawn."""

    def __init__(self, name: str, corpus: Any, batch_size: int, grad_accum: int, world_size: int,
                 prefetch: bool = True):
        self.name, self.corpus, self.batch_size, self.world_size = name, corpus, batch_size, world_size
        self.global_batch = batch_size * grad_accum * world_size
        self.prefetch = prefetch
        self.next_step = 0
        self._chunk: tuple[int, list] | None = None
        self._before: dict[int, Any] = {}  # step -> the stream's position before its examples were drawn
        self._ahead: _Ahead | None = None

    def examples(self, step: int, micro: int, rank: int) -> list:
        if self._chunk is None or self._chunk[0] != step:
            if step != self.next_step:
                raise InputError(f"dataset {self.name!r} is streamed: step {step} was asked for after step "
                                 f"{self.next_step - 1}; a stream is read in step order")
            ahead, self._ahead = self._ahead, None
            if ahead is None:
                self._before = {step: self.corpus.state_dict()}
                chunk = self.corpus.take(self.global_batch)
            else:
                chunk = ahead.result()  # its state was taken before it started
                self._before = {step: self._before[step]}
            self._chunk, self.next_step = (step, chunk), step + 1
            if self.prefetch:
                self._before[step + 1] = self.corpus.state_dict()
                self._ahead = _Ahead(self.corpus.take, self.global_batch)
        start = (micro * self.world_size + rank) * self.batch_size
        return self._chunk[1][start: start + self.batch_size]

    def state_dict(self, step: int) -> dict:
        """The stream's position before step ``step`` (the next one, or the one just drawn)."""
        if step in self._before:
            stream = self._before[step]
        elif step == self.next_step:  # nothing drawn yet, or drawn without prefetching
            stream = self.corpus.state_dict()
        else:
            raise InputError(f"dataset {self.name!r} is streamed: its position before step {step} is gone (it stands "
                             f"before step {self.next_step})")
        return {"global_batch": self.global_batch, "next_step": step, "stream": stream}

    def load_state_dict(self, state: Mapping[str, Any], step: int) -> None:
        if state["global_batch"] != self.global_batch:
            raise ResumeMismatch(f"dataset {self.name!r}: the checkpoint used a global batch of {state['global_batch']} "
                                 f"examples, this run uses {self.global_batch} (batch_size × grad_accum × world_size); "
                                 "keep the global batch to resume exactly")
        if state["next_step"] != step:
            raise ResumeMismatch(f"dataset {self.name!r}: the checkpoint's stream stands at step {state['next_step']}, "
                                 f"its trainer at step {step}")
        self.close()
        self.corpus.load_state_dict(state["stream"])
        self.next_step, self._chunk, self._before = step, None, {}

    def close(self) -> None:
        """Waits for a prefetch in flight (its examples, or its error, are dropped)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.wait()


class _Ahead:
    """``fn(*args)`` run in a daemon thread; ``result()`` waits and returns it (or raises its error)."""

    def __init__(self, fn: Callable[..., Any], *args: Any):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), name="babelzoo-stream-prefetch",
                                        daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as err:  # handed to the training thread by result()
            self._error = err

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


class _StepBatches(Dataset):
    """Map-style view whose items are whole prepared micro-batches, keyed by (step, micro)."""

    def __init__(self, datasets: Mapping[str, Any], plans: Mapping[str, BatchPlan | StreamPlan],
                 prepare: Callable[[Any], Any], rank: int, world_size: int, seed: int, single: bool):
        self.datasets, self.plans, self.prepare = datasets, plans, prepare
        self.rank, self.world_size, self.seed, self.single = rank, world_size, seed, single

    def __getitem__(self, key: tuple[int, int]) -> Any:
        step, micro = key
        examples = {name: plan.examples(step, micro, self.rank) if isinstance(plan, StreamPlan) else
                    [self.datasets[name][i] for i in plan.indices(step, micro, self.rank)]
                    for name, plan in self.plans.items()}
        slot = micro * self.world_size + self.rank
        state = np.random.SeedSequence([self.seed, step, slot]).generate_state(2)
        with seeded(int(state[0]) << 32 | int(state[1])):
            return self.prepare(examples[SINGLE] if self.single else examples)


def _worker_init(worker_id: int) -> None:
    # Ctrl-C and a scheduler's SIGTERM reach the whole process group; the main process turns
    # them into a checkpoint at the next step boundary, so its workers must keep serving it.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


class _Keys(Sampler):
    """Endless (step, micro) keys from a start step."""

    def __init__(self, start: int, grad_accum: int):
        self.start, self.grad_accum = start, grad_accum

    def __iter__(self) -> Iterator[tuple[int, int]]:
        step = self.start
        while True:
            for micro in range(self.grad_accum):
                yield step, micro
            step += 1


def _split(name: str, item: Any) -> tuple[Any, Optional[Callable[[int], Sequence[int]]], int]:
    dataset, order = item, None
    if isinstance(item, tuple) and len(item) == 2 and callable(getattr(item[1], "epoch_order", None)):
        dataset, order = item[0], item[1].epoch_order
    if not (hasattr(type(dataset), "__len__") and hasattr(type(dataset), "__getitem__")):
        raise InputTypeError(f"dataset {name!r} must be map-style (define __len__ and __getitem__); "
                             f"got {type(dataset).__name__}")
    size = len(order(0)) if order is not None else len(dataset)
    return dataset, order, size


class DataStream:
    """The endless micro-batches of one rank.

    ``data``: one dataset, or ``{name: dataset}`` for a mixture (then ``prepare`` receives
    ``{name: examples}``); a dataset may come as ``(dataset, sampler)`` where
    ``sampler.epoch_order(epoch)`` gives the epoch's order (language sampling with α).
    ``next_step()`` returns the ``grad_accum`` prepared micro-batches of the next step.
    """

    def __init__(self, data: Any, prepare: Callable[[Any], Any], *, batch_size: int, grad_accum: int, rank: int,
                 world_size: int, seed: int, num_workers: int = 0, pin_memory: bool = False):
        single = not isinstance(data, Mapping)
        items = {SINGLE: data} if single else dict(data)
        if not items:
            raise InputError("no training data: give a dataset or a dict {name: dataset}")
        datasets, self.plans = {}, {}
        for name, item in items.items():
            if getattr(item, "streamed", False):
                datasets[name], self.plans[name] = item, StreamPlan(name, item, batch_size, grad_accum, world_size)
                continue
            datasets[name], order, size = _split(name, item)
            self.plans[name] = BatchPlan(name, size, batch_size, grad_accum, world_size, seed, order)
        if num_workers and any(isinstance(p, StreamPlan) for p in self.plans.values()):
            raise ConfigError(f"num_workers={num_workers}: streamed data is read in step order by the training process "
                              "itself; set num_workers: 0")
        self.batches = _StepBatches(datasets, self.plans, prepare, rank, world_size, seed, single)
        self.grad_accum, self.num_workers, self.pin_memory, self.seed = grad_accum, num_workers, pin_memory, seed
        self.step = 0
        self._iter: Iterator | None = None

    def _loader(self) -> Iterator:
        # The DataLoader draws its workers' base seed from this generator, never from the global
        # torch RNG, so starting an iterator does not shift the training loop's random stream.
        generator = torch.Generator().manual_seed(self.seed)
        loader = DataLoader(self.batches, batch_size=None, sampler=_Keys(self.step, self.grad_accum),
                            num_workers=self.num_workers, pin_memory=self.pin_memory, generator=generator,
                            prefetch_factor=4 if self.num_workers else None,
                            worker_init_fn=_worker_init if self.num_workers else None)
        return iter(loader)

    def next_step(self) -> list[Any]:
        if self._iter is None:
            self._iter = self._loader()
        batches = [next(self._iter) for _ in range(self.grad_accum)]
        self.step += 1
        return batches

    def state_dict(self) -> dict:
        return {"step": self.step,
                "datasets": {name: plan.state_dict(self.step) if isinstance(plan, StreamPlan) else
                             {"size": plan.size, "global_batch": plan.global_batch,
                              "epoch": plan.position(self.step)[0], "chunk": plan.position(self.step)[1]}
                             for name, plan in self.plans.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["datasets"]
        if set(saved) != set(self.plans):
            raise ResumeMismatch(f"the checkpoint's datasets {sorted(saved)} differ from this run's {sorted(self.plans)}")
        for name, plan in self.plans.items():
            if isinstance(plan, StreamPlan):
                if "stream" not in saved[name]:
                    raise ResumeMismatch(f"dataset {name!r} is streamed now, but the checkpoint's was not")
                plan.load_state_dict(saved[name], int(state["step"]))
                continue
            if "size" not in saved[name]:
                raise ResumeMismatch(f"dataset {name!r} was streamed when the checkpoint was taken, but is not now")
            if saved[name]["size"] != plan.size:
                raise ResumeMismatch(f"dataset {name!r} has {plan.size} examples, but the checkpoint was taken with "
                                     f"{saved[name]['size']}: resuming would not continue the same epoch")
            if saved[name]["global_batch"] != plan.global_batch:
                raise ResumeMismatch(f"dataset {name!r}: the checkpoint used a global batch of "
                                     f"{saved[name]['global_batch']} examples, this run uses {plan.global_batch} "
                                     "(batch_size × grad_accum × world_size); keep the global batch to resume exactly")
        self.close()
        self.step = int(state["step"])

    def close(self) -> None:
        self._iter = None  # drops the iterator; its workers shut down
        for plan in self.plans.values():
            if isinstance(plan, StreamPlan):
                plan.close()
