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
from typing import Iterable, Optional

from ..errors import InputError
from ..zoo.layers.quantized import SCHEMES, quantize_linears


def quantize(model, scheme: str = "int8", modules: Optional[Iterable[str]] = None):
    """A quantized copy of ``model`` for inference (eval mode, no gradients). ``modules``: the
    qualified names of the ``nn.Linear`` layers to quantize (default: every one in the encoder;
    the word embeddings and the heads stay in full precision)."""
    if scheme not in SCHEMES:
        raise InputError(f"unknown quantization scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if getattr(model, "quantization", None) is not None:
        raise InputError(f"the model is already quantized ({model.quantization['scheme']})")
    tokenizer = getattr(model, "tokenizer", None)
    quantized = copy.deepcopy(model, {id(tokenizer): tokenizer}).eval()  # the tokenizer is shared, not copied
    names = quantize_linears(quantized, scheme, modules)
    if not names:
        raise InputError("quantize: the model has no linear layer to quantize")
    for param in quantized.parameters():
        param.requires_grad_(False)
    quantized.quantization = {"scheme": scheme, "modules": names}
    return quantized
