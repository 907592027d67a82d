"""Mixed precision: autocast, loss scaling, fp32 master parameters, skipped non-finite steps.

Parameters and optimizer state stay in fp32 (the "master" copy, Micikevicius et al. 2018,
"Mixed Precision Training"); ``torch.autocast`` runs matmuls in bf16 or fp16. fp16's narrow
exponent range needs dynamic loss scaling (``GradScaler``: multiply the loss by S, unscale the
gradients, halve S after an overflow, grow it after a run of clean steps); bf16 has fp32's range
and needs none. A step whose gradients hold inf/NaN is skipped and counted in every mode, so one
bad batch never writes NaN into the weights.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable, Optional

import torch
from torch import nn

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class StepResult:
    grad_norm: float
    skipped: bool


class Precision:
    """One precision mode on one device.

    ``fp32``: plain; ``bf16``: autocast to bfloat16 (CPU and CUDA); ``fp16``: autocast to
    float16 with a ``GradScaler`` (meant for CUDA; it also runs on CPU, slowly, which lets the
    scaler logic be tested anywhere).
    """

    def __init__(self, mode: str, device: torch.device, init_scale: float = 2.0 ** 16):
        if mode not in DTYPES:
            raise ValueError(f"unknown precision {mode!r}; known: {', '.join(DTYPES)}")
        if mode == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ValueError("precision='bf16' needs a GPU with bfloat16 support (Ampere or newer); use 'fp16'")
        self.mode, self.device, self.dtype = mode, device, DTYPES[mode]
        self.scaler = torch.amp.GradScaler(device.type, init_scale=init_scale) if mode == "fp16" else None
        self.skipped = 0

    def autocast(self):
        """Context for the forward pass and the loss (not for backward or the optimizer step)."""
        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)

    def check_master_params(self, module: nn.Module) -> None:
        """Mixed precision keeps fp32 master weights: refuse a model already cast to half."""
        if self.dtype is None:
            return
        bad = [n for n, p in module.named_parameters() if p.is_floating_point() and p.dtype != torch.float32]
        if bad:
            raise ValueError(f"precision={self.mode!r} keeps fp32 parameters and lets autocast lower the "
                             f"matmuls; these parameters are not fp32: {', '.join(bad[:5])}"
                             f"{' ...' if len(bad) > 5 else ''}. Leave the model in float32.")

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter],
             max_grad_norm: float = 0.0) -> StepResult:
        """Unscale, measure the global gradient norm, skip the update if it is not finite, else
        clip to ``max_grad_norm`` (0: no clipping) and step. Gradients are not zeroed here."""
        params = list(params)
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        grads = [p.grad for p in params if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
        full = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: DTensor norm
        value = float(full)
        finite = bool(torch.isfinite(full))
        if finite:
            if max_grad_norm > 0:
                torch.nn.utils.clip_grads_with_norm_([p for p in params if p.grad is not None], max_grad_norm, norm)
            if self.scaler is not None:
                self.scaler.step(optimizer)
            else:
                optimizer.step()
        else:
            self.skipped += 1
        if self.scaler is not None:
            self.scaler.update()  # backs the scale off after an overflow
        return StepResult(value, not finite)

    @property
    def scale(self) -> Optional[float]:
        return self.scaler.get_scale() if self.scaler is not None else None

    # --- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"mode": self.mode, "skipped": self.skipped,
                "scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state: dict) -> None:
        self.skipped = int(state.get("skipped", 0))
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
