"""Noising functions of the sequence-to-sequence objectives, pure functions over token-id lists.

Randomness comes from the torch RNG (or ``generator``), so a batch is a function of the seed.

* :func:`poisson_span_lengths` — P(ℓ) ∝ λ^ℓ e^{−λ} / ℓ! over ℓ = ``min_length``..``max_length``:
  GLM's span lengths (ℓ ≥ 1) and BART's (ℓ ≥ 0, a 0-length span inserts a mask).
* :func:`noise_budget` — ⌊p·n + u⌋, u ~ U[0, 1): how many of n tokens to noise, E = p·n exactly.
* BART's text infilling (Lewis et al. 2020, §2.2): :func:`draw_span_lengths` draws lengths until
  they cover the budget (the last one cut to fit, as fairseq's ``add_whole_word_mask``),
  :func:`place_spans` places them without overlap, :func:`infill` replaces each span by one mask;
  over tokens, or over the words of :func:`group_words` (mBART masks words).
* BART's sentence permutation: :func:`permute_sentences`.
* T5's span corruption (Raffel et al. 2020, §3.1.4): :func:`t5_noise_mask` (the exact
  ``random_spans_noise_mask`` of the T5 code) and :func:`corrupt_spans` (sentinel layout).
* MASS (Song et al. 2019, §2.2): :func:`mass_fragment`, one contiguous fragment.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import torch

from ..errors import InputError

Generator = Optional[torch.Generator]


def poisson_span_lengths(lam: float = 3.0, max_length: int = 40, min_length: int = 1) -> torch.Tensor:
    """P(ℓ) for ℓ = min_length..max_length: Poisson(λ) clipped to that range and renormalised."""
    lengths = torch.arange(min_length, max_length + 1, dtype=torch.float64)
    log_p = lengths * math.log(lam) - lam - torch.lgamma(lengths + 1)  # log(λ^ℓ e^{−λ} / ℓ!)
    probs = log_p.exp()
    return probs / probs.sum()


def noise_budget(n: int, ratio: float, generator: Generator = None) -> int:
    """⌊ratio·n + u⌋, u ~ U[0, 1) (fairseq's randomised rounding): E = ratio·n even for short n."""
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    return min(n, math.floor(ratio * n + u))


def draw_span_lengths(budget: int, probs: torch.Tensor, min_length: int = 0,
                      generator: Generator = None) -> list[int]:
    """Span lengths ℓ ~ ``probs`` (P(ℓ) for ℓ = min_length, min_length + 1, ...) drawn until they
    sum to at least ``budget``; the last one is cut so that they sum to ``budget`` exactly. In
    drawing order; 0-length spans stay (each inserts a mask)."""
    lengths: list[int] = []
    total = 0
    while total < budget:
        draws = (torch.multinomial(probs, 16, replacement=True, generator=generator) + min_length).tolist()
        for length in draws:
            lengths.append(min(length, budget - total))
            total += lengths[-1]
            if total >= budget:
                break
    return lengths


def place_spans(n: int, lengths: Sequence[int], generator: Generator = None) -> list[tuple[int, int]]:
    """(start, end) spans over a text of ``n`` tokens, in text order, from ``lengths`` (summing
    to at most n): the spans and the n − Σℓ untouched tokens are put in a uniformly random
    order (every interleaving equally likely; spans taken in a random order), so spans never
    overlap; two spans may touch, and a 0-length span is (start, start)."""
    kept = n - sum(lengths)
    if kept < 0:
        raise InputError(f"spans of {sum(lengths)} tokens do not fit in a text of {n} tokens")
    slots = kept + len(lengths)
    is_span = torch.zeros(slots, dtype=torch.bool)
    is_span[torch.randperm(slots, generator=generator)[:len(lengths)]] = True
    order = [lengths[k] for k in torch.randperm(len(lengths), generator=generator).tolist()]
    spans, position, k = [], 0, 0
    for span in is_span.tolist():
        if span:
            spans.append((position, position + order[k]))
            position += order[k]
            k += 1
        else:
            position += 1
    return spans


def group_words(ids: Sequence[int], word_starts: Sequence[bool]) -> list[list[int]]:
    """``ids`` cut into words: a new word begins at every id whose ``word_starts`` flag is set
    (and at the first id), as :func:`~babelzoo.objectives.masking.word_starts_from_pieces` flags
    pieces."""
    words: list[list[int]] = []
    for token in ids:
        if word_starts[token] or not words:
            words.append([])
        words[-1].append(token)
    return words


def infill(ids: Sequence, spans: Sequence[tuple[int, int]], mask) -> list:
    """``ids`` with each (start, end) span, in text order, replaced by one ``mask`` (BART's text
    infilling; a 0-length span inserts a mask). Items may be tokens or words (lists of tokens,
    with ``[mask]`` as the mask)."""
    out, position = [], 0
    for start, end in spans:
        if not position <= start <= end <= len(ids):
            raise InputError(f"span ({start}, {end}) overlaps another or leaves the text of {len(ids)} tokens")
        out += [*ids[position:start], mask]
        position = end
    return out + list(ids[position:])


def permute_sentences(sentences: Sequence[Sequence[int]], generator: Generator = None) -> list[list[int]]:
    """The sentences of a document in a uniformly random order (BART's sentence permutation)."""
    return [list(sentences[k]) for k in torch.randperm(len(sentences), generator=generator).tolist()]


def random_segmentation(num_items: int, num_segments: int, generator: Generator = None) -> list[int]:
    """Lengths of ``num_segments`` non-empty segments that partition ``num_items`` items,
    uniformly at random over all such partitions (T5's ``_random_segmentation``)."""
    if not 1 <= num_segments <= num_items:
        raise InputError(f"cannot cut {num_items} items into {num_segments} non-empty segments")
    cuts = torch.zeros(num_items - 1, dtype=torch.bool)
    cuts[:num_segments - 1] = True
    cuts = cuts[torch.randperm(num_items - 1, generator=generator)]
    first_in_segment = torch.cat([torch.zeros(1, dtype=torch.long), cuts.long()])
    return torch.bincount(first_in_segment.cumsum(0), minlength=num_segments).tolist()


def t5_noise_counts(length: int, density: float = 0.15, mean_span: float = 3.0) -> tuple[int, int]:
    """(noise tokens, noise spans) of a sequence of ``length`` tokens, T5's formula:
    num_noise_tokens = round(L·density) clipped to [1, L − 1], num_spans = max(1,
    round(num_noise_tokens / mean_span)) (rounding half to even, as NumPy's ``np.round``)."""
    tokens = min(max(round(length * density), 1), length - 1)
    return tokens, max(round(tokens / mean_span), 1)


def t5_noise_mask(length: int, density: float = 0.15, mean_span: float = 3.0,
                  generator: Generator = None) -> list[bool]:
    """T5's ``random_spans_noise_mask``: the noise tokens and the kept tokens are each cut into
    ``num_spans`` random non-empty segments (:func:`random_segmentation`), interleaved kept,
    noise, kept, noise, ... (so the sequence starts with kept tokens and ends with noise)."""
    if length < 2:
        raise InputError(f"span corruption needs at least 2 tokens, got {length}")
    noise, spans = t5_noise_counts(length, density, mean_span)
    spans = min(spans, length - noise)  # each kept segment needs a token (T5 never meets this)
    noise_lengths = random_segmentation(noise, spans, generator)
    kept_lengths = random_segmentation(length - noise, spans, generator)
    mask: list[bool] = []
    for kept, noisy in zip(kept_lengths, noise_lengths):
        mask += [False] * kept + [True] * noisy
    return mask


def corrupt_spans(ids: Sequence[int], noise: Sequence[bool], sentinels: Sequence[int]) -> tuple[list[int], list[int]]:
    """T5's input and target from ``ids`` and its noise mask: each run of noise tokens is
    replaced in the input by the next sentinel, and the target lists each sentinel followed by
    the run it replaced, then one more sentinel (the paper's Figure 2)::

        ids     Thank you for inviting me to your party last week
        input   Thank you <X> me to your party <Y> week
        target  <X> for inviting <Y> last <Z>
    """
    runs = sum(1 for t, noisy in enumerate(noise) if noisy and (t == 0 or not noise[t - 1]))
    if runs + 1 > len(sentinels):
        raise InputError(f"{runs} noise spans need {runs + 1} sentinels; the vocabulary has {len(sentinels)}")
    inputs: list[int] = []
    target: list[int] = []
    k = 0
    for t, (token, noisy) in enumerate(zip(ids, noise)):
        if noisy and (t == 0 or not noise[t - 1]):
            inputs.append(sentinels[k])
            target.append(sentinels[k])
            k += 1
        (target if noisy else inputs).append(token)
    return inputs, target + [sentinels[k]]


def mass_fragment(n: int, ratio: float = 0.5, generator: Generator = None) -> tuple[int, int]:
    """MASS's masked fragment of a sentence of ``n`` tokens: (start, end) of ⌊ratio·n + u⌋
    (at least 1) consecutive tokens at a uniformly random start."""
    length = max(1, noise_budget(n, ratio, generator))
    start = int(torch.randint(n - length + 1, (1,), generator=generator))
    return start, start + length
