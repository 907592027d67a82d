"""What every check shares: its context (device, scratch folder, data), and the outcomes a check
raises (:class:`Skip`, :class:`Failed`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import torch


class Skip(Exception):
    """A check that cannot run here; the message says why."""


class Failed(Exception):
    """A check that ran and missed; the message names the figure, ``details`` keeps what it measured."""

    def __init__(self, message: str, details: Optional[dict] = None):
        super().__init__(message)
        self.details = details or {}


def expect(condition: bool, message: str, details: Optional[dict] = None) -> None:
    if not condition:
        raise Failed(message, details)


@dataclass
class Context:
    device: torch.device
    dry: bool
    work: Path
    steps: int
    log: Callable[[str], None]
    sources: dict[str, list[dict]] = field(default_factory=dict)  # example type -> recipe data sources
    tokenizer_dir: Optional[Path] = None
    sentences: list[str] = field(default_factory=list)
    speed_args: list[str] = field(default_factory=list)
    peaks: dict[str, float] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self, gpu: int, dry: int) -> int:
        return dry if self.dry else gpu


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.double()
    return float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
