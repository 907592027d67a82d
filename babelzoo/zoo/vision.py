"""Image towers that turn pixels into tokens at the text width.

- :class:`PatchEmbedding`: ViLT's raw linear patch projection (Kim et al. 2021, "ViLT:
  Vision-and-Language Transformer Without Convolution or Region Supervision"), i.e. ViT's
  patch embedding (Dosovitskiy et al. 2021) with learned positions that are resized bicubically
  for other image sizes.
- :class:`TimmBackbone`: any timm model, created lazily by name, whose patch tokens or pooled
  feature are projected to the text width.

Both return ``[B, N, H]`` tokens; the fusion model adds the modality-type embedding.
"""

from __future__ import annotations

import difflib
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.multimodal_media import image_normalization
from ..errors import InputError
from .config import ConfigError
from .model_config import VisionConfig

__all__ = ["PatchEmbedding", "TimmBackbone", "build_vision_tower", "image_normalization", "interpolate_positions"]


def interpolate_positions(table: torch.Tensor, old_grid: Sequence[int], new_grid: Sequence[int]) -> torch.Tensor:
    """Resize a ``[gh*gw, D]`` table of patch position embeddings to another grid.

    Bicubic with anti-aliasing over the 2-D grid, as ViT fine-tuning at a new resolution does
    (Dosovitskiy et al. 2021, §3.2; timm's ``resample_abs_pos_embed``). At the native grid the
    table is returned unchanged, so a model sees exactly its trained positions.
    """
    old_h, old_w = int(old_grid[0]), int(old_grid[1])
    new_h, new_w = int(new_grid[0]), int(new_grid[1])
    if table.shape[0] != old_h * old_w:
        raise InputError(f"position table has {table.shape[0]} rows, expected {old_h}x{old_w}={old_h * old_w}")
    if (old_h, old_w) == (new_h, new_w):
        return table
    dim = table.shape[1]
    grid = table.float().reshape(1, old_h, old_w, dim).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_h, new_w), mode="bicubic", align_corners=False, antialias=True)
    return grid.permute(0, 2, 3, 1).reshape(new_h * new_w, dim).to(table.dtype)


def _check_pixels(pixel_values: torch.Tensor, channels: int) -> None:
    if pixel_values.dim() != 4 or pixel_values.shape[1] != channels:
        raise InputError(f"pixel_values must be [batch, {channels}, height, width], got {tuple(pixel_values.shape)}")


class PatchEmbedding(nn.Module):
    """Non-overlapping P×P patches → Linear (a strided convolution) → + learned 2-D positions.

    Images of another size than ``config.image_size`` (height and width multiples of the patch
    size) get the position table resized by :func:`interpolate_positions`.
    """

    def __init__(self, config: VisionConfig, hidden_size: int):
        super().__init__()
        self.config = config
        self.grid = config.image_size // config.patch_size
        self.proj = nn.Conv2d(config.num_channels, hidden_size, kernel_size=config.patch_size,
                              stride=config.patch_size)
        self.position = nn.Parameter(torch.zeros(self.grid * self.grid, hidden_size))
        nn.init.trunc_normal_(self.position, std=0.02)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        _check_pixels(pixel_values, self.config.num_channels)
        height, width = pixel_values.shape[-2:]
        patch = self.config.patch_size
        if height % patch or width % patch:
            raise InputError(f"image size {height}x{width} is not a multiple of patch_size={patch}")
        x = self.proj(pixel_values)  # [B, H, gh, gw]
        grid = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)
        return x + interpolate_positions(self.position, (self.grid, self.grid), grid).to(x.dtype)


def create_timm_model(name: str, pretrained: bool = False) -> nn.Module:
    """``timm.create_model(name, pretrained, num_classes=0)`` with an error that suggests close
    names when ``name`` is not a timm model. ``pretrained=True`` downloads timm's weights."""
    import timm

    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ConfigError(f"VisionConfig.backbone={name!r} is neither 'patch' nor a timm model{hint}")
    return timm.create_model(name, pretrained=pretrained, num_classes=0)


class TimmBackbone(nn.Module):
    """A timm image model as the image tower (the classifier removed).

    The first token is always the model's own pooled feature (pre-logits: a ViT's [class]
    state, a CNN's global average), so it summarises the image like ViT's [class] token.
    ``features='tokens'`` appends the final feature map (CNN: one token per spatial cell; ViT: its
    tokens); ``features='pooled'`` keeps the pooled token alone. All are projected to ``hidden_size``.
    """

    def __init__(self, config: VisionConfig, hidden_size: int):
        super().__init__()
        self.config = config
        self.model = create_timm_model(config.backbone, config.pretrained)
        self.project = nn.Linear(self.model.num_features, hidden_size)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        _check_pixels(pixel_values, self.config.num_channels)
        features = self.model.forward_features(pixel_values)
        tokens = self.model.forward_head(features, pre_logits=True)[:, None]
        if self.config.features == "tokens":
            if features.dim() == 4:
                # Most CNNs return NCHW; some (Swin, MaxViT) declare NHWC in ``output_fmt``.
                fmt = getattr(self.model, "output_fmt", "NCHW")
                if getattr(fmt, "value", fmt) != "NHWC":
                    features = features.permute(0, 2, 3, 1)
                features = features.flatten(1, 2)
            tokens = torch.cat([tokens, features], dim=1)
        return self.project(tokens)


def build_vision_tower(config: VisionConfig, hidden_size: int) -> nn.Module:
    return PatchEmbedding(config, hidden_size) if config.backbone == "patch" else TimmBackbone(config, hidden_size)
