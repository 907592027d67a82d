"""BERT's weight initialisation, shared by every model class."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


def init_weights(module: nn.Module, std: float, generator: Optional[torch.Generator] = None) -> None:
    """Linear and embedding weights ~ N(0, std²) (an embedding's padding row zero), biases 0,
    norm gains 1 and LayerNorm biases 0; other modules are left as they are."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std, generator=generator)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std, generator=generator)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, (nn.LayerNorm, nn.RMSNorm)):
        nn.init.ones_(module.weight)
        if isinstance(module, nn.LayerNorm) and module.bias is not None:
            nn.init.zeros_(module.bias)
