"""Autoregressive decoding for any model that can take one step: greedy, sampling (temperature,
top-k, top-p) and beam search, with forced first tokens, n-gram blocking, stop and pad tokens.

A model hands :func:`generate` a ``step(tokens [N, 1]) -> logits [N, V]`` that runs the decoder
on the newest token of each of N rows (keeping its own key/value cache) and a
``reorder(rows)`` that makes row ``i`` of that cache old row ``rows[i]`` (beam search). The
rules follow transformers' ``generate`` so that both give the same tokens on the same weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ..errors import InputError
from .sentences import attached_tokenizer

Step = Callable[[torch.Tensor], torch.Tensor]
NEG = -1.0e9  # a score that loses every comparison and stays finite in sums


@dataclass(frozen=True)
class GenerationSettings:
    """The options of :meth:`~babelzoo.zoo.families.seq2seq.model.Seq2SeqModel.generate`, checked together."""

    max_new_tokens: int
    decoder_start_token_id: int
    eos_token_id: int
    pad_token_id: int
    vocab_size: int
    num_beams: int = 1
    do_sample: bool = False
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    temperature: float = 1.0
    length_penalty: float = 1.0
    early_stopping: bool = False
    no_repeat_ngram_size: int = 0
    forced_bos_token_id: Optional[int] = None

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, why: str) -> None:
            if not ok:
                raise InputError(f"generate: {name}={getattr(self, name)!r} {why}")

        need(_is_int(self.max_new_tokens) and self.max_new_tokens >= 1, "max_new_tokens", "must be a positive integer")
        need(_is_int(self.num_beams) and self.num_beams >= 1, "num_beams", "must be a positive integer")
        need(self.top_k is None or (_is_int(self.top_k) and self.top_k >= 1), "top_k", "must be a positive integer")
        need(self.top_p is None or 0.0 < self.top_p <= 1.0, "top_p", "must be in (0, 1]")
        need(self.temperature > 0 and math.isfinite(self.temperature), "temperature",
             "must be a positive finite number")
        # a NaN or infinite exponent makes every finished beam's score NaN, 0 or ±inf: the order is lost
        need(isinstance(self.length_penalty, (int, float)) and math.isfinite(self.length_penalty), "length_penalty",
             "must be a finite number")
        need(_is_int(self.no_repeat_ngram_size) and self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size",
             "must be a non-negative integer")
        need(not (self.do_sample and self.num_beams > 1), "num_beams", "must be 1 with do_sample=True")
        for name in ("decoder_start_token_id", "eos_token_id", "pad_token_id", "forced_bos_token_id"):
            value = getattr(self, name)
            need(value is None or (_is_int(value) and 0 <= value < self.vocab_size), name,
                 f"must be a token id below the vocabulary size {self.vocab_size}")

    @property
    def max_length(self) -> int:
        """Sequence length at most: the start token plus the new tokens."""
        return 1 + self.max_new_tokens


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def generate(step: Step, reorder: Callable[[torch.Tensor], None], batch: int, device,
             settings: GenerationSettings, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """[B, T] ids: the start token, then the generated tokens, ``pad_token_id`` after a row's
    end token. ``step`` serves ``batch · num_beams`` rows (each source's beams together)."""
    if settings.num_beams > 1:
        return _beam_search(step, reorder, batch, device, settings)
    return _greedy_or_sample(step, batch, device, settings, generator)


class Generates:
    """``generate`` for an encoder–decoder: a model whose ``config.text`` is an
    :class:`~babelzoo.zoo.config.EncoderDecoderConfig` (the default ids, the language tags) and
    which gives ``decoding(input_ids, attention_mask, settings) -> (step, reorder)``."""

    def language_id(self, code: str) -> int:
        """The id of language ``code``'s tag: from the attached tokenizer when it has a tag for
        that language (babelzoo's ``[de]``) or the tag as a token (mBART's ``de_DE``), else from
        the config's ``languages``. An unknown tag is an error naming it."""
        tokenizer = attached_tokenizer(self)
        if tokenizer is not None:
            tags = getattr(tokenizer.specials, "language_tags", {})
            if code in tags:
                return tags[code]
            found = tokenizer.token_to_id(code)
            if found != tokenizer.specials.unk:
                return found
            known = [*sorted(tags), *(t for t in self.config.text.languages
                                      if tokenizer.token_to_id(t) != tokenizer.specials.unk)]
            raise InputError(f"unknown language tag {code!r}: the tokenizer of {self.config.architecture!r} has no "
                             f"such token; tags it knows: {', '.join(known) or 'none'}")
        return self.config.text.language_id(code)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None, *,
                 max_new_tokens: int, num_beams: int = 1, do_sample: bool = False, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, temperature: float = 1.0, length_penalty: float = 1.0,
                 early_stopping: bool = False, no_repeat_ngram_size: int = 0,
                 decoder_start_token_id: Optional[int] = None, forced_bos_token_id: Optional[int] = None,
                 eos_token_id: Optional[int] = None, pad_token_id: Optional[int] = None,
                 target_language: Optional[str] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """Generated target ids [B, T], each row starting with the decoder's start token and padded
        with ``pad_token_id`` after its end token, as transformers' ``generate`` returns them.

        Greedy (``num_beams=1``), beam search (``num_beams > 1``: ``length_penalty`` divides a
        finished hypothesis' log-probability by its length to that power, ``early_stopping``
        stops a row once ``num_beams`` hypotheses are finished) or sampling (``do_sample``,
        ``temperature``, ``top_k``, ``top_p``; reproducible with ``generator``).
        ``no_repeat_ngram_size`` forbids any n-gram to occur twice. The first generated token is
        forced to ``forced_bos_token_id``, or to ``target_language``'s tag (mBART). Ids default to
        the config's. The source is encoded once::

            ids = model.generate(src, max_new_tokens=32, num_beams=4, target_language="de_DE")
        """
        text = self.config.text
        if target_language is not None:
            if forced_bos_token_id is not None:
                raise InputError("give forced_bos_token_id or target_language, not both")
            forced_bos_token_id = self.language_id(target_language)
        settings = GenerationSettings(
            max_new_tokens=max_new_tokens, num_beams=num_beams, do_sample=do_sample, top_k=top_k, top_p=top_p,
            temperature=temperature, length_penalty=length_penalty, early_stopping=early_stopping,
            no_repeat_ngram_size=no_repeat_ngram_size,
            decoder_start_token_id=_default(decoder_start_token_id, text.decoder_start_token_id),
            forced_bos_token_id=_default(forced_bos_token_id, text.forced_bos_token_id),
            eos_token_id=_default(eos_token_id, text.eos_token_id), pad_token_id=_default(pad_token_id, text.pad_token_id),
            vocab_size=text.vocab_size)
        if settings.max_length > text.max_positions:
            raise InputError(f"generate: max_new_tokens={max_new_tokens} makes targets of {settings.max_length} "
                             f"positions with the start token, but model {self.config.architecture!r} holds "
                             f"{text.max_positions} ({type(text).__name__}.max_positions)")
        if attention_mask is None:
            attention_mask = input_ids.ne(text.pad_token_id).long()
        step, reorder = self.decoding(input_ids, attention_mask, settings)
        return generate(step, reorder, input_ids.shape[0], input_ids.device, settings, generator)


def _default(value, fallback):
    return fallback if value is None else value


# --- logits processors (transformers' order: n-gram blocking, forced first token) ---------------

def process(scores: torch.Tensor, sequences: torch.Tensor, settings: GenerationSettings) -> torch.Tensor:
    """Scores [N, V] of the token after ``sequences`` [N, L] with the forbidden tokens at -inf."""
    if settings.no_repeat_ngram_size > 0:
        scores = block_repeated_ngrams(scores, sequences, settings.no_repeat_ngram_size)
    if settings.forced_bos_token_id is not None and sequences.shape[1] == 1:
        forced = torch.full_like(scores, float("-inf"))
        forced[:, settings.forced_bos_token_id] = 0.0
        scores = forced
    return scores


def block_repeated_ngrams(scores: torch.Tensor, sequences: torch.Tensor, n: int) -> torch.Tensor:
    """Forbid every token that would complete an n-gram already in its row: token w is banned
    after ``s[-(n-1):]`` when ``s[j:j+n-1] == s[-(n-1):]`` and ``s[j+n-1] == w`` for some j."""
    length = sequences.shape[1]
    if length < n:
        return scores
    windows = sequences.unfold(1, n, 1)  # [N, L-n+1, n]
    last = sequences[:, length - n + 1:]  # the n-1 tokens a new n-gram would start with
    match = (windows[:, :, :-1] == last[:, None, :]).all(dim=-1)
    banned = torch.zeros_like(scores).scatter_add_(1, windows[:, :, -1], match.to(scores.dtype)) > 0
    return scores.masked_fill(banned, float("-inf"))


def warp(scores: torch.Tensor, settings: GenerationSettings) -> torch.Tensor:
    """Sampling's scores: divided by the temperature, then all but the ``top_k`` best at -inf,
    then all but the smallest set of best tokens whose probability reaches ``top_p``."""
    if settings.temperature != 1.0:
        scores = scores / settings.temperature
    if settings.top_k is not None:
        k = min(settings.top_k, scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if settings.top_p is not None and settings.top_p < 1.0:
        ascending, order = torch.sort(scores, dim=-1)
        # drop the least likely tokens while their total stays within 1 - p (the best one always stays)
        drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - settings.top_p
        drop[:, -1] = False
        scores = scores.masked_fill(drop.scatter(1, order, drop), float("-inf"))
    return scores


# --- greedy and sampling ----------------------------------------------------------------------

def _greedy_or_sample(step: Step, batch: int, device, settings: GenerationSettings,
                      generator: Optional[torch.Generator]) -> torch.Tensor:
    sequences = torch.full((batch, settings.max_length), settings.pad_token_id, dtype=torch.long, device=device)
    sequences[:, 0] = settings.decoder_start_token_id
    running = torch.ones(batch, dtype=torch.bool, device=device)
    length = settings.max_length
    for t in range(settings.max_new_tokens):
        scores = process(step(sequences[:, t:t + 1]).float(), sequences[:, :t + 1], settings)
        if settings.do_sample:
            probs = warp(scores, settings).softmax(dim=-1)
            tokens = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        else:
            tokens = scores.argmax(dim=-1)
        tokens = torch.where(running, tokens, settings.pad_token_id)
        sequences[:, t + 1] = tokens
        running &= tokens.ne(settings.eos_token_id)
        if not bool(running.any()):
            length = t + 2
            break
    return sequences[:, :length]


# --- beam search --------------------------------------------------------------------------------

@dataclass
class _Beams:
    """Beam search's state per source: the running beams and the finished hypotheses, each
    [B, K, ...] and sorted best first."""

    running: torch.Tensor  # [B, K, T] ids
    running_scores: torch.Tensor  # [B, K] sum of log-probabilities
    finished: torch.Tensor  # [B, K, T] ids
    finished_scores: torch.Tensor  # [B, K] length-normalised
    finished_lengths: torch.Tensor  # [B, K] generated tokens, the end token included
    is_finished: torch.Tensor  # [B, K] bool: the slot holds a hypothesis
    improvable: torch.Tensor  # [B, 1] bool: a running beam may still beat the worst finished one


def _beam_search(step: Step, reorder: Callable[[torch.Tensor], None], batch: int, device,
                 settings: GenerationSettings) -> torch.Tensor:
    k, length = settings.num_beams, settings.max_length
    running = torch.full((batch, k, length), settings.pad_token_id, dtype=torch.long, device=device)
    running[:, :, 0] = settings.decoder_start_token_id
    scores = torch.zeros(batch, k, device=device)
    scores[:, 1:] = NEG  # all beams start equal: only the first one may expand at the first step
    beams = _Beams(running, scores, running.clone(), torch.full((batch, k), NEG, device=device),
                   torch.zeros(batch, k, dtype=torch.long, device=device),
                   torch.zeros(batch, k, dtype=torch.bool, device=device),
                   torch.ones(batch, 1, dtype=torch.bool, device=device))
    top_k_mask = torch.arange(2 * k, device=device) < k
    offsets = (torch.arange(batch, device=device) * k)[:, None]
    for t in range(settings.max_new_tokens):
        current = t + 1  # tokens in each running sequence
        flat = beams.running.view(batch * k, length)
        log_probs = process(step(flat[:, t:t + 1]).float().log_softmax(dim=-1), flat[:, :current], settings)
        totals = (log_probs.view(batch, k, -1) + beams.running_scores[:, :, None]).view(batch, -1)
        # 2K candidates: at least K of them do not end, whatever the end tokens take
        top_scores, top_index = torch.topk(totals, 2 * k, dim=-1)
        source = torch.div(top_index, log_probs.shape[-1], rounding_mode="floor")
        candidates = beams.running.gather(1, source[:, :, None].expand(-1, -1, length)).clone()
        candidates[:, :, current] = top_index % log_probs.shape[-1]
        ends = candidates[:, :, current].eq(settings.eos_token_id) | (current + 1 >= length)
        keep = torch.topk(top_scores + ends.float() * NEG, k, dim=-1).indices
        _finish(beams, candidates, top_scores, ends & top_k_mask, current, settings)
        beams.running = candidates.gather(1, keep[:, :, None].expand(-1, -1, length))
        beams.running_scores = (top_scores + ends.float() * NEG).gather(1, keep)
        reorder((source.gather(1, keep) + offsets).view(-1))
        # could a running beam still beat the worst finished one? (transformers' heuristic:
        # its score normalised by the current length)
        best = beams.running_scores[:, :1] / (current ** settings.length_penalty)
        worst = torch.where(beams.is_finished, beams.finished_scores.min(dim=1, keepdim=True).values, NEG)
        beams.improvable &= (best > worst).any(dim=-1, keepdim=True)
        full = bool(beams.is_finished.all()) and settings.early_stopping
        if not bool(beams.improvable.any()) or full or bool(ends.all()):
            break
    generated = int(beams.finished_lengths[:, 0].max())
    return beams.finished[:, 0, :1 + generated]


def _finish(beams: _Beams, candidates: torch.Tensor, top_scores: torch.Tensor, ends: torch.Tensor,
            current: int, settings: GenerationSettings) -> None:
    """Merge the candidates that end now (among the K best) into the K best finished
    hypotheses; a finished score is Σ log p / (generated tokens)^length_penalty."""
    generated = current  # tokens after the start token, this end token included
    normalised = top_scores / (generated ** settings.length_penalty)
    if settings.early_stopping:
        normalised = normalised + beams.is_finished.all(dim=-1, keepdim=True).float() * NEG
    normalised = normalised + (~beams.improvable).float() * NEG
    normalised = normalised + (~ends).float() * NEG
    scores = torch.cat([beams.finished_scores, normalised], dim=1)
    best = torch.topk(scores, beams.finished_scores.shape[1], dim=1).indices
    lengths = torch.full_like(top_scores, generated, dtype=torch.long)
    width = candidates.shape[-1]
    beams.finished = torch.cat([beams.finished, candidates], dim=1).gather(1, best[:, :, None].expand(-1, -1, width))
    beams.finished_scores = scores.gather(1, best)
    beams.finished_lengths = torch.cat([beams.finished_lengths, lengths], dim=1).gather(1, best)
    beams.is_finished = torch.cat([beams.is_finished, ends], dim=1).gather(1, best)
