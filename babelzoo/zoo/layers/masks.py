"""Attention masks: padding, causal, prefix (UniLM), sliding-window (local attention) and
per-example visibility matrices, combined into one bool mask for SDPA."""

from __future__ import annotations

from typing import Optional

import torch

from ...errors import InputError


def exporting() -> bool:
    """True while ``torch.export`` or ``torch.onnx`` traces the model. Shortcuts that look at
    the values of a batch (no mask when nothing is padded) would be frozen into the graph as the
    traced batch took them, so the general path runs instead; it gives the same result."""
    return torch.compiler.is_exporting() or torch.jit.is_tracing()


def check_mask_shapes(inputs: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                      visible: Optional[torch.Tensor] = None, names: tuple[str, str] = ("input_ids", "attention_mask")
                      ) -> None:
    """Refuse a padding mask that is not [B, L] for ``inputs`` [B, L] (or embeddings [B, L, E]),
    and a visibility matrix that is neither [B, L, L] nor [L, L]: either would broadcast against
    the attention scores and silently mask other positions than meant."""
    batch, length = inputs.shape[:2]
    shape = [batch, length]
    given = f"{names[0]} has shape {list(inputs.shape)}"
    if attention_mask is not None and list(attention_mask.shape) != shape:
        hint = ("; a [B, L, L] matrix of which position may see which goes in visible="
                if list(attention_mask.shape) == [batch, length, length] else "")
        raise InputError(f"{names[1]} has shape {list(attention_mask.shape)} but {given}: the mask must be "
                         f"[{batch}, {length}] (1 = token, 0 = padding){hint}")
    if visible is not None and list(visible.shape) not in ([batch, length, length], [length, length]):
        raise InputError(f"visible has shape {list(visible.shape)} but {given}: the visibility matrix must be "
                         f"[{batch}, {length}, {length}] or [{length}, {length}]")


def causal_visibility(length: int, device=None) -> torch.Tensor:
    """[L, L] bool: position i sees positions j <= i (GPT-style language modelling)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def prefix_visibility(prefix_lengths: torch.Tensor, length: int) -> torch.Tensor:
    """[B, L, L] bool: every position sees the whole prefix; positions after it see causally
    (UniLM / UER's 'prefix' mask)."""
    causal = causal_visibility(length, prefix_lengths.device)
    in_prefix = torch.arange(length, device=prefix_lengths.device)[None, :] < prefix_lengths[:, None]
    return causal[None] | in_prefix[:, None, :]


def sliding_window_visibility(length: int, window: int, device=None) -> torch.Tensor:
    """[L, L] bool: position i sees positions j with |i − j| <= ``window`` (local attention,
    Longformer/ModernBERT; ``window`` is half the span)."""
    pos = torch.arange(length, device=device)
    return (pos[None, :] - pos[:, None]).abs() <= window


def build_attention_mask(attention_mask: Optional[torch.Tensor] = None,
                         visible: Optional[torch.Tensor] = None,
                         causal: bool = False,
                         length: Optional[int] = None, device: Optional[torch.device] = None) -> Optional[torch.Tensor]:
    """Combine a [B, L] padding mask (1 = real token), an optional [B, L, L] or [L, L]
    visibility matrix (True = may attend) and an optional causal constraint into one bool mask
    for SDPA, shaped [B, 1, L or 1, L]. Returns None when nothing is masked, which lets SDPA use
    its fastest kernels.

    A query row that would see no key at all (a padding position under a causal or K-BERT mask)
    is allowed to see itself, so that softmax never divides by zero. The mask lies on the device
    of ``attention_mask`` or ``visible``; given neither, on ``device`` (the model's: a causal
    mask of a batch without padding must not land on the CPU beside a model on a GPU).
    """
    mask = None
    if attention_mask is not None:
        keys = attention_mask.bool()
        if exporting() or not bool(keys.all()):
            mask = keys[:, None, None, :]
    if visible is not None:
        vis = visible.bool()
        vis = vis[:, None] if vis.dim() == 3 else vis[None, None]
        mask = vis if mask is None else mask & vis
    if causal:
        size = length if length is not None else mask.shape[-1]
        given = next((t for t in (attention_mask, visible) if t is not None), None)
        tri = causal_visibility(size, given.device if given is not None else device)[None, None]
        mask = tri if mask is None else mask & tri
    if mask is None:
        return None
    # A query that may see no key (a row of padding only) would take a softmax over nothing: NaN,
    # whose gradient reaches the weights even though no loss reads that row. It sees itself
    # instead (per-query masks) or every position (a key mask shared by all queries).
    empty = ~mask.any(dim=-1, keepdim=True)
    if exporting() or bool(empty.any()):  # a no-op where no row is empty
        if mask.shape[-2] > 1:
            mask = mask | (empty & torch.eye(mask.shape[-1], dtype=torch.bool, device=mask.device))
        else:
            mask = mask | empty
    if exporting() and mask.shape[-2] == 1:  # ONNX's Attention takes a [.., queries, keys] mask
        mask = mask.expand(*mask.shape[:-2], mask.shape[-1], mask.shape[-1])
    return mask
