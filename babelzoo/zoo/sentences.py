"""Sentence vectors in one call, and the tokenizer a model reads text with.

Every text model class mixes in :class:`ReadsText`::

    model = babelzoo.create_model("multilingual_e5_small", pretrained=True)
    vectors = model.encode(["Hello", "Bonjour"], prompt="query: ", normalize_embeddings=True)   # [2, 384] float32

:func:`encode_sentences` is the one path from sentences to vectors: tokenized (``prefix`` +
sentence, truncated to ``max_length``), sorted by token count and cut into batches that are
padded only to their own longest row (:func:`sorted_batches`), run with the padding packed away
(``unpad``), one layer pooled by the model's :meth:`sentence_vectors`, put back in input order
and L2-normalised unless ``normalize=False``. ``model.encode`` speaks sentence-transformers'
names (``prompt``, ``normalize_embeddings``, default False as there). ``model.encode`` and
:class:`~babelzoo.evaluation.encoders.BabelEncoder` both run it, so they give the same vectors,
whatever the batch size.
"""

from __future__ import annotations

import sys
from typing import Any, Iterator, Optional, Sequence

import numpy as np
import torch

from .._threads import cpu_threads, encoder_threads
from ..errors import InputError, InputTypeError

DEFAULT_MAX_LENGTH = 512  # tokens per sentence when none is asked for (and the model holds that many)


class ReadsText:
    """What every text model has: ``tokenizer`` (the attached one: a checkpoint's, one assigned,
    or the default one its config implies once :meth:`use_default_tokenizer` has built it; else
    None) and ``encode(sentences)``. A class mixing it in gives :meth:`sentence_vectors`."""

    default_tokenizer = None  # a DefaultTokenizer, set by create_model on a model with fresh weights

    @property
    def tokenizer(self):
        """The tokenizer this model reads text with; assign one to attach it (None detaches it)."""
        return self.attached_tokenizer

    def use_default_tokenizer(self):
        """Attach and return the tokenizer this model's config implies
        (:mod:`babelzoo.zoo._default_tokenizer`): a sentencepiece model trained on the embedded
        Gramps catalogs the first time it is asked for on a machine (about ten seconds), then read
        from the babelzoo cache (``$BABELZOO_CACHE/tokenizers``). An :class:`InputError` where
        none fits the config (a model with loaded weights has its checkpoint's tokenizer)."""
        if self.default_tokenizer is None:
            raise InputError(f"model {self.config.architecture!r} has no default tokenizer (its weights were "
                             "loaded, or no default fits its vocabulary size or ids): attach one with "
                             "model.tokenizer = babelzoo.load_tokenizer(DIR)")
        self.tokenizer = self.default_tokenizer.build()
        return self.tokenizer

    @tokenizer.setter
    def tokenizer(self, value) -> None:
        self.__dict__["_attached_tokenizer"] = value

    @tokenizer.deleter
    def tokenizer(self) -> None:
        self.__dict__.pop("_attached_tokenizer", None)

    @property
    def attached_tokenizer(self):
        """The tokenizer attached to this model (a checkpoint's, or one assigned), or None."""
        return self.__dict__.get("_attached_tokenizer")

    def sentence_pooling(self, requested: Optional[str] = None, default: str = "cls") -> str:
        """The pooling of this model's sentence vectors: ``requested``, else ``default``."""
        return requested or default

    def sentence_vectors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, layer: int = -1,
                         pooling: Optional[str] = None, language_ids: Optional[torch.Tensor] = None,
                         unpad: bool = True) -> torch.Tensor:
        """[B, D] vectors of a padded batch: layer ``layer`` pooled (default: the mean)."""
        raise NotImplementedError

    def encode(self, sentences: str | Sequence[str], *, prompt: Optional[str] = None, batch_size: int = 32,
               show_progress_bar: Optional[bool] = None, convert_to_numpy: bool = True,
               convert_to_tensor: bool = False, normalize_embeddings: bool = False, pooling: Optional[str] = None,
               layer: int = -1, max_length: Optional[int] = None, lang: Optional[str] = None):
        """Sentence vectors with sentence-transformers' ``encode`` names and defaults: a float32
        array [N, D] in input order ([D] for a single string); ``prompt`` goes before every
        sentence (e5's ``"query: "``); ``normalize_embeddings=True`` L2-normalises (default: as
        pooled, as in sentence-transformers); ``convert_to_tensor=True`` gives a tensor,
        ``convert_to_numpy=False`` a list of tensors; ``show_progress_bar`` shows a bar on stderr.
        babelzoo's extras: ``pooling`` (None: the mean, or the pooling the architecture fixes),
        ``layer`` (-1: the last; 0: the embeddings), ``max_length`` (tokens a sentence is cut to;
        default 512, at most the model's positions) and ``lang`` (an XLM model's language
        embedding)::

            vectors = model.encode(["Hello", "Bonjour"], prompt="query: ", normalize_embeddings=True)
        """
        vectors = encode_sentences(self, require_tokenizer(self), sentences, batch_size=batch_size, prefix=prompt or "",
                                   pooling=pooling, normalize=normalize_embeddings, layer=layer, max_length=max_length,
                                   lang=lang, progress=bool(show_progress_bar))
        if convert_to_tensor:
            return torch.from_numpy(vectors)
        if not convert_to_numpy:
            return list(torch.from_numpy(vectors)) if vectors.ndim == 2 else torch.from_numpy(vectors)
        return vectors


