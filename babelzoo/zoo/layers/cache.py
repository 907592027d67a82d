"""A decoder's key/value cache, preallocated for the whole generation.

Every self-attention layer of a decoder writes the keys and values of the new positions into
one [layers, B, H, T_max, D] buffer and attends over the filled part, so a decoding step costs
one copy of its own keys and values, not a concatenation of the whole history. Beam search
reorders the rows of all layers with one ``index_select``.
"""

from __future__ import annotations

import torch

from ...errors import InputError


class KVCache:
    """Keys and values of ``layers`` layers for ``batch`` rows and up to ``max_length`` positions::

        cache = KVCache(layers, batch, heads, max_length, head_dim, dtype, device)
        x = decoder.run(x, state)   # layer i's state holds cache.layer(i): appends at length .. length+l-1
        cache.advance(l)
    """

    def __init__(self, layers: int, batch: int, heads: int, max_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device=None):
        self.max_length = max_length
        self.length = 0
        self.keys = torch.empty(layers, batch, heads, max_length, head_dim, dtype=dtype, device=device)
        self.values = torch.empty_like(self.keys)

    def layer(self, index: int) -> "LayerCache":
        return LayerCache(self, index)

    def advance(self, count: int) -> None:
        """Mark ``count`` more positions as filled (after every layer wrote them)."""
        self.length += count

    def extend_repeated(self, other: "KVCache", times: int) -> None:
        """Append the filled positions of ``other`` (B rows), each of its rows repeated ``times``
        (B·times rows: a source's beams share their first step)."""
        start, end = self.length, self.length + other.length
        self.keys[:, :, :, start:end] = other.keys[:, :, :, :other.length].repeat_interleave(times, dim=1)
        self.values[:, :, :, start:end] = other.values[:, :, :, :other.length].repeat_interleave(times, dim=1)
        self.length = end

    def reorder(self, rows: torch.Tensor) -> None:
        """Row ``i`` of every layer becomes old row ``rows[i]`` (beam search's surviving beams)."""
        n = self.length
        self.keys[:, :, :, :n] = self.keys[:, :, :, :n].index_select(1, rows)
        self.values[:, :, :, :n] = self.values[:, :, :, :n].index_select(1, rows)


class LayerCache:
    """One layer's view of a :class:`KVCache`."""

    def __init__(self, cache: KVCache, index: int):
        self.cache = cache
        self.index = index

    @property
    def length(self) -> int:
        """Positions already filled before this step."""
        return self.cache.length

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``k``, ``v`` [B, H, l, D] after the filled positions; return the keys and values
        of every position so far, [B, H, length + l, D]."""
        start, end = self.cache.length, self.cache.length + k.shape[2]
        if end > self.cache.max_length:
            raise InputError(f"the key/value cache holds {self.cache.max_length} positions; step {end} is past it")
        keys, values = self.cache.keys[self.index], self.cache.values[self.index]
        keys[:, :, start:end] = k
        values[:, :, start:end] = v
        return keys[:, :, :end], values[:, :, :end]
