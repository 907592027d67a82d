"""Translating with an encoder–decoder trained by the ``translation`` objective, and scoring it
with sacreBLEU (Post 2018, "A Call for Clarity in Reporting BLEU Scores").

:func:`translate` frames each source exactly as the objective does in training
(``x1 .. xm </s> [src]``), starts the decoder from the target language's tag and stops at
``</s>``; batches are formed over sources sorted by length and the translations come back in
input order::

    hypotheses = translate(model, tokenizer, sentences, "en", "de", num_beams=4)
    scores = corpus_scores(hypotheses, references, "de")   # BLEU, chrF and their signatures

BLEU (Papineni et al. 2002) is corpus BLEU-4 with sacreBLEU's defaults (``13a`` tokenisation,
exponential smoothing, mixed case); chrF (Popović 2015) is chrF2 on character 6-grams. Both are
computed on detokenised text, as the signatures record.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from ..errors import InputError


def translate(model: torch.nn.Module, tokenizer: Any, sentences: Sequence[str], src_lang: str, tgt_lang: str, *,
              num_beams: int = 4, batch_size: int = 32, max_length: Optional[int] = None,
              max_new_tokens: Optional[int] = None, length_penalty: float = 1.0, no_repeat_ngram_size: int = 0,
              truncate: bool = False) -> list[str]:
    """``sentences`` (in ``src_lang``) translated into ``tgt_lang`` by ``model.generate``.

    ``max_length``: the longest encoder input, framing included, as the ``translation``
    objective's option (default 128, capped at the model's positions); a longer source is an
    error naming it unless ``truncate`` cuts it. ``max_new_tokens`` defaults to what the
    decoder holds after its start token. Beam search with ``num_beams > 1`` (``length_penalty``,
    ``no_repeat_ngram_size`` as :meth:`~babelzoo.zoo.generation.Generates.generate`), greedy
    decoding with 1."""
    from ..objectives.batching import pad
    from ..objectives.seq2seq_base import is_seq2seq, tag_id
    from ..objectives.translation import Translation

    if not is_seq2seq(model):
        raise InputError(f"translate: {type(model).__name__} is not an encoder–decoder (no decoder_input_ids)")
    if batch_size < 1:
        raise InputError(f"translate: batch_size={batch_size} must be at least 1")
    layout = Translation(tokenizer.specials, model.config, max_length=max_length)
    specials = tokenizer.specials
    start = tag_id(specials, tgt_lang, "translate: target language")
    pieces = tokenizer.batch_encode(list(sentences), langs=[src_lang] * len(sentences), padding=False,
                                    truncation=False, add_special_tokens=False, return_tensors=None)["input_ids"]
    sources = []
    for i, ids in enumerate(pieces):
        framed, cut = layout.source(ids, src_lang, "translate: source language")
        if cut and not truncate:
            raise InputError(f"translate: sentence {i} has {len(ids)} pieces; with </s> and its tag that is more "
                             f"than max_length={layout.max_length} encoder positions (pass truncate=True to cut it)")
        sources.append(framed)
    if max_new_tokens is None:
        max_new_tokens = layout.max_length - 1
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[str] = [""] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    try:
        for first in range(0, len(order), batch_size):
            rows = order[first:first + batch_size]
            ids = pad([sources[i] for i in rows], specials.pad)
            generated = model.generate(ids.to(device), attention_mask=ids.ne(specials.pad).long().to(device),
                                       max_new_tokens=max_new_tokens, num_beams=num_beams,
                                       length_penalty=length_penalty, no_repeat_ngram_size=no_repeat_ngram_size,
                                       decoder_start_token_id=start, eos_token_id=specials.sep,
                                       pad_token_id=specials.pad, early_stopping=num_beams > 1)
            for r, i in enumerate(rows):
                out[i] = tokenizer.decode(_until_end(generated[r, 1:].tolist(), specials.sep))
    finally:
        model.train(was_training)
    return out


def _until_end(ids: list[int], end: int) -> list[int]:
    return ids[:ids.index(end)] if end in ids else ids


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str], tgt_lang: str) -> dict[str, Any]:
    """Corpus BLEU and chrF of ``hypotheses`` against one reference each, with sacreBLEU's
    signatures (so that the numbers can be compared with published ones)."""
    try:
        from sacrebleu.metrics import BLEU, CHRF
    except ImportError:
        raise InputError("scoring translations needs sacrebleu: pip install 'babelzoo[translation]'") from None
    if len(hypotheses) != len(references):
        raise InputError(f"corpus_scores: {len(hypotheses)} hypotheses for {len(references)} references")
    if not references:
        raise InputError("corpus_scores: no sentences to score")
    bleu, chrf = BLEU(trg_lang=tgt_lang), CHRF()
    refs = [list(references)]
    b, c = bleu.corpus_score(list(hypotheses), refs), chrf.corpus_score(list(hypotheses), refs)
    return {"bleu": b.score, "chrf": c.score, "bleu_precisions": list(b.precisions), "brevity_penalty": b.bp,
            "hypothesis_length": b.sys_len, "reference_length": b.ref_len,
            "signature": {"bleu": str(bleu.get_signature()), "chrf": str(chrf.get_signature())}}
