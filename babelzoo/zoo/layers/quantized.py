"""Quantized linear layers whose weights are plain tensors (so they save as safetensors).

* ``int8`` (:class:`Int8Linear`): weights in int8 per output channel, activations quantized per
  call (dynamic quantization, Jacob et al. 2018; Zafrir et al. 2019, "Q8BERT"), the matrix
  product in int8 by PyTorch's quantized CPU kernels (fbgemm/onednn). For CPU inference.
  Activations take 8 bits where the CPU sums int8 products exactly (VNNI), 7 elsewhere
  (:func:`full_range_activations`), so one checkpoint gives slightly closer vectors on VNNI.
* ``int8_weight`` / ``int4_weight`` (:class:`WeightOnlyLinear`): weights stored in 8 or 4 bits
  (4-bit in groups of 32 input columns, two values per byte), dequantized to the input's dtype
  for the product. A memory saving on any device, not a CPU speed-up.

Symmetric quantization everywhere: q = round(w / s) clipped to [−(2^{b−1}−1), 2^{b−1}−1] with
s = max|w| / (2^{b−1}−1) over the channel (or group), w ≈ s·q.

:func:`quantize_linears` swaps a model's ``nn.Linear`` modules for these in place;
:func:`~babelzoo.zoo.pretrained.from_pretrained` rebuilds the same structure from a
checkpoint's ``quantization.json`` before loading its weights.
"""

from __future__ import annotations

import functools
import warnings
from typing import Iterable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import InputError

SCHEMES = ("int8", "int8_weight", "int4_weight")
GROUP = 32  # input columns per 4-bit scale


def _symmetric(weight: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, s) with weight ≈ s·q, one scale per row of ``weight`` ([rows, cols])."""
    top = 2 ** (bits - 1) - 1
    scale = weight.abs().amax(dim=1).clamp(min=1e-12) / top
    q = torch.round(weight / scale[:, None]).clamp(-top, top).to(torch.int8)
    return q, scale.float()


def _filled(layer: nn.Module, stored: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, linear: nn.Linear):
    """``layer`` holding the quantized weights ``q`` (into ``stored``), their scales and ``linear``'s bias."""
    stored.copy_(q)
    layer.weight_scale.copy_(scale)
    if linear.bias is not None:
        layer.bias.data.copy_(linear.bias.detach().float())
    return layer


def full_range_activations() -> bool:
    """Whether this CPU's int8 kernel sums u8·s8 products exactly, so activations can use all 8
    bits. x86 without VNNI pairs the products in saturating 16-bit sums (255·127·2 > 2¹⁵), and
    there activations keep 7 bits (``reduce_range``); VNNI (and ARM) accumulate in 32 bits. Decided
    once per process and quantized engine by a product that saturates where the sums are 16-bit."""
    return _sums_exactly(torch.backends.quantized.engine)


@functools.lru_cache(maxsize=None)
def _sums_exactly(engine: str) -> bool:
    columns = 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        weight = torch._make_per_channel_quantized_tensor(
            torch.full((1, columns), 127, dtype=torch.int8), torch.full((1,), 1 / 127, dtype=torch.double),
            torch.zeros(1, dtype=torch.long), 0)
        packed = torch.ops.quantized.linear_prepack(weight, None)
    out = torch.ops.quantized.linear_dynamic(torch.ones(1, columns), packed, False)
    return abs(out.item() - columns) < 1e-3 * columns


