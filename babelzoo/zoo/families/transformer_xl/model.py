"""The Transformer-XL family's modules and its segment-level recurrence (config and entries:
:mod:`babelzoo.zoo.families.transformer_xl.config`).

Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context",
§3.2: for segment τ + 1, layer n attends over its own input and the memory of earlier segments,
whose gradient is stopped (SG)::

    h̃^{n−1}_{τ+1} = [SG(m^{n−1}_τ) ∘ h^{n−1}_{τ+1}]
    q^n_{τ+1} = h^{n−1}_{τ+1} W_qᵀ,   k^n_{τ+1}, v^n_{τ+1} = h̃^{n−1}_{τ+1} W_{k,E}ᵀ, h̃^{n−1}_{τ+1} W_vᵀ
    h^n_{τ+1} = Transformer-Layer(q^n_{τ+1}, k^n_{τ+1}, v^n_{τ+1})

with relative positional scores (:mod:`babelzoo.zoo.layers.xl_relative`). The new memory of
layer n is the last ``mem_len`` positions of [m^{n−1}_τ ∘ h^{n−1}_{τ+1}], detached.

The memory is a value passed in and returned by each call, never state kept on a module, so two
unrelated batches cannot share one::

    memory = None
    for ids, mask in segments:                           # [B, L] each, in document order
        out = encode_segment(model, ids, mask, memory)   # out.last_hidden [B, L, H]
        memory = out.memory

or, for a long [B, T] batch, ``encode_segments(model, ids, mask, segment_length=64)``.
Positions in the memory count as slots: relative distances include padding slots, so a row's
padding belongs at the end of its last real segment (a right-padded document), where it is
masked and, after it, harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import nn

from ....errors import InputError
from ...family import TextParts
from ...layers import LayerStack, MLMHead, Packing, TokenEmbeddings, make_norm
from ...layers.dropout import Dropout
from ...layers.ffn import FeedForward
from ...layers.xl_relative import XLRelativeAttention, memory_attention_mask, relative_distances, sinusoids
from .config import TransformerXLConfig


@dataclass(frozen=True)
class Memory:
    """The cached states of earlier segments: ``states[n]`` [B, M, H] is what layer n read as
    input there (``states[0]``: the embeddings), ``mask`` [B, M] marks real positions (1) and
    padding (0). Tensors are detached (the paper's stop-gradient)."""

    states: tuple[torch.Tensor, ...]
    mask: torch.Tensor

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    @staticmethod
    def extend(previous: Optional["Memory"], inputs: Sequence[torch.Tensor], mask: torch.Tensor,
               mem_len: int) -> Optional["Memory"]:
        """The memory after a segment: the last ``mem_len`` positions of [previous ∘ inputs]
        per layer, detached; None when ``mem_len`` is 0."""
        if mem_len == 0:
            return None
        with torch.no_grad():
            if previous is not None:
                inputs = [torch.cat([old.to(x.dtype), x], dim=1) for old, x in zip(previous.states, inputs)]
                mask = torch.cat([previous.mask, mask], dim=1)
            return Memory(tuple(x[:, -mem_len:].detach() for x in inputs), mask[:, -mem_len:].detach())


@dataclass
class XLState:
    """One forward pass's inputs to every layer: the SDPA mask over [memory; segment], the
    sinusoids of the relative distances, and the memory (None: none)."""

    mask: Optional[torch.Tensor]
    positions: torch.Tensor
    memory: Optional[Memory] = None


@dataclass
class XLLayerState:
    """What one layer reads: the SDPA mask over [memory; segment], the sinusoids of the
    relative distances and this layer's memory [B, M, H] (None: none)."""

    mask: Optional[torch.Tensor]
    positions: torch.Tensor
    memory: Optional[torch.Tensor] = None


class XLBlock(nn.Module):
    """A post-LN block, as in the paper's code: x = LN(x + Attn(x, memory)), x = LN(x + FFN(x))."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.attention = XLRelativeAttention(config.hidden_size, config.num_heads, config.attention_dropout)
        self.attention_norm = make_norm("layer", config.hidden_size, config.layer_norm_eps)
        self.ffn = FeedForward(config.hidden_size, config.intermediate_size, config.activation)
        self.ffn_norm = make_norm("layer", config.hidden_size, config.layer_norm_eps)
        self.dropout = Dropout(config.dropout)

    def forward(self, x: torch.Tensor, state: XLLayerState) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, positions=state.positions, mask=state.mask, memory=state.memory)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class TransformerXLEncoder(LayerStack):
    """The block stack. ``prepare`` takes an optional :class:`Memory`;
    :meth:`forward_with_memory` runs every layer over a segment and returns the new memory."""

    def __init__(self, config: TransformerXLConfig):
        super().__init__()
        self.config = config
        self.num_layers = config.num_layers
        self.layers = nn.ModuleList(XLBlock(config) for _ in range(config.num_layers))

    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None, memory: Optional[Memory] = None) -> XLState:
        # ``position_ids`` are not read: positions are relative.
        device = self.layers[0].attention.query.weight.device
        memory_mask = memory.mask if memory is not None else None
        mask = memory_attention_mask(attention_mask, memory_mask, visible, causal or self.config.causal, length, device)
        keys = length + (memory.length if memory is not None else 0)
        positions = sinusoids(relative_distances(length, keys, device), self.config.hidden_size)
        return XLState(mask, positions, memory)

    def layer_state(self, state: XLState, index: int, rows: Optional[torch.Tensor],
                    packing: Optional[Packing]) -> XLLayerState:
        # ``rows`` and ``packing`` never come: can_select_rows and can_pack are False.
        memory = state.memory.states[index] if state.memory is not None else None
        return XLLayerState(state.mask, state.positions, memory)

    def can_pack(self) -> bool:
        # Keys span the memory and the segment: the layers never run on packed tokens.
        return False

    def can_select_rows(self) -> bool:
        return False

    def forward_with_memory(self, x: torch.Tensor, attention_mask: torch.Tensor, memory: Optional[Memory],
                            mem_len: int, visible: Optional[torch.Tensor] = None, causal: bool = False
                            ) -> tuple[torch.Tensor, Optional[Memory], tuple[torch.Tensor, ...]]:
        """Every layer over the segment ``x`` [B, L, H] after ``memory``: (last layer's output,
        the new memory, the hidden states: embeddings then every layer's output)."""
        if memory is not None:
            self.check_memory(memory, x)
        state = self.prepare(attention_mask, x.shape[1], visible=visible, causal=causal, memory=memory)
        states = [x]
        x = self.run(x, state, states=states)
        return x, Memory.extend(memory, states[:-1], attention_mask, mem_len), tuple(states)

    def check_memory(self, memory: Memory, x: torch.Tensor) -> None:
        shape = (x.shape[0], memory.length, x.shape[2])
        if len(memory.states) != self.num_layers or any(tuple(s.shape) != shape for s in memory.states):
            got = [tuple(s.shape) for s in memory.states]
            raise InputError(f"memory holds {len(memory.states)} states shaped {got}; this segment needs "
                             f"{self.num_layers} states of {list(shape)} (batch, memory length, hidden size)")


@dataclass
class SegmentOutput:
    """``last_hidden`` [B, L, H] of a segment, ``memory`` for the next one (None with
    ``mem_len=0``), ``mask`` [B, L] the segment's padding mask, ``hidden_states`` (when asked
    for) the embeddings then every layer's output."""

    last_hidden: torch.Tensor
    memory: Optional[Memory]
    mask: torch.Tensor
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None


def _xl_encoder(model) -> TransformerXLEncoder:
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, TransformerXLEncoder):
        name = getattr(getattr(model, "config", None), "architecture", type(model).__name__)
        raise InputError(f"model {name!r} has no segment-level memory: encode_segment needs a transformer_xl "
                         f"model (a BabelModel, not wrapped), e.g. create_model('transformer_xl_tiny')")
    return encoder


def encode_segment(model, input_ids: Optional[torch.Tensor] = None, attention_mask: Optional[torch.Tensor] = None,
                   memory: Optional[Memory] = None, *, mem_len: Optional[int] = None, causal: bool = False,
                   visible: Optional[torch.Tensor] = None, language_ids: Optional[torch.Tensor] = None,
                   segment_ids: Optional[torch.Tensor] = None, inputs_embeds: Optional[torch.Tensor] = None,
                   output_hidden_states: bool = False) -> SegmentOutput:
    """Encode one segment [B, L] of a transformer_xl :class:`~babelzoo.zoo.model.BabelModel`
    after ``memory`` (None: the start of the text), keeping ``mem_len`` positions for the next
    segment (None: the config's ``mem_len``). ``causal`` (or the config's): each query sees the
    memory and the segment's keys up to itself; otherwise the memory and the whole segment.
    ``visible`` ([B, L, L] or [L, L]) restricts keys within the segment. Without a memory the
    output equals ``model(input_ids, attention_mask)``'s."""
    encoder = _xl_encoder(model)
    text = model.config.text
    mem_len = text.mem_len if mem_len is None else mem_len
    if mem_len < 0:
        raise InputError(f"mem_len={mem_len} must be zero or positive")
    if input_ids is None and inputs_embeds is None:
        raise InputError("give input_ids or inputs_embeds")
    x = model.embeddings(input_ids, None, segment_ids, language_ids, inputs_embeds)
    if attention_mask is None:
        attention_mask = (input_ids.ne(text.pad_token_id) if input_ids is not None
                          else torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)).long()
    hidden, memory, states = encoder.forward_with_memory(x, attention_mask, memory, mem_len, visible, causal)
    return SegmentOutput(hidden, memory, attention_mask, states if output_hidden_states else None)


