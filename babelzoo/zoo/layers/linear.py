"""``Linear``: ``nn.Linear`` whose fp32 CPU products, where no gradient is recorded, may run
on oneDNN instead of ATen's BLAS.

ATen's fp32 ``addmm`` on the CPU calls MKL, whose AVX-512 kernels run on Intel processors only;
on an AMD processor with AVX-512 it takes its AVX2 path. oneDNN's kernels use AVX-512 there: on
a 2-core AMD EPYC with AVX-512, 534 × 768 · 768 × 3072 runs at about 330 GFLOP/s against MKL's
165, with the same fp32 accuracy (relative error 5e-7 against float64 for both). Where the
processor lacks AVX-512, MKL and oneDNN were equally fast, and ATen keeps the product.

The choice (:func:`cpu_gemm`): ``"auto"`` (the default) uses oneDNN on AMD processors with
AVX-512, ``"onednn"`` wherever oneDNN is built in, ``"aten"`` never. Training, autocast, other
dtypes and other devices always take ``F.linear``. The module is an ``nn.Linear`` (same
parameters, same state dict, found by ``isinstance``), so quantization, pruning and the
checkpoint converters treat it as one.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError

GEMMS = ("auto", "onednn", "aten")
_choice = "auto"


@contextlib.contextmanager
def cpu_gemm(kind: str) -> Iterator[None]:
    """Within the block, fp32 CPU inference products of :class:`Linear` layers run on ``kind``
    (``"auto"``, ``"onednn"`` or ``"aten"``)::

        with cpu_gemm("aten"):      # ATen's BLAS, as plain nn.Linear
            vectors = encoder.encode(texts)
    """
    global _choice
    if kind not in GEMMS:
        raise InputError(f"unknown CPU matrix product {kind!r}; choose one of {', '.join(GEMMS)}")
    previous, _choice = _choice, kind
    try:
        yield
    finally:
        _choice = previous


def onednn_preferred() -> bool:
    """``"auto"``'s rule: oneDNN is built in and enabled, and the processor is AMD's with AVX-512."""
    return _onednn_usable() and _amd_avx512()


@functools.lru_cache(maxsize=None)
def _amd_avx512() -> bool:
    if not torch.backends.cpu.get_cpu_capability().startswith("AVX512"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return any(line.startswith("vendor_id") and "AuthenticAMD" in line for line in info)
    except OSError:
        return False


def _onednn_usable() -> bool:
    return torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled


def _use_onednn() -> bool:
    if _choice == "aten":
        return False
    return _onednn_usable() if _choice == "onednn" else onednn_preferred()


class Linear(nn.Linear):
    """``nn.Linear`` with :func:`cpu_gemm`'s choice of kernel for fp32 CPU inference."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._onednn_applies(x):
            return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)

    def _onednn_applies(self, x: torch.Tensor) -> bool:
        if x.device.type != "cpu" or x.dtype != torch.float32 or self.weight.dtype != torch.float32 or not x.numel():
            return False
        recorded = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, self.weight, self.bias))
        return not recorded and not torch.is_autocast_enabled("cpu") and _use_onednn()
