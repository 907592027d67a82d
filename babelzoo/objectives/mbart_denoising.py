"""mBART: BART's denoising over documents of many languages, with language tags.

Liu et al. 2020, "Multilingual Denoising Pre-training for Neural Machine Translation", §2.2:
the noise of :mod:`~babelzoo.objectives.text_infilling` (sentence permutation, then spans of
lengths ℓ ~ Poisson(λ = 3.5) covering 35 % of the words, each replaced by one mask), on documents
of one language each; the language's tag ends the encoder input and starts the decoder, and the
decoder regenerates the document and then the tag (the paper's Figure 1)::

    input_ids           noise(s1 </s> s2) </s> [de]
    labels              s1 </s> s2 </s> [de]
    decoder_input_ids   [de] s1 </s> s2 </s>

    L = −(1/|y|) Σ_t log p(y_t | y_<t, noise(y), [lang])

Tags are the vocabulary's own ``[xx]`` tokens (``SpecialIds.language_tags``: babelzoo's
tokenizers reserve one per training language); a document whose language has no tag is an
error that names the tag.
"""

from __future__ import annotations

from .base import register_objective
from .examples import Sentence
from .seq2seq_base import tag_id
from .text_infilling import TextInfilling


@register_objective
class MBARTDenoising(TextInfilling):
    """mBART's denoising over documents whose sentences carry their language (``(ids, lang)``);
    the options are :class:`TextInfilling`'s, with ``mask_ratio`` 0.35, ``poisson_lambda`` 3.5
    and ``unit`` ``"word"`` (so it takes the tokenizer's ``word_starts`` table)."""

    name = "mbart_denoising"
    consumes = "document"
    mask_ratio_default, poisson_lambda_default, unit_default = 0.35, 3.5, "word"

    def frame(self, noised: list[int], original: list[int], document: list[Sentence],
              index: int) -> tuple[list[int], list[int], int]:
        s = self.specials
        tag = tag_id(s, document[0].lang, f"{self.name}: example {index}")
        return [*noised, s.sep, tag], [*original, s.sep, tag], tag
