"""Throughput accounting: FLOPs per token of a model, the machine's measured matmul peak, MFU.

Model FLOPs utilisation (MFU, Chowdhery et al. 2022, "PaLM", Appendix B) is the rate of the
FLOPs the model needs, not of the FLOPs the hardware happened to run (recomputation, padding
tricks and framework overhead do not count), divided by the peak rate. Training costs 3× the
forward pass (the backward pass computes gradients for activations and for weights). The peak
is measured here, in-process, as the best rate of a large square matmul in the training dtype,
so MFU compares like with like on any machine.
"""

from __future__ import annotations

import math

import time
from typing import Any, Callable, Optional

import torch

from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig

_PEAKS: dict[tuple[str, str, int], float] = {}


def text_flops_per_token(text: EncoderConfig, seq_len: int, predicted_fraction: float = 1.0,
                         training: bool = True) -> float:
    """FLOPs per input token of the text encoder (+ MLM head on ``predicted_fraction`` of the
    tokens), counting each multiply-add as 2 FLOPs.

    The encoder's layers are counted by its family
    (:meth:`~babelzoo.zoo.config.EncoderConfig.encoder_flops_per_token`; a Transformer layer is
    2·(3H² + H²) for the projections, 2·2HI for the feed-forward and 2·2·L·H for attention over
    L keys), plus ALBERT's E→H projection (2EH) and the MLM head 2·(HE + EV) per predicted
    token. Embedding lookups and element-wise operations are not counted (as in PaLM's formula).
    """
    h, e = text.hidden_size, text.embedding_dim
    encoder = text.encoder_flops_per_token(seq_len)
    project = 2 * e * h if e != h else 0
    head = 2 * (h * e + e * text.vocab_size) * predicted_fraction if text.mlm_head else 0.0
    forward = encoder + project + head
    return float(3 * forward if training else forward)


def model_flops_per_token(config: ModelConfig | Any, seq_len: int, predicted_fraction: float = 1.0,
                          training: bool = True) -> float:
    """:func:`text_flops_per_token` for a :class:`ModelConfig` or a model that has one."""
    config = getattr(config, "config", config)
    if isinstance(config, ModelConfig):
        config = config.text
    return text_flops_per_token(config, seq_len, predicted_fraction, training)


def _cpu_attention_formulas() -> dict:
    """``torch.utils.flop_counter`` has formulas for the CUDA attention kernels but not for the
    CPU flash kernel that SDPA dispatches to; count it like any other exact attention."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten

    def forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
        return sdpa_backward_flop_count(grad_out, query, key, value)

    if not hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        return {}
    return {aten._scaled_dot_product_flash_attention_for_cpu: forward,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: backward}


def _onednn_linear_formula() -> dict:
    """The oneDNN linear that :class:`~babelzoo.zoo.layers.linear.Linear` may run for fp32 CPU
    inference: 2·(rows of x)·in·out, as ``addmm``."""
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return {}

    def forward(x_shape, weight_shape, *args, out_shape=None, **kwargs) -> int:
        return 2 * math.prod(x_shape) * weight_shape[0]

    return {torch.ops.mkldnn._linear_pointwise: forward}


def count_flops(fn: Callable[[], Any]) -> int:
    """FLOPs that ``fn`` actually runs (matmuls, attention, convolutions; forward and any
    backward it triggers), counted by ``torch.utils.flop_counter`` (with formulas for the CPU
    flash-attention and oneDNN linear kernels it lacks). Fused RNN kernels are not
    counted (their matmuls happen inside one opaque op)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping={**_cpu_attention_formulas(), **_onednn_linear_formula()})
    with counter:
        fn()
    return int(counter.get_total_flops())


def measure_matmul_peak(device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                        size: Optional[int] = None, repeats: int = 6) -> float:
    """Best FLOP/s of an n×n @ n×n matmul (2n³ FLOPs) in ``dtype`` on ``device``, after a
    warm-up; cached per (device, dtype, n) for the life of the process."""
    device = torch.device(device)
    size = size or (4096 if device.type == "cuda" else 1024)
    key = (str(device), str(dtype), size)
    if key in _PEAKS:
        return _PEAKS[key]
    # its own generator: measuring leaves the caller's random stream (a resumed run's dropout) as it was
    generator = torch.Generator(device).manual_seed(0)
    a = torch.randn(size, size, device=device, generator=generator).to(dtype)
    b = torch.randn(size, size, device=device, generator=generator).to(dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    a @ b
    sync()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - start)
    _PEAKS[key] = 2 * size ** 3 / best
    return _PEAKS[key]


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over peak FLOP/s."""
    return tokens_per_second * flops_per_token / peak_flops if peak_flops > 0 else 0.0
