"""MASS: masked sequence-to-sequence pre-training.

Song et al. 2019, "MASS: Masked Sequence to Sequence Pre-training for Language Generation",
§2.2: one contiguous fragment x^{u:v} of k = 50 % of the sentence's m tokens (at a uniformly
random start u) is masked in the encoder, token by token, and the decoder generates the
fragment from the rest of the sentence:

    L = −(1/k) Σ_{t=u..v} log p(x_t | x_{u:t−1}, x^{\\u:v})

Layout (the decoder starts from ``</s>``, as BART's)::

    tokens              x1 x2 x3 x4 x5 x6
    input_ids           <s> x1 x2 <mask> <mask> <mask> x6 </s>
    labels              x3 x4 x5
    decoder_input_ids   </s> x3 x4

MASS also feeds the decoder the fragment's original positions (u..v); the encoder–decoder
interface here takes no decoder positions, so the decoder counts from 0. Sentences are cut to
``max_length − 2`` tokens (counted as ``truncated``).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import register_objective
from .examples import ExampleError
from .noising import mass_fragment
from .seq2seq_base import Seq2SeqObjective, cut_sentences, seq2seq_batch


@register_objective
class MASS(Seq2SeqObjective):
    """MASS over sentences (token ids or ``(ids, lang)``); ``fragment_ratio``: k / m."""

    name = "mass"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, fragment_ratio: float = 0.5,
                 max_length: Optional[int] = None):
        super().__init__(specials, config, max_length=max_length)
        if not 0.0 < fragment_ratio <= 1.0:
            raise ConfigError(f"{self.name}: fragment_ratio={fragment_ratio!r} must be in (0, 1]")
        self.fragment_ratio = fragment_ratio

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        s = self.specials
        sentences, truncated = cut_sentences(examples, self.max_length - 2, self.name)
        sources, targets = [], []
        for i, ids in enumerate(sentences):
            if not ids:
                raise ExampleError(f"{self.name}: example {i} is empty; MASS masks a fragment of its tokens")
            start, end = mass_fragment(len(ids), self.fragment_ratio)
            sources.append([s.cls, *ids[:start], *[s.mask] * (end - start), *ids[end:], s.sep])
            targets.append(ids[start:end])
        return seq2seq_batch(sources, targets, [s.sep] * len(sources), s, "sentence", truncated)
