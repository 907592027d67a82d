"""Position information: absolute sinusoidal tables and sinusoids of any (relative) position,
T5 relative buckets, NEZHA functional relative encoding, rotary embeddings (RoPE)."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from ..config import ConfigError


def sinusoids(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """[..., 2⌈d/2⌉]: [sin(p·ω_0), ..., sin(p·ω_k); cos(p·ω_0), ..., cos(p·ω_k)] with
    ω_i = 10000^(−2i/d), for any real positions p (Transformer-XL and XLNet encode the
    relative distances L, L−1, ..., −L+1 this way, sines first, then cosines)."""
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) * (-math.log(10000.0) / dim))
    angles = positions.float().unsqueeze(-1) * div
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """Vaswani et al. (2017): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    waves = sinusoids(torch.arange(num_positions), dim)
    half = (dim + 1) // 2
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = waves[:, :half]
    table[:, 1::2] = waves[:, half: half + dim // 2]
    return table


def relative_distances(length: int, device=None) -> torch.Tensor:
    """[L, L] matrix whose (i, j) entry is j - i (key position minus query position)."""
    pos = torch.arange(length, device=device)
    return pos[None, :] - pos[:, None]


def t5_relative_bucket(relative: torch.Tensor, num_buckets: int, max_distance: int,
                       bidirectional: bool = True) -> torch.Tensor:
    """T5's bucketing (Raffel et al. 2020): exact buckets for small distances, logarithmically
    wider ones up to ``max_distance``, the sign of the distance in its own half when bidirectional."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (relative > 0).long() * num_buckets
        n = relative.abs()
    else:
        n = (-relative).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    large = max_exact + (
        torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


class T5RelativeBias(nn.Module):
    """A learned scalar per (bucket, head) added to attention scores; computed once per forward
    and shared by every layer, as in T5."""

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int, bidirectional: bool = True):
        super().__init__()
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def forward(self, length: int, key_length: Optional[int] = None, offset: int = 0) -> torch.Tensor:
        """Returns a [1, H, L, K] additive bias for queries at positions ``offset .. offset+L-1``
        and keys at ``0 .. K-1`` (K = ``key_length``, default L; a decoding step's queries come
        after the cached keys)."""
        device = self.embedding.weight.device
        if key_length is None and offset == 0:
            relative = relative_distances(length, device)
        else:
            keys = torch.arange(length if key_length is None else key_length, device=device)
            relative = keys[None, :] - (offset + torch.arange(length, device=device))[:, None]
        buckets = t5_relative_bucket(relative, self.num_buckets, self.max_distance, self.bidirectional)
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)


class NezhaRelativePositions(nn.Module):
    """NEZHA's functional relative position encoding (Wei et al. 2019, arXiv:1909.00204):
    a fixed sinusoidal vector a_ij for the clipped distance clip(j - i, -k, k), added to the keys
    and to the values of every head and layer."""

    def __init__(self, head_dim: int, max_distance: int):
        super().__init__()
        self.max_distance = max_distance
        self.register_buffer("table", sinusoidal_table(2 * max_distance + 1, head_dim), persistent=False)

    def forward(self, length: int) -> torch.Tensor:
        """Returns the [L, L, head_dim] tensor of a_ij."""
        index = relative_distances(length, self.table.device).clamp(-self.max_distance, self.max_distance)
        return self.table[index + self.max_distance]


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al. 2021, "RoFormer"): the pair (x_2i, x_2i+1), here the
    halves (x_i, x_i+d/2) as in GPT-NeoX and ModernBERT, of each query and key is rotated by
    the angle p·θ^(−2i/d), so q_m·k_n depends on m − n only. ``theta`` is the base θ."""

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ConfigError(f"rotary embeddings need an even head dimension, got {head_dim}")
        self.theta = theta
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``position_ids`` [B or 1, L] → (cos, sin), each [B or 1, 1, L, head_dim], in fp32."""
        angles = position_ids[..., None].float() * self.inv_freq
        angles = torch.cat([angles, angles], dim=-1)[:, None]
        return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Rotate ``x`` [B, H, L, D] by (cos, sin) from :class:`RotaryEmbedding`, computed in fp32:
    x·cos + rotate_half(x)·sin with rotate_half(a, b) = (−b, a)."""
    cos, sin = rotary
    half = x.shape[-1] // 2
    x32 = x.float()
    rotated = torch.cat([-x32[..., half:], x32[..., :half]], dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)
