"""The public layer-stack API every Transformer family implements, and the one loop over
layers.

A family's encoder is a :class:`LayerStack`: ``prepare`` turns a padding mask (and visibility,
causality, position ids) into the family's per-forward state (the SDPA mask, a relative
position bias, rotary angles, one per attention kind), ``layer_state`` says what layer ``i``
reads of it, ``run`` applies layers ``start..end-1`` to hidden states, each block called as
``block(x, layer_state)``, and ``finish`` applies what follows the last layer (a pre-LN stack's
final norm). ``run`` is the only loop over layers in the zoo: a family supplies its blocks
(:meth:`LayerStack.layer`) and their per-layer state, never a loop of its own. Fusion models
call exactly ``prepare``, ``run`` and ``finish`` to run the text layers on [text; image]
sequences, so no code outside a family reads the family's attributes::

    state = encoder.prepare(mask, length)
    x = encoder.finish(encoder.run(x, state, start=2))   # layers 2 .. num_layers-1
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import Any, ClassVar, Optional

import torch
from torch import nn

from ...errors import InputError
from .attention import Packing, select_rows


class LayerStack(nn.Module, metaclass=ABCMeta):
    """Base class of a family's layer stack. Subclasses set ``num_layers``, implement
    :meth:`prepare` and, where their blocks read more than the prepared state, :meth:`layer_state`
    (and :meth:`finish` when they have one); they say with :meth:`can_pack` and
    :meth:`can_select_rows` which fast paths their layers allow. Their blocks are
    ``self.layers`` (or what :meth:`layer` returns) and take ``(x, layer_state)``."""

    num_layers: int
    #: True for a stack whose attention reads segment ids (XLNet's relative segment encoding):
    #: its :meth:`prepare` takes them as a ``segment_ids`` keyword, and :meth:`forward` and
    #: :class:`~babelzoo.zoo.model.BabelModel` pass them to it. The other families read
    #: segments in their embeddings only.
    reads_segments: ClassVar[bool] = False

    @abstractmethod
    def prepare(self, attention_mask: Optional[torch.Tensor], length: int,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                position_ids: Optional[torch.Tensor] = None) -> Any:
        """The state every layer of one forward pass reads (opaque to callers)."""

    def layer(self, index: int) -> nn.Module:
        """The block of layer ``index`` (a stack that shares one block returns it for each)."""
        return self.layers[index]

    def layer_state(self, state: Any, index: int, rows: Optional[torch.Tensor],
                    packing: Optional[Packing]) -> Any:
        """The second argument of layer ``index``'s block in the pass :meth:`prepare` made
        ``state`` for; ``rows`` (positions whose output alone is wanted) reach the last layer of a
        :meth:`run` only, ``packing`` every layer. Default: ``state`` itself, for a stack whose
        layers compute every position and read one shared state."""
        return state

    def skips(self, index: int, rows: Optional[torch.Tensor]) -> bool:
        """Does this pass leave layer ``index`` out, passing its input on (LayerDrop)?"""
        return False

    def run(self, x: Any, state: Any, start: int = 0, end: Optional[int] = None,
            rows: Optional[torch.Tensor] = None, packing: Optional[Packing] = None,
            states: Optional[list] = None) -> Any:
        """Layers ``start .. end-1`` (``end`` None: to the top). ``rows`` ([B, K]) makes the last
        of them return those positions only; ``packing``: ``x`` holds the real tokens only;
        each layer's output is appended to ``states`` when given."""
        end = self.num_layers if end is None else end
        for i in range(start, end):
            if not self.skips(i, rows):
                layer_state = self.layer_state(state, i, rows=rows if i == end - 1 else None, packing=packing)
                x = self.layer(i)(x, layer_state)
            if states is not None:
                states.append(x)
        return x

    def finish(self, x: torch.Tensor) -> torch.Tensor:
        """What follows the last layer (identity unless the family has a final norm)."""
        return x

    def can_pack(self) -> bool:
        """May projections and feed-forwards run on the real tokens only?"""
        return True

    def can_select_rows(self) -> bool:
        """May the last layer compute its output at selected positions only?"""
        return True

    def packs(self, attention_mask: Optional[torch.Tensor], unpad: bool) -> bool:
        """Does an ``unpad`` pass over this mask run on the real tokens only?"""
        return unpad and attention_mask is not None and self.can_pack()

    def forward(self, x: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, *,
                visible: Optional[torch.Tensor] = None, causal: bool = False,
                output_hidden_states: bool = False,
                output_positions: Optional[torch.Tensor] = None,
                unpad: bool = False,
                position_ids: Optional[torch.Tensor] = None,
                segment_ids: Optional[torch.Tensor] = None,
                packing: Optional[Packing] = None) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, ...]]]:
        """Every layer, then :meth:`finish`. ``output_positions`` (bool [B, L]): return
        ``x[output_positions]`` ([N, H]) only, and run the last layer's queries, feed-forward
        and norms at those positions alone where the family allows it. ``unpad``: run
        projections and feed-forward layers on the real tokens only
        (:class:`~babelzoo.zoo.layers.Packing`); states at padding positions are then zeros.
        ``segment_ids`` reach :meth:`prepare` in a stack that :attr:`reads_segments`. ``packing``:
        ``x`` [N, H] already holds the real tokens of that :class:`Packing` of ``attention_mask``
        (embedded packed, see :meth:`packs`), and the pass runs unpadded."""
        segments = {"segment_ids": segment_ids} if self.reads_segments else {}
        length = packing.length if packing is not None else x.shape[1]
        state = self.prepare(attention_mask, length, visible=visible, causal=causal, position_ids=position_ids,
                             **segments)
        last = self.num_layers - 1
        packed = packing is not None
        if not packed and self.packs(attention_mask, unpad):
            packing = Packing(attention_mask)
        rows = valid = None
        if output_positions is not None:
            if output_hidden_states:
                raise InputError("output_positions returns the selected positions of the last layer only; "
                                 "it cannot be combined with output_hidden_states")
            if packing is None and self.can_select_rows() and bool(output_positions.any()):
                rows, valid = select_rows(output_positions)
        if packing is not None and not packed:
            x = packing.pack(x)
        states = [x] if output_hidden_states else None
        x = self.run(x, state, end=last, packing=packing, states=states)
        x = self.finish(self.run(x, state, start=last, end=last + 1, rows=rows, packing=packing, states=states))
        if states is not None:
            states[-1] = x
        if packing is not None:
            if output_positions is not None:  # the selected real tokens, in row-major order
                return x[output_positions.reshape(-1)[packing.index].bool()], None
            return packing.unpack(x), tuple(packing.unpack(s) for s in states) if states is not None else None
        if output_positions is not None:
            x = x[valid] if rows is not None else x[output_positions.bool()]
        return x, tuple(states) if states is not None else None
