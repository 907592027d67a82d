"""BART's denoising: text infilling and sentence permutation, reconstructed by the decoder.

Lewis et al. 2020, "BART: Denoising Sequence-to-Sequence Pre-training for Natural Language
Generation, Translation, and Comprehension", §2.2. A document is corrupted and the decoder
regenerates the original:

* sentence permutation: the document's sentences are shuffled into a random order;
* text infilling: spans of lengths ℓ ~ Poisson(λ = 3) cover 30 % of the tokens, and each span
  is replaced by a single mask token (a 0-length span inserts a mask), so the model also
  learns how many tokens are missing (:mod:`~babelzoo.objectives.noising`). With
  ``unit="word"`` spans are counted in whole words instead (mBART's unit).

    L = −(1/|y|) Σ_t log p(y_t | y_<t, noise(y))

Layout (fairseq's and Hugging Face's BART: the decoder starts from ``</s>``), with the document's
sentences joined by ``</s>`` (it stands for the full stop fairseq permutes at; it can be masked)::

    input_ids           <s> noise(s1 </s> s2 </s> s3) </s>
    labels              <s> s1 </s> s2 </s> s3 </s>
    decoder_input_ids   </s> <s> s1 </s> s2 </s> s3

A document longer than ``max_length − 2`` tokens is cut at its end (counted as ``truncated``)
before any noise, so the input and the target hold the same text.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import register_objective
from .examples import ExampleError, Sentence, as_document, require_nonempty
from .noising import (draw_span_lengths, group_words, infill, noise_budget, permute_sentences, place_spans,
                      poisson_span_lengths)
from .seq2seq_base import Seq2SeqObjective, seq2seq_batch

UNITS = ("token", "word")


def join_sentences(sentences: Sequence[Sequence[int]], separator: int) -> list[int]:
    """s1 </s> s2 </s> ... sk: one stream of a document's sentences."""
    out: list[int] = []
    for k, sentence in enumerate(sentences):
        out += [separator] if k else []
        out += list(sentence)
    return out


def cut_document(sentences: Sequence[Sequence[int]], budget: int) -> tuple[list[list[int]], int]:
    """The leading sentences whose stream fits ``budget`` tokens (the last one cut to fit), and
    how many tokens of the document were left out."""
    kept, used = [], 0
    for sentence in sentences:
        room = budget - used - (1 if kept else 0)
        if room <= 0:
            break
        kept.append(list(sentence[:room]))
        used += len(kept[-1]) + (1 if len(kept) > 1 else 0)
    return kept, len(join_sentences(sentences, 0)) - used


@register_objective
class TextInfilling(Seq2SeqObjective):
    """BART's text infilling and sentence permutation over documents (sequences of sentences,
    each token ids or ``(ids, lang)``). ``mask_ratio``: the share of units the spans cover
    (default 0.3; 0 turns infilling off); ``poisson_lambda``/``span_max``: the span lengths
    ℓ = 0..span_max ~ Poisson(λ), default λ = 3; ``unit``: what spans count, ``"token"`` (BART,
    the default) or ``"word"`` (mBART), which needs the tokenizer's ``word_starts`` table
    ([vocab] bool; recipes pass it); ``permute_sentences``: shuffle the sentences first."""

    name = "text_infilling"
    consumes = "document"
    from_run = ("word_starts",)
    mask_ratio_default, poisson_lambda_default, unit_default = 0.3, 3.0, "token"

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *,
                 mask_ratio: Optional[float] = None, poisson_lambda: Optional[float] = None, span_max: int = 40,
                 unit: Optional[str] = None, word_starts: Optional[torch.Tensor] = None,
                 permute_sentences: bool = True, max_length: Optional[int] = None):
        super().__init__(specials, config, max_length=max_length)
        mask_ratio = self.mask_ratio_default if mask_ratio is None else mask_ratio
        poisson_lambda = self.poisson_lambda_default if poisson_lambda is None else poisson_lambda
        if not 0.0 <= mask_ratio < 1.0:
            raise ConfigError(f"{self.name}: mask_ratio={mask_ratio!r} must be in [0, 1)")
        if not poisson_lambda > 0:
            raise ConfigError(f"{self.name}: poisson_lambda={poisson_lambda!r} must be positive")
        if not (isinstance(span_max, int) and span_max >= 1):
            raise ConfigError(f"{self.name}: span_max={span_max!r} must be a positive integer")
        unit = self.unit_default if unit is None else unit
        if unit not in UNITS:
            raise ConfigError(f"{self.name}: unit={unit!r} must be one of {', '.join(UNITS)}")
        self.unit, self.word_starts = unit, None
        if unit == "word":
            if word_starts is None:
                raise ConfigError(f"{self.name}: unit='word' needs a word_starts table; build one with "
                                  "word_starts_from_pieces(tokenizer pieces), or set unit: token")
            if tuple(word_starts.shape) != (specials.vocab_size,):
                raise ConfigError(f"{self.name}: word_starts has shape {tuple(word_starts.shape)}; expected "
                                  f"({specials.vocab_size},), one flag per vocabulary entry")
            self.word_starts = word_starts.bool().tolist()
        self.mask_ratio, self.poisson_lambda = mask_ratio, poisson_lambda
        self.span_max, self.span_lengths = span_max, poisson_span_lengths(poisson_lambda, span_max, min_length=0)
        self.permute_sentences = permute_sentences

    def noise(self, sentences: list[list[int]]) -> list[int]:
        """The corrupted stream of a document's sentences."""
        s = self.specials
        order = permute_sentences(sentences) if self.permute_sentences else sentences
        stream = join_sentences(order, s.sep)
        units = [[t] for t in stream] if self.word_starts is None else group_words(stream, self.word_starts)
        budget = noise_budget(len(units), self.mask_ratio)
        spans = place_spans(len(units), draw_span_lengths(budget, self.span_lengths))
        return [t for unit in infill(units, spans, [s.mask]) for t in unit]

    def frame(self, noised: list[int], original: list[int], document: list[Sentence],
              index: int) -> tuple[list[int], list[int], int]:
        """(encoder tokens, target tokens, decoder start token) of one example."""
        s = self.specials
        return [s.cls, *noised, s.sep], [s.cls, *original, s.sep], s.sep

    def prepare(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        require_nonempty(examples, self.name)
        budget = self.max_length - 2
        sources, targets, starts, truncated = [], [], [], 0
        for i, example in enumerate(examples):
            document = as_document(example, i)
            if not any(sentence.ids for sentence in document):
                raise ExampleError(f"{self.name}: example {i} is an empty document")
            sentences, cut = cut_document([sentence.ids for sentence in document], budget)
            noised = self.noise(sentences)
            truncated += cut + max(0, len(noised) - budget)  # inserted masks may overshoot, rarely
            source, target, start = self.frame(noised[:budget], join_sentences(sentences, self.specials.sep),
                                               document, i)
            sources.append(source)
            targets.append(target)
            starts.append(start)
        return seq2seq_batch(sources, targets, starts, self.specials, "document", truncated)
