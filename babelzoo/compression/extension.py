"""Vocabulary extension: pieces of its own for a language the vocabulary cuts into fragments
(:mod:`~babelzoo.compression.fragmentation` measures how finely).

    pieces = learn_pieces(model.tokenizer, breton_texts, 500)
    bigger = add_pieces(model, pieces)                       # model and tokenizer, grown
    bigger = extend_vocabulary(model, {"bre": breton, "gla": gaelic}, 500)   # both steps
    bigger.save_pretrained("runs/e5-small-bre-gla")          # a normal checkpoint

1. Candidates. A small sentencepiece unigram model (Kudo 2018) is trained on the language's
   text, normalised and split into words as the tokenizer does it. Each of its pieces that the
   vocabulary lacks is a candidate, worth the pieces it saves on that text: its uses in the
   small model's segmentation × (pieces of the vocabulary's own segmentation of it − 1), an old
   ``<unk>`` counting one more. The ``num_pieces`` worth most are kept.
2. Scores. A unigram tokenizer segments a word by Viterbi, maximising the summed score of its
   pieces. A new piece scores the best old path over its own characters plus ``margin``, held
   within [lowest old score, 0]: a segmentation with a boundary at both ends of the piece's span
   does better with the piece in place of that span (by ``margin``, or by more where the floor
   lifts the score). The floor keeps the unknown penalty (lowest score − 10) where it was, so a
   word holding no new piece segments exactly as before
   (:meth:`~babelzoo.datasets.unigram.UnigramTokenizer.with_pieces`).
3. Rows. Every vocabulary-indexed weight (word embeddings, an MLM decoder tied or not, its bias)
   gets one row per new piece: the mean of the rows of the old pieces the piece was segmented
   into (a piece repeated there counts each time). Old rows are unchanged.

Only unigram vocabularies (multilingual-e5's, XLM-R's as babelzoo runs it) take new pieces.
"""

from __future__ import annotations

import io
import logging
import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import torch

from ..datasets.tokenizer import Tokenizer, TokenizerError
from ..errors import InputError
from ..zoo.factory import build_model
from ..zoo.checkpoint_io import load_state_strict
from .vocabulary import VOCABULARY_KEYS, Texts, text_list, texts_by_language

logger = logging.getLogger(__name__)

METASPACE = "\u2581"
MARGIN = 1.0  # how much a new piece beats the old path over its span (a log-probability)


@dataclass(frozen=True)
class NewPiece:
    """A piece to add, and why: ``old_ids`` is the vocabulary's segmentation of it before (its
    row is their rows' mean), ``uses`` its count in the learned model's segmentation of the text,
    ``saved`` the pieces it saves there."""

    piece: str
    score: float
    old_ids: tuple[int, ...]
    uses: int
    saved: int


def _train_unigram(sentences: list[str], vocab_size: int, seed: int):
    """A sentencepiece unigram model of ``sentences`` (already normalised: words joined by one
    space), every character kept."""
    import sentencepiece as spm

    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, model_type="unigram",
                                       vocab_size=vocab_size, hard_vocab_limit=False, character_coverage=1.0,
                                       normalization_rule_name="identity", byte_fallback=False, bos_id=-1,
                                       eos_id=-1, num_threads=1, minloglevel=2)
    except RuntimeError as err:
        raise TokenizerError(f"learn_pieces: sentencepiece training failed: {err}") from None
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def _check_options(num_pieces: int, margin: float, candidates: int, min_uses: int) -> None:
    for name, value in (("num_pieces", num_pieces), ("candidates", candidates), ("min_uses", min_uses)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"learn_pieces: {name}={value!r} must be an integer of at least 1")
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
        raise InputError(f"learn_pieces: margin={margin!r} must be a finite number above 0")


def learn_pieces(tokenizer: Tokenizer, texts: Iterable[str], num_pieces: int = 500, *, margin: float = MARGIN,
                 candidates: int = 8000, min_uses: int = 2, seed: int = 0) -> list[NewPiece]:
    """Up to ``num_pieces`` pieces ``tokenizer`` lacks, learned from ``texts`` (one language's;
    an iterable of strings), worth most first (the module docstring says how). ``candidates``:
    the learned model's vocabulary size; ``min_uses``: a piece used fewer times is no candidate."""
    _check_options(num_pieces, margin, candidates, min_uses)
    tokenizer.best_path(METASPACE)  # a tokenizer that scores no segmentation is refused here
    texts = text_list(texts, "learn_pieces")
    sentences = [" ".join(w for w in tokenizer.normalize(t).split(METASPACE) if w) for t in texts]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise InputError("learn_pieces: no text given")
    model = _train_unigram(sentences, candidates, seed)
    uses = Counter(p for row in model.encode(sentences, out_type=str) for p in row)
    unk = tokenizer.specials.unk
    found = []
    for piece, count in uses.items():
        if count < min_uses or tokenizer.token_to_id(piece) != unk or piece in tokenizer.special_tokens():
            continue
        ids, score = tokenizer.best_path(piece)
        saved = count * (len(ids) - 1 + ids.count(unk))
        if saved > 0:
            score = min(max(score + margin, tokenizer.lowest_score), 0.0)
            found.append(NewPiece(piece, score, tuple(ids), count, saved))
    found.sort(key=lambda p: (-p.saved, p.piece))
    logger.info("learn_pieces: %d candidates from %d texts, keeping %d", len(found), len(texts),
             min(num_pieces, len(found)))
    return found[:num_pieces]