def require_tokenizer(model):
    """``model.tokenizer``, or an :class:`~babelzoo.errors.InputError` that says how to attach one."""
    tokenizer = model.tokenizer
    if tokenizer is None:
        default = ("; or build the default one its config implies: model.use_default_tokenizer() (trained on the "
                   "embedded catalogs once a machine, about ten seconds, then cached)"
                   if getattr(model, "default_tokenizer", None) is not None else "")
        raise InputError(f"model {model.config.architecture!r} has no tokenizer to read sentences with; attach "
                         "one: model.tokenizer = babelzoo.load_tokenizer(DIR) (a folder with tokenizer files, e.g. "
                         "the recipe's run folder/tokenizer), or encode token ids with BabelEncoder.encode_ids"
                         + default)
    return tokenizer


def is_sentences(value: Any) -> bool:
    """True for a string or a list or tuple of strings (an empty one too)."""
    return isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value))


def attached_tokenizer(model):
    """The tokenizer attached to ``model`` (never a default one, which no file holds)."""
    if isinstance(model, ReadsText):
        return model.attached_tokenizer
    return getattr(model, "tokenizer", None)


def share_tokenizer(source, target) -> None:
    """Give ``target`` the tokenizer of ``source``: the attached one, or its default (unbuilt)."""
    if attached_tokenizer(source) is not None:
        target.tokenizer = attached_tokenizer(source)
    elif isinstance(source, ReadsText) and isinstance(target, ReadsText):
        target.default_tokenizer = source.default_tokenizer


def language_index(model, tokenizer, lang: Optional[str]) -> Optional[int]:
    """The language-embedding index of ``lang`` for an XLM model, or None (no language
    embeddings, no ``lang``, or one the tokenizer or the model does not know)."""
    languages = model.config.text.num_languages
    if not (languages and lang):
        return None
    index = tokenizer.specials.languages.get(lang)
    return None if index is None or index >= languages else index


def max_tokens(model, max_length: Optional[int]) -> int:
    """``max_length`` (default :data:`DEFAULT_MAX_LENGTH`), at most the model's positions: a
    long sentence is truncated, not an error."""
    return min(max_length or DEFAULT_MAX_LENGTH, model.config.text.max_positions)


def encode_sentences(model, tokenizer, sentences: str | Sequence[str], *, batch_size: int = 32, prefix: str = "",
                     pooling: Optional[str] = None, normalize: bool = True, layer: int = -1,
                     max_length: Optional[int] = None, lang: Optional[str] = None, language: Optional[int] = None,
                     unpad: bool = True, progress: bool = False) -> np.ndarray:
    """Vectors of ``sentences`` (see :meth:`ReadsText.encode`); ``language`` gives the
    language-embedding index itself (default: ``lang``'s)."""
    if not is_sentences(sentences):
        raise InputTypeError(f"sentences must be a str or a list of str, not {type(sentences).__name__}"
                             + (" holding other values" if isinstance(sentences, (list, tuple)) else ""))
    single = isinstance(sentences, str)
    texts = [prefix + s for s in ([sentences] if single else sentences)]
    rows = tokenizer.batch_encode(texts, max_length=max_tokens(model, max_length), padding=False, truncation=True,
                                  return_tensors=None)["input_ids"] if texts else []
    if language is None:
        language = language_index(model, tokenizer, lang)
    vectors = embed_rows(model, rows, tokenizer.specials.pad, batch_size=batch_size, layer=layer, pooling=pooling,
                         language=language, unpad=unpad, normalize=normalize, progress=progress)
    return vectors[0] if single else vectors


