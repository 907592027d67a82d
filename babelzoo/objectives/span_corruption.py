"""T5's span corruption: dropped spans become sentinels, the decoder writes them out.

Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer", §3.1.4 and §3.3.4: 15 % of the tokens are dropped in spans of mean length 3;
each dropped span is replaced in the input by a sentinel unique in its sequence, and the target
is every sentinel followed by the span it replaced, then one final sentinel. The number of
spans and their lengths follow T5's ``random_spans_noise_mask``
(:func:`~babelzoo.objectives.noising.t5_noise_mask`): num_noise_tokens = round(L·0.15),
num_spans = round(num_noise_tokens / 3), and the noise and the kept tokens are each cut into
num_spans random segments, interleaved.

    L = −(1/|y|) Σ_t log p(y_t | y_<t, corrupt(x))

Layout of one draw (T5's decoder starts from ``<pad>``; ``<X>``, ``<Y>``, ``<Z>`` are
``<extra_id_0..2>``; T5's mask always starts with kept tokens and ends with noise)::

    tokens              x1 x2 x3 x4 x5 x6 x7 x8
    input_ids           x1 x2 <X> x5 x6 x7 <Y> </s>
    labels              <X> x3 x4 <Y> x8 <Z> </s>
    decoder_input_ids   <pad> <X> x3 x4 <Y> x8 <Z>

Sentinels are the vocabulary's ``<extra_id_k>`` tokens (``SpecialIds.sentinels``), which
babelzoo's sentencepiece tokenizer reserves when trained with ``sentinels: N`` (a recipe's
``tokenizer: {vocab_size: 4000, sentinels: 100}``); a vocabulary without them is refused when
the objective is built. Sentences are cut to ``max_length − 1`` tokens (counted as
``truncated``), so both sides fit ``max_length``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import register_objective
from .examples import ExampleError
from .noising import corrupt_spans, t5_noise_mask
from .seq2seq_base import Seq2SeqObjective, cut_sentences, seq2seq_batch


@register_objective
class SpanCorruption(Seq2SeqObjective):
    """T5's span corruption over sentences (token ids or ``(ids, lang)``). ``noise_density``:
    the share of dropped tokens; ``mean_span_length``: their mean span length."""

    name = "span_corruption"
    consumes = "sentence"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, noise_density: float = 0.15,
                 mean_span_length: float = 3.0, max_length: Optional[int] = None):
        super().__init__(specials, config, max_length=max_length)
        if not 0.0 < noise_density < 1.0:
            raise ConfigError(f"{self.name}: noise_density={noise_density!r} must be in (0, 1)")
        if not mean_span_length >= 1.0:
            raise ConfigError(f"{self.name}: mean_span_length={mean_span_length!r} must be at least 1")
        if len(specials.sentinels) < 2:
            raise ConfigError(f"{self.name}: the vocabulary reserves {len(specials.sentinels)} sentinel tokens "
                              "(<extra_id_0>, <extra_id_1>, ...); span corruption needs them: train the tokenizer "
                              "with sentinels, e.g. tokenizer: {vocab_size: 4000, sentinels: 100}")
        self.noise_density, self.mean_span_length = noise_density, mean_span_length

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        s = self.specials
        sentences, truncated = cut_sentences(examples, self.max_length - 1, self.name)
        sources, targets = [], []
        for i, ids in enumerate(sentences):
            # T5 computes the mask of a sequence shorter than 2 as if it had 2 tokens
            noise = t5_noise_mask(max(len(ids), 2), self.noise_density, self.mean_span_length)[:len(ids)]
            try:
                source, target = corrupt_spans(ids, noise, s.sentinels)
            except InputError as err:
                raise ExampleError(f"{self.name}: example {i} ({len(ids)} tokens): {err}") from None
            sources.append([*source, s.sep])
            targets.append([*target, s.sep])
        return seq2seq_batch(sources, targets, [s.pad] * len(sources), s, "sentence", truncated)
