"""XNLG's cross-lingual auto-encoding (XAE).

Chi et al. 2020, "Cross-Lingual Natural Language Generation via Pre-Training", §3.2–3.3. XNLG
pre-trains in two stages:

1. the encoder, with monolingual MLM and cross-lingual MLM (XMLM) on parallel pairs. XMLM
   masks tokens of a concatenated translation pair and predicts them from both languages:
   that is XLM's TLM, the registered ``tlm`` objective (``babelzoo/recipes/xnlg_stage1_tiny.yaml``
   trains ``mlm`` + ``tlm``);
2. the decoder, with denoising auto-encoding (DAE, monolingual: ``text_infilling`` or
   ``mbart_denoising`` in a mixture) and XAE: the encoder reads a sentence in one language and
   the decoder generates its translation in the other, in both directions:

    L_XAE = −Σ_{(x, y) ∈ D_p} [log p(y | x) + log p(x | y)]

Here each pair is used in one direction per batch, drawn with probability ½ each (the
expectation is the sum above over a pass), with the layout of
:mod:`~babelzoo.objectives.translation` (the decoder starts from the output language's tag)::

    input_ids           x1 .. xm </s> [en]          (or the reverse: y1 .. yn </s> [de])
    labels              y1 .. yn </s> [de]
    decoder_input_ids   [de] y1 .. yn </s>

XNLG keeps the encoder fixed in stage 2 to keep its cross-lingual representations; that is a
choice of which parameters the optimiser trains, not of this objective.
"""

from __future__ import annotations

import torch

from .base import register_objective
from .examples import Pair
from .translation import Translation


@register_objective
class XAE(Translation):
    """XNLG's cross-lingual auto-encoding over translation pairs, each in a random direction;
    options as :class:`Translation`'s."""

    name = "xae"
    consumes = "pair"

    def direction(self, pair: Pair) -> Pair:
        if int(torch.randint(2, (1,))):
            return Pair(pair.tgt, pair.src, pair.tgt_lang, pair.src_lang)
        return pair
