"""Mixed precision: autocast, loss scaling, fp32 master parameters, skipped non-finite steps.

Parameters and optimizer state stay in fp32 (the "master" copy, Micikevicius et al. 2018,
"Mixed Precision Training"); ``torch.autocast`` runs matmuls in bf16 or fp16. fp16's narrow
exponent range needs dynamic loss scaling (``GradScaler``: multiply the loss by S, unscale the
gradients, halve S after an overflow, grow it after a run of clean steps); bf16 has fp32's range
and needs none. A step whose gradients hold inf/NaN is skipped and counted in every mode, so one
bad batch never writes NaN into the weights.

With an optimizer that can skip on the device (fused AdamW reads a ``found_inf`` tensor, as
``GradScaler`` uses it), the decision never leaves the device: the step returns the gradient
norm and the skip flag as tensors, and nothing is read back to the host. Other optimizers (LAMB,
FSDP's multi-tensor AdamW) are skipped by a host decision, one read per step.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterable, Optional

import torch
from torch import nn

from ..errors import InputError
from ..zoo.config import ConfigError

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class StepResult:
    grad_norm: torch.Tensor  # 0-dim, on the device
    skipped: torch.Tensor    # 0-dim bool, on the device


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer.step`` honours a ``found_inf`` tensor (torch's fused optimizers)."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


class Precision:
    """One precision mode on one device.

    ``fp32``: plain; ``bf16``: autocast to bfloat16 (CPU and CUDA); ``fp16``: autocast to
    float16 with a ``GradScaler`` (meant for CUDA; it also runs on CPU, slowly, which lets the
    scaler logic be tested anywhere).
    """

    def __init__(self, mode: str, device: torch.device, init_scale: float = 2.0 ** 16):
        if mode not in DTYPES:
            raise ConfigError(f"unknown precision {mode!r}; known: {', '.join(DTYPES)}")
        if mode == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ConfigError("precision='bf16' needs a GPU with bfloat16 support (Ampere or newer); use 'fp16'")
        self.mode, self.device, self.dtype = mode, device, DTYPES[mode]
        self.scaler = torch.amp.GradScaler(device.type, init_scale=init_scale) if mode == "fp16" else None
        self._skipped = torch.zeros((), dtype=torch.long, device=device)

    @property
    def skipped(self) -> int:
        """Steps skipped so far (reads the device)."""
        return int(self._skipped)

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
            raise InputError(f"precision={self.mode!r} keeps fp32 parameters and lets autocast lower the "
                             f"matmuls; these parameters are not fp32: {', '.join(bad[:5])}"
                             f"{' ...' if len(bad) > 5 else ''}. Leave the model in float32.")

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter],
             max_grad_norm: float = 0.0) -> StepResult:
        """Unscale, measure the global gradient norm, clip to ``max_grad_norm`` (0: no
        clipping) and step, unless the norm is not finite: then the step is skipped (parameters
        and optimizer state untouched) and counted. Gradients are not zeroed here."""
        params = list(params)
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        with_grad = [p for p in params if p.grad is not None]
        norm = (torch.nn.utils.get_total_norm([p.grad for p in with_grad]) if with_grad
                else torch.zeros((), device=self.device))
        full = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP: DTensor norm
        bad = ~torch.isfinite(full)
        if max_grad_norm > 0 and with_grad:  # a skipped step's gradients are discarded anyway
            torch.nn.utils.clip_grads_with_norm_(with_grad, max_grad_norm, norm)
        if skips_on_device(optimizer):
            if self.scaler is not None:
                self.scaler.step(optimizer)  # hands the unscaling's found_inf to the optimizer
            else:
                optimizer.found_inf, optimizer.grad_scale = bad.float(), None
                try:
                    optimizer.step()
                finally:
                    del optimizer.found_inf, optimizer.grad_scale
        elif not bool(bad):  # the host decides: one read of the device
            if self.scaler is not None:
                self.scaler.step(optimizer)
            else:
                optimizer.step()
        if self.scaler is not None:
            self.scaler.update()  # backs the scale off after an overflow
        self._skipped += bad.to(self._skipped.device)
        return StepResult(full.detach(), bad)

    def scale_tensor(self) -> Optional[torch.Tensor]:
        """A copy of fp16's current loss scale, on the device (None in the other modes)."""
        if self.scaler is None or self.scaler._scale is None:  # the scaler creates it on first use
            return None
        return self.scaler._scale.detach().clone().reshape(())

    @property
    def scale(self) -> Optional[float]:
        return self.scaler.get_scale() if self.scaler is not None else None

    # --- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"mode": self.mode, "skipped": self.skipped,
                "scaler": self.scaler.state_dict() if self.scaler is not None else None}

    def load_state_dict(self, state: dict) -> None:
        self._skipped.fill_(int(state.get("skipped", 0)))
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
