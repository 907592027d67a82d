"""Masking for masked language modelling: which tokens to predict, and what the model sees.

BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", §3.1): 15% of the token positions of each sequence are chosen for prediction;
a chosen token is replaced by [MASK] 80% of the time, by a random token 10% of the time and
kept 10% of the time. Masks are drawn anew every time a batch is prepared (RoBERTa's dynamic
masking, Liu et al. 2019), so an example seen twice is masked differently.

Three units of selection:

* ``token`` — positions chosen uniformly among the maskable ones.
* ``word`` — whole-word masking (BERT's released wwm models): all pieces of a word are chosen
  together; words are taken in random order until the budget is spent, skipping a word that
  would overshoot it, exactly as BERT's ``create_masked_lm_predictions``.
* ``span`` — SpanBERT (Joshi et al. 2020, "SpanBERT: Improving Pre-training by Representing
  and Predicting Spans", §3.1): repeatedly draw a span length in words
  ℓ ~ Geo(p=0.2) clipped to ℓ ≤ 10 (renormalised, mean 3.8), a uniformly random starting word,
  and mask that many complete words, until 15% of the tokens are masked; the 80/10/10
  replacement is decided once per span. Without a ``word_starts`` table each token counts as a
  word.

The budget of a sequence with n maskable tokens is ⌊p·n + u⌋, u ~ U[0, 1) (fairseq's
randomised rounding), so its expectation is exactly p·n even for short sequences.

Words are defined by a ``word_starts`` table ([vocab] bool, True where a piece begins a word):
see :func:`word_starts_from_pieces`. A maskable token right after a non-maskable one always
starts a word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple, Optional, Sequence

import torch

from ..datasets.specials import SpecialIds
from ..errors import InputError
from ..typed import Where, build, check_fields
from ..zoo.config import ConfigError
from .batching import IGNORE

UNITS = ("token", "word", "span")


@dataclass(frozen=True)
class MaskingConfig:
    """``probability`` of choosing a token; ``mask_token``/``random_token``: the shares of
    chosen tokens replaced by [MASK] / by a random token (the rest are kept); ``unit``: token,
    word or span; ``span_p``/``span_max``: SpanBERT's geometric parameter and clip."""

    probability: float = 0.15
    mask_token: float = 0.8
    random_token: float = 0.1
    unit: str = "token"
    span_p: float = 0.2
    span_max: int = 10

    def __post_init__(self) -> None:
        check_fields(self)
        if not 0.0 < self.probability < 1.0:
            raise ConfigError(f"MaskingConfig.probability={self.probability!r} must be in (0, 1)")
        for name in ("mask_token", "random_token"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"MaskingConfig.{name}={value!r} must be in [0, 1]")
        if self.mask_token + self.random_token > 1.0 + 1e-9:
            raise ConfigError(f"MaskingConfig.mask_token + random_token = {self.mask_token + self.random_token} "
                              "must not exceed 1")
        if self.unit not in UNITS:
            raise ConfigError(f"MaskingConfig.unit={self.unit!r} must be one of {', '.join(UNITS)}")
        if not 0.0 < self.span_p <= 1.0:
            raise ConfigError(f"MaskingConfig.span_p={self.span_p!r} must be in (0, 1]")
        if not (isinstance(self.span_max, int) and self.span_max >= 1):
            raise ConfigError(f"MaskingConfig.span_max={self.span_max!r} must be a positive integer")

    @classmethod
    def coerce(cls, value: "MaskingConfig | Mapping | None") -> "MaskingConfig":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        return build(cls, value, Where(label="MaskingConfig."), what="MaskingConfig")


class Masked(NamedTuple):
    """``input_ids`` as the model sees them, ``labels`` (original id where chosen, else -100)."""

    input_ids: torch.Tensor
    labels: torch.Tensor


def word_starts_from_pieces(pieces: Sequence[str]) -> torch.Tensor:
    """[vocab] bool table from a vocabulary's pieces: sentencepiece marks a word start with a
    leading "▁"; WordPiece marks a continuation with a leading "##" (used when any piece has it)."""
    wordpiece = any(p.startswith("##") for p in pieces)
    if wordpiece:
        return torch.tensor([not p.startswith("##") for p in pieces], dtype=torch.bool)
    return torch.tensor([p.startswith("\u2581") for p in pieces], dtype=torch.bool)


def span_length_distribution(p: float = 0.2, max_length: int = 10) -> torch.Tensor:
    """P(ℓ) for ℓ = 1..max_length: Geo(p) clipped and renormalised, as SpanBERT samples spans."""
    lengths = torch.arange(1, max_length + 1, dtype=torch.float64)
    probs = p * (1 - p) ** (lengths - 1)  # P(ℓ) ∝ p(1−p)^(ℓ−1)
    return probs / probs.sum()


