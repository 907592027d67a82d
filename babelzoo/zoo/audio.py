"""Speech tower: log-mel filterbank frames → strided 1-D convolutions → tokens.

The features themselves (80-bin fbank, utterance CMVN, SpecAugment) are computed in the data
pipeline (:mod:`babelzoo.datasets.multimodal_media`); the model only subsamples them. The subsampler
follows the speech embedding of TencentPretrain / fairseq S2T (Wang et al. 2020, "fairseq S2T:
Fast Speech-to-Text Modeling with fairseq"): ``conv_layers`` Conv1d layers of stride
``conv_stride`` over time, each followed by a GLU, so 10 ms frames become 40 ms tokens with the
default two layers, as in Speech-Transformer's convolutional front end (Dong et al. 2018).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .model_config import AudioConfig
from .layers.positions import sinusoidal_table


class ConvSubsampler(nn.Module):
    """``[B, T, num_mel_bins]`` frames → ``[B, T', hidden_size]`` tokens plus their mask.

    Each layer: Conv1d(kernel k, stride s, padding k//2) → GLU over channels. Token embeddings
    are scaled by √H and get sinusoidal positions (Vaswani et al. 2017), as in fairseq S2T.
    Padded frames are zeroed before every layer, so a padded utterance gives exactly the tokens
    of the unpadded one on its real positions.
    """

    def __init__(self, config: AudioConfig, hidden_size: int):
        super().__init__()
        self.config = config
        layers = []
        for i in range(config.conv_layers):
            in_channels = config.num_mel_bins if i == 0 else config.conv_channels // 2
            last = i == config.conv_layers - 1
            out_channels = 2 * hidden_size if last else config.conv_channels
            layers.append(nn.Conv1d(in_channels, out_channels, config.conv_kernel, stride=config.conv_stride,
                                    padding=config.conv_kernel // 2))
        self.convs = nn.ModuleList(layers)
        self.scale = math.sqrt(hidden_size)
        max_tokens = int(self.output_lengths(torch.tensor([config.max_frames]))[0])
        self.register_buffer("position_table", sinusoidal_table(max_tokens, hidden_size), persistent=False)

    def _layer_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        k, s = self.config.conv_kernel, self.config.conv_stride
        return torch.div(lengths + 2 * (k // 2) - k, s, rounding_mode="floor") + 1

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Token counts for frame counts: L ← ⌊(L + 2⌊k/2⌋ − k) / s⌋ + 1 per layer."""
        for _ in self.convs:
            lengths = self._layer_lengths(lengths)
        return lengths

    def forward(self, features: torch.Tensor, mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``mask`` [B, T] marks real frames (1); returns (tokens, token mask)."""
        if features.dim() != 3 or features.shape[-1] != self.config.num_mel_bins:
            raise InputError(f"audio_features must be [batch, frames, {self.config.num_mel_bins}], "
                             f"got {tuple(features.shape)}")
        batch, frames = features.shape[:2]
        if frames > self.config.max_frames:
            raise InputError(f"audio of {frames} frames is longer than AudioConfig.max_frames="
                             f"{self.config.max_frames}; cut it or raise max_frames")
        lengths = (mask.long().sum(dim=1) if mask is not None
                   else torch.full((batch,), frames, dtype=torch.long, device=features.device))
        x = features.transpose(1, 2)  # [B, F, T]
        for conv in self.convs:
            x = x * (torch.arange(x.shape[-1], device=x.device)[None, :] < lengths[:, None])[:, None].to(x.dtype)
            x = F.glu(conv(x), dim=1)
            lengths = self._layer_lengths(lengths)
        tokens = x.transpose(1, 2) * self.scale
        token_mask = (torch.arange(tokens.shape[1], device=x.device)[None, :] < lengths[:, None]).long()
        tokens = tokens + self.position_table[: tokens.shape[1]].to(tokens.dtype)
        return tokens, token_mask