def encode_segments(model, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, *,
                    segment_length: int, mem_len: Optional[int] = None, causal: bool = False,
                    memory: Optional[Memory] = None) -> list[SegmentOutput]:
    """A long batch [B, T] encoded segment by segment (``segment_length`` positions each, the
    last one shorter when T is not a multiple), the memory carried from each to the next; the
    outputs in order (``torch.cat([o.last_hidden for o in outs], 1)`` is [B, T, H])."""
    if segment_length <= 0:
        raise InputError(f"segment_length={segment_length} must be positive")
    if attention_mask is None:
        attention_mask = input_ids.ne(model.config.text.pad_token_id).long()
    outputs = []
    for start in range(0, input_ids.shape[1], segment_length):
        piece = slice(start, start + segment_length)
        out = encode_segment(model, input_ids[:, piece], attention_mask[:, piece], memory, mem_len=mem_len,
                             causal=causal)
        outputs.append(out)
        memory = out.memory
    return outputs


def build(config: TransformerXLConfig, knowledge=None) -> TextParts:
    # ``knowledge`` asks for nothing here: the config's check_knowledge refuses fusion layers.
    embeddings = TokenEmbeddings(config.vocab_size, config.hidden_size, config.hidden_size, config.pad_token_id,
                                 positions="none", segment_vocab_size=config.segment_vocab_size,
                                 num_languages=config.num_languages, norm=None, dropout=config.dropout)
    lm_head = (MLMHead(config.hidden_size, config.hidden_size, config.vocab_size, config.activation,
                       config.layer_norm_eps) if config.mlm_head else None)
    return TextParts(embeddings, TransformerXLEncoder(config), lm_head)