class Masker:
    """Choose and replace tokens for masked LM. Deterministic given the torch RNG state (or
    ``generator``)."""

    def __init__(self, specials: SpecialIds, config: MaskingConfig | Mapping | None = None,
                 word_starts: Optional[torch.Tensor] = None):
        self.specials = specials
        self.config = MaskingConfig.coerce(config)
        special = torch.zeros(specials.vocab_size, dtype=torch.bool)
        special[sorted(i for i in specials.all_special() if 0 <= i < specials.vocab_size)] = True
        self.special_table = special
        # Random replacements are drawn from ordinary tokens: a random [PAD] or [CLS] inside a
        # sentence would teach the model nothing about language.
        self.replacements = (~special).nonzero().squeeze(1)
        if word_starts is not None:
            word_starts = torch.as_tensor(word_starts, dtype=torch.bool)
            if word_starts.shape != (specials.vocab_size,):
                raise InputError(f"word_starts has shape {tuple(word_starts.shape)}; expected "
                                 f"({specials.vocab_size},), one flag per vocabulary entry")
        elif self.config.unit == "word":
            raise ConfigError("whole-word masking (unit='word') needs a word_starts table; build one with "
                              "word_starts_from_pieces(tokenizer pieces)")
        self.word_starts = word_starts
        self._starts = word_starts.tolist() if word_starts is not None else None
        self.span_lengths = span_length_distribution(self.config.span_p, self.config.span_max).float()

    # --- selection ---------------------------------------------------------------------------
    def maskable(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Positions that may be chosen: every non-special token."""
        return ~self.special_table[input_ids]

    def _budgets(self, candidates: torch.Tensor, generator) -> torch.Tensor:
        n = candidates.sum(1).double()
        u = torch.rand(n.shape, generator=generator, dtype=torch.float64)
        return torch.floor(self.config.probability * n + u).long()  # ⌊p·n + u⌋, E = p·n

    def _words(self, ids: list[int], cand: list[bool]) -> list[tuple[int, int]]:
        """(start, end) token ranges of the words in one row, over maskable positions."""
        starts = self._starts
        words: list[tuple[int, int]] = []
        for t, (tok, ok) in enumerate(zip(ids, cand)):
            if not ok:
                continue
            new = starts is None or starts[tok] or not words or words[-1][1] != t
            if new:
                words.append((t, t + 1))
            else:
                words[-1] = (words[-1][0], t + 1)
        return words

    def select(self, input_ids: torch.Tensor, candidates: torch.Tensor,
               generator: Optional[torch.Generator] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Bool [B, L] chosen positions, and [B, L] unit ids (positions sharing a unit id get one
        replacement decision: spans under ``unit='span'``, single tokens otherwise)."""
        budgets = self._budgets(candidates, generator)
        b, length = input_ids.shape
        unit_ids = torch.arange(b * length).view(b, length)
        if self.config.unit == "token":
            scores = torch.rand(input_ids.shape, generator=generator).masked_fill(~candidates, 2.0)
            ranks = scores.argsort(dim=1).argsort(dim=1)
            chosen = ranks < budgets[:, None]
        else:
            chosen_rows, unit_rows = [], []
            for row in range(b):
                words = self._words(input_ids[row].tolist(), candidates[row].tolist())
                picked = [False] * length
                units = list(range(row * length, (row + 1) * length))
                if self.config.unit == "word":
                    self._select_words(words, int(budgets[row]), picked, generator)
                else:
                    self._select_spans(words, int(budgets[row]), picked, units, generator)
                chosen_rows.append(picked)
                unit_rows.append(units)
            chosen = torch.tensor(chosen_rows, dtype=torch.bool).view(b, length)
            unit_ids = torch.tensor(unit_rows, dtype=torch.long).view(b, length)
        if not bool(chosen.any()) and bool(candidates.any()):
            # A batch of very short sequences can round every budget down to 0; predict one
            # token so the loss is defined.
            flat = candidates.flatten().nonzero().squeeze(1)
            pick = flat[torch.randint(len(flat), (1,), generator=generator)]
            chosen.view(-1)[pick] = True
        return chosen, unit_ids

    @staticmethod
    def _select_words(words, budget: int, chosen: list[bool], generator) -> None:
        count = 0
        for w in torch.randperm(len(words), generator=generator).tolist():
            if count >= budget:
                break
            start, end = words[w]
            if count + (end - start) > budget:
                continue  # BERT skips a word that would overshoot the budget
            chosen[start:end] = [True] * (end - start)
            count += end - start

    def _select_spans(self, words, budget: int, chosen: list[bool], units: list[int], generator) -> None:
        if not words or budget <= 0:
            return
        count, draws = 0, 0
        limit = 20 * budget + 20
        # Draws are made in bulk (lengths ℓ ~ clipped Geo(p), uniform start words) for speed.
        lengths = (torch.multinomial(self.span_lengths, limit, replacement=True, generator=generator) + 1).tolist()
        firsts = torch.randint(len(words), (limit,), generator=generator).tolist()
        while count < budget and draws < limit:
            span, first = lengths[draws], firsts[draws]
            draws += 1
            anchor = words[first][0]
            if chosen[anchor]:
                continue
            previous_end = anchor
            for start, end in words[first: first + span]:
                if start != previous_end:
                    break  # a span never jumps over special tokens (e.g. between TLM's two sides)
                for t in range(start, end):
                    if count >= budget:
                        break
                    if not chosen[t]:
                        chosen[t] = True
                        count += 1
                    units[t] = anchor + units[0]
                previous_end = end

    # --- replacement --------------------------------------------------------------------------
    def __call__(self, input_ids: torch.Tensor, candidates: Optional[torch.Tensor] = None,
                 generator: Optional[torch.Generator] = None) -> Masked:
        """Mask a [B, L] batch; ``candidates`` (bool [B, L]) restricts where masks may fall
        (default: every non-special token)."""
        if candidates is None:
            candidates = self.maskable(input_ids)
        else:
            candidates = candidates & self.maskable(input_ids)
        chosen, unit_ids = self.select(input_ids, candidates, generator)
        labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
        # One uniform draw per unit: u < 0.8 → [MASK], 0.8 ≤ u < 0.9 → random token, else keep.
        draws = torch.rand(unit_ids.numel(), generator=generator)[unit_ids]
        to_mask = chosen & (draws < self.config.mask_token)
        to_random = chosen & ~to_mask & (draws < self.config.mask_token + self.config.random_token)
        random_ids = self.replacements[torch.randint(len(self.replacements), input_ids.shape, generator=generator)]
        out = torch.where(to_mask, torch.full_like(input_ids, self.specials.mask), input_ids)
        out = torch.where(to_random, random_ids, out)
        return Masked(out, labels)