class Int8Linear(nn.Module):
    """Dynamic int8 linear layer: ``weight_int8`` [out, in] and ``weight_scale`` [out] hold the
    weights, ``bias`` stays in fp32; the quantized kernel packs them on first use.

    ``smoothed``: the layer holds SmoothQuant's per-input-channel ``input_scale`` s (Xiao et al.
    2023): y = (x / s)·(W·diag(s))ᵀ + b, the same product with the activations' outlier channels
    divided down before their (per-tensor) quantization and the weights, quantized per output
    channel, carrying them instead."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, smoothed: bool = False):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer("weight_int8", torch.zeros(out_features, in_features, dtype=torch.int8))
        self.register_buffer("weight_scale", torch.ones(out_features))
        self.register_buffer("input_scale", torch.ones(in_features) if smoothed else None)
        self.bias = nn.Parameter(torch.zeros(out_features), requires_grad=False) if bias else None
        self._packed = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, input_scale: Optional[torch.Tensor] = None) -> "Int8Linear":
        """Quantize ``linear``; ``input_scale`` [in] (SmoothQuant's s) moves onto the weights first."""
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, input_scale is not None)
        weight = linear.weight.detach().float()
        if input_scale is not None:
            layer.input_scale.copy_(input_scale)
            weight = weight * input_scale[None, :]
        return _filled(layer, layer.weight_int8, *_symmetric(weight, 8), linear)

    @property
    def weight(self) -> torch.Tensor:
        """The dequantized weight (for code that reads ``.weight``, e.g. row-selected queries)."""
        weight = self.weight_int8.float() * self.weight_scale[:, None]
        return weight if self.input_scale is None else weight / self.input_scale[None, :]

    def _load_from_state_dict(self, *args, **kwargs):
        self._packed = None  # new weights: pack again
        super()._load_from_state_dict(*args, **kwargs)

    def _pack(self):
        if self.weight_int8.device.type != "cpu":
            raise InputError("int8 (dynamic) layers run on the CPU only; use 'int8_weight' on other devices")
        zeros = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():  # PyTorch deprecates its quantized tensor type, not these kernels
            warnings.simplefilter("ignore", UserWarning)
            weight = torch._make_per_channel_quantized_tensor(self.weight_int8, self.weight_scale.double(), zeros, 0)
            return torch.ops.quantized.linear_prepack(weight, None if self.bias is None else self.bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._packed is None:
            self._packed = self._pack()
        dtype = x.dtype
        x = x.float()
        if self.input_scale is not None:
            x = x / self.input_scale
        out = torch.ops.quantized.linear_dynamic(x.contiguous(), self._packed, not full_range_activations())
        return out.to(dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class WeightOnlyLinear(nn.Module):
    """Weights in ``bits`` (8: one scale per output row; 4: one per group of 32 input columns,
    two values per byte in ``weight_packed``), dequantized for every product."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, bits: int = 8):
        super().__init__()
        if bits not in (4, 8):
            raise InputError(f"weight-only quantization takes 4 or 8 bits, not {bits}")
        if bits == 4 and in_features % GROUP:
            raise InputError(f"4-bit weights need in_features divisible by {GROUP} (got {in_features})")
        self.in_features, self.out_features, self.bits = in_features, out_features, bits
        rows, cols = (out_features, in_features) if bits == 8 else (out_features * in_features // GROUP, GROUP // 2)
        self.register_buffer("weight_packed", torch.zeros(rows, cols, dtype=torch.int8 if bits == 8 else torch.uint8))
        self.register_buffer("weight_scale", torch.ones(out_features if bits == 8 else rows))
        self.bias = nn.Parameter(torch.zeros(out_features), requires_grad=False) if bias else None

    @classmethod
    def from_linear(cls, linear: nn.Linear, bits: int) -> "WeightOnlyLinear":
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, bits)
        weight = linear.weight.detach().float()
        if bits == 4:
            q, scale = _symmetric(weight.reshape(-1, GROUP), 4)
            nibbles = (q + 8).to(torch.uint8)  # [-7, 7] → [1, 15]
            q = nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)
        else:
            q, scale = _symmetric(weight, 8)
        return _filled(layer, layer.weight_packed, q, scale, linear)

    @property
    def weight(self) -> torch.Tensor:
        if self.bits == 8:
            return self.weight_packed.float() * self.weight_scale[:, None]
        packed = self.weight_packed
        q = torch.stack([(packed & 0xF), (packed >> 4)], dim=-1).reshape(packed.shape[0], GROUP).float() - 8
        return (q * self.weight_scale[:, None]).reshape(self.out_features, self.in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"bits={self.bits}")


def quantized_linear(linear: nn.Linear, scheme: str, input_scale: Optional[torch.Tensor] = None) -> nn.Module:
    if scheme == "int8":
        return Int8Linear.from_linear(linear, input_scale)
    if input_scale is not None:
        raise InputError(f"SmoothQuant's input scales apply to the 'int8' scheme (activations quantized), "
                         f"not to {scheme!r} (weights only)")
    if scheme in ("int8_weight", "int4_weight"):
        return WeightOnlyLinear.from_linear(linear, 8 if scheme == "int8_weight" else 4)
    raise InputError(f"unknown quantization scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def empty_quantized_linear(linear: nn.Linear, scheme: str, smoothed: bool = False) -> nn.Module:
    """A quantized layer of ``linear``'s shape whose weights a checkpoint will fill."""
    bias = linear.bias is not None
    if scheme == "int8":
        return Int8Linear(linear.in_features, linear.out_features, bias, smoothed)
    if scheme in ("int8_weight", "int4_weight"):
        return WeightOnlyLinear(linear.in_features, linear.out_features, bias, 8 if scheme == "int8_weight" else 4)
    raise InputError(f"unknown quantization scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")


def quantize_linears(model: nn.Module, scheme: str, names: Optional[Iterable[str]] = None,
                     empty: bool = False, input_scales: Optional[dict[str, torch.Tensor]] = None,
                     smoothed: bool = False) -> list[str]:
    """Replace the ``nn.Linear`` modules ``names`` (qualified names; every one under
    ``model.encoder`` when None) by quantized layers, in place; returns the names replaced.
    ``empty``: layers with zero weights, to be filled by a checkpoint (``smoothed``: with room
    for SmoothQuant's input scales); ``input_scales``: SmoothQuant's s per layer name."""
    linears = {name: module for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    if names is None:
        names = [name for name in linears if name.startswith("encoder.")]
    names = list(names)
    unknown = [name for name in names if name not in linears]
    if unknown:
        raise InputError(f"quantize: no nn.Linear named {unknown[:5]} in the model")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        if empty:
            layer = empty_quantized_linear(linears[name], scheme, smoothed)
        else:
            layer = quantized_linear(linears[name], scheme, None if input_scales is None else input_scales[name])
        setattr(parent, child, layer)
    return names
