"""Supervised translation: the encoder reads the source, the decoder writes the target.

Vaswani et al. 2017 ("Attention Is All You Need"), with mBART's language tags (Liu et al. 2020,
§3: fine-tuning on bitext): the source ends with its language's tag, the decoder starts from the
target language's tag, so one model translates into any language of its vocabulary::

    input_ids           x1 .. xm </s> [src]
    labels              y1 .. yn </s> [tgt]
    decoder_input_ids   [tgt] y1 .. yn </s>

    L = −(1/|y|) Σ_t log p(y_t | y_<t, x, [tgt])

Examples are translation pairs ``(src, tgt, src_lang, tgt_lang)``. A source longer than
``max_length − 2`` tokens is cut (counted as ``truncated``); a target that does not fit the
decoder's ``max_length`` is an error naming the example, unless ``truncate_targets`` cuts it
too (a translation cut short teaches the decoder to stop early). A language the vocabulary has
no tag for is an error naming the tag.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..datasets.specials import SpecialIds
from ..zoo.config import EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import register_objective
from .batching import truncate
from .examples import ExampleError, Pair, as_pair, require_nonempty
from .seq2seq_base import Seq2SeqObjective, seq2seq_batch, tag_id


@register_objective
class Translation(Seq2SeqObjective):
    """Source → target over translation pairs, with language tags (see the module docstring)."""

    name = "translation"
    consumes = "pair"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *,
                 max_length: Optional[int] = None, truncate_targets: bool = False):
        super().__init__(specials, config, max_length=max_length)
        self.truncate_targets = truncate_targets

    def direction(self, pair: Pair) -> Pair:
        """The pair as it is translated: source → target."""
        return pair

    def source(self, ids: Sequence[int], lang: Optional[str], where: str = "source") -> tuple[list[int], int]:
        """The encoder input of a source sentence's pieces, ``x1 .. xm </s> [lang]`` (cut to
        ``max_length``), and how many pieces were cut; :func:`babelzoo.evaluation.translation.translate`
        frames its sources with it, so that decoding sees what training saw."""
        tag = tag_id(self.specials, lang, where)
        kept, cut = truncate(list(ids), self.max_length - 2)
        return [*kept, self.specials.sep, tag], cut

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        s, budget = self.specials, self.max_length - 2
        sources, targets, starts, truncated = [], [], [], 0
        for i, example in enumerate(examples):
            pair = self.direction(as_pair(example, i))
            where = f"{self.name}: example {i}"
            source, cut_src = self.source(pair.src, pair.src_lang, f"{where} source")
            tgt_tag = tag_id(s, pair.tgt_lang, f"{where} target")
            if len(pair.tgt) > budget and not self.truncate_targets:
                raise ExampleError(f"{where}: the target has {len(pair.tgt)} tokens, and with </s> and its tag "
                                   f"{len(pair.tgt) + 2}: more than max_length={self.max_length} decoder positions; "
                                   "raise max_length (up to the model's max_positions), drop the pair or set "
                                   "truncate_targets: true")
            tgt, cut_tgt = truncate(pair.tgt, budget)
            truncated += cut_src + cut_tgt
            sources.append(source)
            targets.append([*tgt, s.sep, tgt_tag])
            starts.append(tgt_tag)
        return seq2seq_batch(sources, targets, starts, s, "translation pair", truncated)