def extend_vocabulary(model, texts: Texts, num_pieces: int = 500, *, tokenizer: Optional[Tokenizer] = None,
                      margin: float = MARGIN, candidates: int = 8000, min_uses: int = 2, seed: int = 0):
    """A copy of ``model`` whose tokenizer (``.tokenizer``) and vocabulary-indexed weights hold
    up to ``num_pieces`` new pieces per language of ``texts`` (``{language: texts}``, or an
    iterable of one language's texts), learned by :func:`learn_pieces` and added by
    :func:`add_pieces`; a piece learned for two languages is added once."""
    tokenizer = _model_tokenizer(model, tokenizer, "extend_vocabulary")
    pieces: dict[str, NewPiece] = {}
    for items in texts_by_language(texts, "extend_vocabulary").values():
        for piece in learn_pieces(tokenizer, items, num_pieces, margin=margin, candidates=candidates,
                                  min_uses=min_uses, seed=seed):
            pieces.setdefault(piece.piece, piece)
    return add_pieces(model, list(pieces.values()), tokenizer)


def _model_tokenizer(model, tokenizer: Optional[Tokenizer], caller: str) -> Tokenizer:
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise InputError(f"{caller}: the model carries no tokenizer; pass tokenizer=")
    if tokenizer.vocab_size > model.config.text.vocab_size:
        raise InputError(f"{caller}: the tokenizer has {tokenizer.vocab_size} pieces, the model only "
                         f"{model.config.text.vocab_size} rows: they do not belong together")
    return tokenizer


def add_pieces(model, pieces: Sequence[NewPiece], tokenizer: Optional[Tokenizer] = None):
    """A copy of ``model`` with ``pieces`` appended to its tokenizer (``tokenizer`` defaults to
    ``model.tokenizer``; new ids from its ``vocab_size`` on) and to every vocabulary-indexed
    weight, each new row the mean of its ``old_ids``' rows. A model with more rows than its
    tokenizer has pieces (XLM-R pads 250,002 to 250,037) gives the rows no id reaches to the
    first new pieces, and grows only when they are used up."""
    tokenizer = _model_tokenizer(model, tokenizer, "add_pieces")
    if not pieces:
        raise InputError("add_pieces: no pieces given")
    first = tokenizer.vocab_size
    for p in pieces:
        if not p.old_ids or not all(0 <= i < first for i in p.old_ids):
            raise InputError(f"add_pieces: {p.piece!r} has old_ids {list(p.old_ids)}; its row is the mean of rows "
                             f"of the tokenizer's {first} pieces, so they must lie in [0, {first})")
    grown = tokenizer.with_pieces([p.piece for p in pieces], [p.score for p in pieces])
    rows = max(model.config.text.vocab_size, grown.vocab_size)
    state = model.state_dict()
    for key in VOCABULARY_KEYS:
        if key in state:
            state[key] = _with_rows(state[key], first, rows, [p.old_ids for p in pieces])
    with torch.random.fork_rng(devices=[]):
        bigger = build_model(model.config.override(vocab_size=rows))  # every weight is overwritten below
    load_state_strict(bigger, state, "the extended model")
    bigger.tokenizer = grown
    return bigger.train(model.training)


def _with_rows(weight: torch.Tensor, first: int, rows: int, sources: Sequence[tuple[int, ...]]) -> torch.Tensor:
    """``weight`` with ``rows`` rows: its own, then row ``first + i`` set to the mean of the rows
    ``sources[i]`` (averaged in float32 at least)."""
    out = weight.new_zeros((rows, *weight.shape[1:]))
    out[:weight.shape[0]] = weight
    dtype = torch.promote_types(weight.dtype, torch.float32)
    for i, ids in enumerate(sources):
        out[first + i] = weight[list(ids)].to(dtype).mean(0).to(weight.dtype)
    return out
