"""Optimizers and learning-rate schedules: LAMB, AdamW with decay exclusions, warm-up + decay.

LAMB follows You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76
minutes" (Algorithm 2). Parameters are split into two groups: matrices and embeddings get weight
decay and LAMB's layer-wise trust ratio; biases and LayerNorm gains/shifts get neither, as in
the paper's BERT runs (decaying a LayerNorm gain towards 0 or rescaling a bias by its own tiny
norm only hurts).
"""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from ..zoo.config import ConfigError
from .config import TrainConfig

NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.RMSNorm)


class LAMB(torch.optim.Optimizer):
    """Layer-wise Adaptive Moments for Batch training (You et al. 2020, Algorithm 2).

    For each parameter tensor x with gradient g at step t::

        m_t = β1 m_{t-1} + (1 - β1) g            v_t = β2 v_{t-1} + (1 - β2) g²
        m̂_t = m_t / (1 - β1^t)                   v̂_t = v_t / (1 - β2^t)      (bias correction)
        r_t = m̂_t / (√v̂_t + ε)                   u_t = r_t + λ x_t
        x_{t+1} = x_t - η · φ(‖x_t‖) / ‖u_t‖ · u_t      with φ(z) = z (the trust ratio)

    The trust ratio is 1 when either norm is 0. A param group with ``adapt=False`` skips the
    trust ratio (plain Adam update with decoupled decay), used for biases and norms.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.01, adapt: bool = True, bias_correction: bool = True):
        if lr <= 0 or eps <= 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ConfigError(f"invalid LAMB hyper-parameters: lr={lr}, betas={betas}, eps={eps}, "
                              f"weight_decay={weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, adapt=adapt,
                        bias_correction=bias_correction)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("LAMB does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = float(state["step"])  # a CPU tensor: no device sync
                grad = p.grad if p.grad.dtype == p.dtype else p.grad.to(p.dtype)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.lerp_(grad, 1 - beta1)  # β1 m + (1 - β1) g
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bc1, bc2 = (1 - beta1 ** t, 1 - beta2 ** t) if group["bias_correction"] else (1.0, 1.0)
                # r = m̂ / (√v̂ + ε) = (m / bc1) / (√v / √bc2 + ε), with two temporaries
                update = v.sqrt().div_(math.sqrt(bc2)).add_(group["eps"])
                torch.div(m, update, out=update).div_(bc1)
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                if group["adapt"]:
                    w_norm, u_norm = _norm(p), _norm(update)
                    # φ(‖x‖)/‖u‖, and 1 when a norm is 0 (fresh zero init or a zero update).
                    trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                    update.mul_(trust)
                p.add_(update, alpha=-group["lr"])
        return loss


def _norm(t: torch.Tensor) -> torch.Tensor:
    """L2 norm of a tensor; for a DTensor shard (FSDP) the norm of the whole parameter, since
    the trust ratio is per layer, not per shard."""
    norm = t.norm()
    full = getattr(norm, "full_tensor", None)
    return full() if full is not None else norm


def decay_exclusions(module: nn.Module) -> set[int]:
    """ids of parameters that take no weight decay and no trust ratio: every bias, every
    normalisation layer's parameters, and any other 1-d parameter (the MLM head's output bias)."""
    excluded: set[int] = set()
    for sub in module.modules():
        for name, param in sub.named_parameters(recurse=False):
            if isinstance(sub, NORM_TYPES) or name.endswith("bias") or param.ndim < 2:
                excluded.add(id(param))
    return excluded


def param_groups(module: nn.Module, weight_decay: float, layer_lr_decay: float = 1.0,
                 num_layers: int | None = None) -> list[dict]:
    """Groups over the trainable parameters (each tied parameter once): decayed + adapted, and
    excluded (see :func:`decay_exclusions`). With ``layer_lr_decay < 1`` each of the two is
    split by depth (:func:`layer_depth`), and every group carries its ``lr_scale``
    decay^(L + 1 − depth)."""
    excluded = decay_exclusions(module)
    decayed = layer_lr_decay < 1.0
    if decayed and not num_layers:
        raise ConfigError("layer_lr_decay < 1 needs the encoder's number of layers")
    buckets: dict[tuple[int, bool], list[nn.Parameter]] = {}
    for name, param in module.named_parameters():  # named_parameters() yields a tied tensor once
        if param.requires_grad:
            depth = layer_depth(name, num_layers) if decayed else 0
            buckets.setdefault((depth, id(param) in excluded), []).append(param)
    groups = []
    for (depth, no_decay), params in sorted(buckets.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        scale = layer_lr_decay ** (num_layers + 1 - depth) if decayed else 1.0
        groups.append(dict(params=params, weight_decay=0.0 if no_decay else weight_decay, adapt=not no_decay,
                           lr_scale=scale))
    return groups


_LAYER = re.compile(r"(?:^|\.)encoder\.layers\.(\d+)\.")
_EMBEDDINGS = re.compile(r"(?:^|\.)embeddings\.")


def layer_depth(name: str, num_layers: int) -> int:
    """0 for the embeddings, i + 1 for encoder layer i, L + 1 for everything above (pooler,
    task and pre-training heads)."""
    match = _LAYER.search(name)
    if match:
        return int(match.group(1)) + 1
    return 0 if _EMBEDDINGS.search(name) else num_layers + 1


def _num_layers(module: nn.Module) -> int | None:
    for sub in module.modules():
        config = getattr(sub, "config", None)
        text = getattr(config, "text", None)
        if text is not None and hasattr(text, "num_layers"):
            return text.num_layers
    return None


def build_optimizer(module: nn.Module, config: TrainConfig, fused: bool = False) -> torch.optim.Optimizer:
    """LAMB or AdamW over :func:`param_groups` of ``module`` (model + objectives' heads).
    Every group records its ``base_lr`` (lr × its layer-decay scale) for :class:`Schedule` from
    the start, so that the optimizer's state dict has the same layout before and after the
    first step. ``fused``: AdamW's fused kernels (one pass per tensor, and a non-finite step
    skipped on the device; see :mod:`babelzoo.train.precision`), else the multi-tensor path."""
    optim = config.optim
    groups = param_groups(module, optim.weight_decay, optim.layer_lr_decay, _num_layers(module))
    for g in groups:
        g["base_lr"] = optim.lr * g.pop("lr_scale")
        g["lr"] = g["base_lr"]
    if optim.optimizer == "lamb":
        return LAMB(groups, lr=optim.lr, betas=optim.betas, eps=optim.eps, weight_decay=optim.weight_decay)
    for g in groups:
        g.pop("adapt")
    # foreach is the fast multi-tensor path on CPU and GPU; it also handles FSDP's DTensors.
    options = {"fused": True} if fused else {"foreach": True}
    return torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas, eps=optim.eps, weight_decay=optim.weight_decay,
                             **options)

class Schedule:
    """Learning-rate multiplier f(step) ∈ [0, 1]: linear warm-up over ``warmup_steps``, then

    - ``linear``: straight down to ``min_ratio`` at ``total_steps`` (BERT);
    - ``cosine``: half a cosine down to ``min_ratio`` (Loshchilov & Hutter 2017, SGDR);
    - ``inverse_sqrt``: √(warmup/step) (Vaswani et al. 2017, "Attention Is All You Need");
    - ``constant``.

    ``step`` counts optimizer updates from 0; the rate for update ``step`` is base × f(step+1),
    so the first update already uses a non-zero rate.
    """

    def __init__(self, kind: str, total_steps: int, warmup_steps: int = 0, min_ratio: float = 0.0):
        if kind not in ("linear", "cosine", "inverse_sqrt", "constant"):
            raise ConfigError(f"unknown schedule {kind!r}; known: linear, cosine, inverse_sqrt, constant")
        self.kind, self.total, self.warmup, self.min_ratio = kind, total_steps, warmup_steps, min_ratio

    def factor(self, step: int) -> float:
        s = step + 1
        if self.warmup and s <= self.warmup:
            return s / self.warmup
        if self.kind == "constant":
            return 1.0
        if self.kind == "inverse_sqrt":
            return math.sqrt(max(self.warmup, 1) / s)
        span = max(self.total - self.warmup, 1)
        progress = min(max(s - self.warmup, 0) / span, 1.0)
        if self.kind == "linear":
            shape = 1.0 - progress
        else:
            shape = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.min_ratio + (1.0 - self.min_ratio) * shape

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every group's lr to its base lr × f(step); return the first group's lr."""
        f = self.factor(step)
        for group in optimizer.param_groups:
            group.setdefault("base_lr", group["lr"])
            group["lr"] = group["base_lr"] * f
        return optimizer.param_groups[0]["lr"]


def build_schedule(config: TrainConfig) -> Schedule:
    optim = config.optim
    return Schedule(optim.schedule, config.max_steps, optim.warmup_steps, optim.min_lr_ratio)