def sorted_batches(rows: Sequence[Sequence[int]], pad: int, batch_size: int
                   ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
    """(row indices, ids [B, W], mask [B, W]) of each batch of ``rows``, the rows sorted by
    length first: each batch is padded with ``pad`` only to its own longest row, so on sentences
    of mixed length most of the padding (and its work) that batching in input order pays for is
    gone, and a batch of equal lengths needs no mask at all."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        width = max(len(rows[i]) for i in index)
        ids = np.full((len(index), width), pad, dtype=np.int64)
        mask = np.zeros((len(index), width), dtype=np.int64)
        for r, i in enumerate(index):
            ids[r, :len(rows[i])] = rows[i]
            mask[r, :len(rows[i])] = 1
        yield index, ids, mask


@torch.no_grad()
def embed_rows(model, rows: Sequence[Sequence[int]], pad: int, *, batch_size: int = 32, layer: int = -1,
               pooling: Optional[str] = None, language: Optional[int] = None, unpad: bool = True,
               normalize: bool = True, progress: bool = False) -> np.ndarray:
    """[N, D] float32 vectors of token-id rows (special tokens included, already truncated), in
    input order, batched by :func:`sorted_batches` and pooled by ``model.sentence_vectors``.
    Pooling reads real tokens only, so a vector does not depend on its batch; the model is run
    in eval mode and left in the mode it was in. On the CPU it uses the threads
    :func:`babelzoo._threads.encoder_threads` finds fastest for the model's width."""
    was_training = model.training
    model.eval()
    width = model.config.text.hidden_size
    out = np.zeros((len(rows), width), dtype=np.float32)
    device = next(model.parameters()).device
    bar = progress_bar(len(rows), progress)
    threads = encoder_threads(width) if device.type == "cpu" and rows else torch.get_num_threads()
    try:
        with cpu_threads(threads):
            for index, ids, mask in sorted_batches(rows, pad, batch_size):
                ids, mask = torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)
                languages = (None if language is None else
                             torch.full(ids.shape, language, dtype=torch.long, device=device))
                pooled = model.sentence_vectors(ids, mask, layer=layer, pooling=pooling, language_ids=languages,
                                                unpad=unpad)
                out[index] = pooled.float().cpu().numpy()
                if bar is not None:
                    bar.update(len(index))
    finally:
        model.train(was_training)
        if bar is not None:
            bar.close()
    return l2_normalised(out) if normalize else out


def l2_normalised(vectors: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (a zero row stays zero)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def hidden_layer(out, layer: int, model) -> torch.Tensor:
    """``out.last_hidden`` for layer -1, else ``out.hidden_states[layer]`` (0: the embeddings);
    a layer the model does not have is an error that says which it has."""
    if layer == -1:
        return out.last_hidden
    states = out.hidden_states or ()
    if not -len(states) <= layer < len(states):
        raise InputError(f"layer={layer}: model {model.config.architecture!r} has layers 0 (the embeddings) to "
                         f"{len(states) - 1}; -1 is the last")
    return states[layer]


def progress_bar(total: int, enabled: bool):
    """A tqdm bar on stderr counting sentences (with sentences/s), or None when not ``enabled``
    or tqdm is not installed."""
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    interactive = sys.stderr.isatty()  # a log file gets a line every 30 s, not ten a second
    return tqdm(total=total, desc="encode", unit=" sentences", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.1 if interactive else 30.0)


class EncoderDecoderReadsText(ReadsText):
    """:class:`ReadsText` for an encoder–decoder, whose ``encode(input_ids, attention_mask)`` is
    its encoder pass: a string or a list of strings goes the sentence path instead
    (:func:`encode_or_states`), and a sentence vector is its encoder's last layer pooled."""

    encoder_directions = 1  # how many directions the encoder's output concatenates ("final" pooling)

    def sentence_vectors(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, layer: int = -1,
                         pooling: Optional[str] = None, language_ids: Optional[torch.Tensor] = None,
                         unpad: bool = True) -> torch.Tensor:
        """[B, H]: the encoder's output (its last layer; ``layer`` must say so) pooled by
        ``pooling`` (default: the mean); ``unpad`` changes nothing."""
        from .layers import pool

        name = self.config.architecture
        if layer not in (-1, self.config.text.num_layers):
            raise InputError(f"layer={layer}: encoder–decoder {name!r} gives its encoder's last layer only "
                             "(layer=-1)")
        if language_ids is not None:
            raise InputError(f"model {name!r} has no language embeddings; give no language ids")
        hidden = self.encode(input_ids, attention_mask)
        return pool(hidden, attention_mask, self.sentence_pooling(pooling, "mean"), self.encoder_directions)


def encode_or_states(model: EncoderDecoderReadsText, value, attention_mask, options: dict[str, Any]):
    """The sentence path of an encoder–decoder's ``encode`` for sentences (``options`` as
    :meth:`ReadsText.encode` takes them), or None for ``input_ids``, which take no options."""
    if is_sentences(value):
        if attention_mask is not None:
            raise InputError("attention_mask goes with input_ids; sentences are tokenized and masked by the model")
        return ReadsText.encode(model, value, **options)
    if options:
        raise InputError(f"{', '.join(sorted(options))}: options of encoding sentences (a str or a list of str); "
                         "input_ids take attention_mask only")
    return None
