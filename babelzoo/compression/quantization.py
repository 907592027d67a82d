"""Post-training quantization of a model's linear layers (:mod:`babelzoo.zoo.layers.quantized`).

``quantize(model, "int8")`` is dynamic int8 quantization for CPU inference: int8 weights per
output channel, activations quantized per call, int8 matrix products. ``"int8_weight"`` and
``"int4_weight"`` store the weights in 8 or 4 bits and compute in the input's precision (a
memory saving on any device). The result saves with ``save_pretrained`` (its
``quantization.json`` names the scheme and the layers) and loads with ``from_pretrained``::

    small = quantize(model, "int8")
    small.save_pretrained("e5-int8")
    babelzoo.from_pretrained("e5-int8")        # the same quantized model
"""

from __future__ import annotations

import copy
from typing import Iterable, Optional, Sequence

import torch
from torch import nn

from ..errors import InputError
from ..zoo.layers.quantized import SCHEMES, quantize_linears
from ..zoo.sentences import attached_tokenizer


def quantize(model, scheme: str = "int8", modules: Optional[Iterable[str]] = None, *,
             calibration: Optional[Sequence[str]] = None, alpha: float = 0.5, max_length: int = 128):
    """A quantized copy of ``model`` for inference (eval mode, no gradients). ``modules``: the
    qualified names of the ``nn.Linear`` layers to quantize (default: every one in the encoder;
    the word embeddings and the heads stay in full precision).

    ``calibration`` (texts, ``"int8"`` only) turns on SmoothQuant (Xiao et al. 2023, "SmoothQuant:
    Accurate and Efficient Post-Training Quantization for Large Language Models", §4): the texts
    run through the model (its ``tokenizer``), and every quantized layer divides input channel j
    by s_j = max|X_j|^α / max|W_{:,j}|^{1−α} (α = ``alpha``), moving the activations' outlier
    channels into the weights, which are quantized per output channel::

        fast = quantize(model, "int8", calibration=texts_in_the_target_languages)
    """
    if scheme not in SCHEMES:
        raise InputError(f"unknown quantization scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if getattr(model, "quantization", None) is not None:
        raise InputError(f"the model is already quantized ({model.quantization['scheme']})")
    if calibration is not None and scheme != "int8":
        raise InputError(f"calibration (SmoothQuant) applies to the 'int8' scheme, whose activations are "
                         f"quantized; {scheme!r} quantizes weights only")
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha={alpha} must lie in [0, 1] (SmoothQuant's migration strength)")
    tokenizer = attached_tokenizer(model)
    quantized = copy.deepcopy(model, {id(tokenizer): tokenizer}).eval()  # the tokenizer is shared, not copied
    scales = None
    if calibration is not None:
        names = _linear_names(quantized, modules)
        maxima = activation_maxima(quantized, calibration, names, max_length)
        linears = dict(quantized.named_modules())
        scales = {name: smoothing_scales(maxima[name], linears[name].weight.detach(), alpha) for name in names}
        modules = names
    names = quantize_linears(quantized, scheme, modules, input_scales=scales)
    if not names:
        raise InputError("quantize: the model has no linear layer to quantize")
    for param in quantized.parameters():
        param.requires_grad_(False)
    quantized.quantization = {"scheme": scheme, "modules": names}
    if calibration is not None:
        quantized.quantization["smoothing"] = {"method": "smoothquant", "alpha": alpha, "texts": len(calibration)}
    return quantized


def smoothing_scales(activation_max: torch.Tensor, weight: torch.Tensor, alpha: float) -> torch.Tensor:
    """SmoothQuant's s_j = max|X_j|^α / max|W_{:,j}|^{1−α} for ``weight`` [out, in] and the
    calibration maxima ``activation_max`` [in]; channels never seen active keep s_j = 1."""
    w = weight.float().abs().amax(dim=0).clamp(min=1e-5)
    a = activation_max.float().clamp(min=1e-5)
    s = a.pow(alpha) / w.pow(1.0 - alpha)
    return torch.where(activation_max > 0, s, torch.ones_like(s)).clamp(min=1e-5)


def activation_maxima(model, texts: Sequence[str], names: Sequence[str], max_length: int = 128,
                      batch_size: int = 32) -> dict[str, torch.Tensor]:
    """max |x_j| per input channel of every linear layer ``names`` over the real tokens of
    ``texts`` (the model runs unpadded, so padding never counts where the family packs)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise InputError("calibration texts need the model's tokenizer (model.tokenizer is None); "
                         "attach one or load the model with its tokenizer")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise InputError("calibration: no non-empty text to calibrate on")
    rows = tokenizer.batch_encode(list(texts), max_length=max_length, padding=False, truncation=True,
                                  return_tensors=None)["input_ids"]
    rows.sort(key=len)
    maxima: dict[str, torch.Tensor] = {}

    def record(name):
        def hook(module, inputs):
            x = inputs[0].detach().abs().reshape(-1, inputs[0].shape[-1]).amax(dim=0).float()
            maxima[name] = x if name not in maxima else torch.maximum(maxima[name], x)
        return hook

    modules = dict(model.named_modules())
    handles = [modules[name].register_forward_pre_hook(record(name)) for name in names]
    device = next(model.parameters()).device
    pad = tokenizer.specials.pad
    try:
        with torch.no_grad():
            for start in range(0, len(rows), batch_size):
                batch = rows[start:start + batch_size]
                width = max(len(r) for r in batch)
                ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for i, r in enumerate(batch):
                    ids[i, :len(r)] = torch.as_tensor(r)
                    mask[i, :len(r)] = 1
                model(ids.to(device), attention_mask=mask.to(device), unpad=True)
    finally:
        for handle in handles:
            handle.remove()
    missing = [name for name in names if name not in maxima]
    if missing:
        raise InputError(f"calibration: layers {missing[:5]} never ran on the calibration texts")
    return maxima


def _linear_names(model, modules: Optional[Iterable[str]]) -> list[str]:
    linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    if modules is None:
        return [name for name in linears if name.startswith("encoder.")]
    return list(modules)
