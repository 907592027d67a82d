"""The tokenizer a text model built with fresh weights can read text with, built when asked for.

:func:`~babelzoo.zoo.factory.create_model` gives a model it initialises randomly the
:class:`DefaultTokenizer` its config implies (:func:`default_tokenizer_for`): a sentencepiece
unigram model, as babelzoo's recipes train, on the training split of the Gramps translations
installed with the package (:mod:`babelzoo.offline.embedded`, found by its data source name) in
eight languages with XLM's α = 0.3 sampling, with at most the config's ``vocab_size`` pieces
(the corpus may hold fewer: the rest of the embedding table is never read) in the id layout whose
padding id is the config's:

* ``pad_token_id`` 0: babelzoo's layout (``<pad> <s> </s> <unk> <mask>``, then one tag per
  language, so an XLM model's language embeddings have their indices);
* ``pad_token_id`` 1: fairseq's (XLM-R, BART: ``<s> <pad> </s> <unk>``, ``<mask>`` last).

Nothing is trained or written until the caller asks: ``model.use_default_tokenizer()`` builds it
(about ten seconds: reading the catalogs, then training), attaches it, and keeps it under the
babelzoo cache (``$BABELZOO_CACHE/tokenizers``), keyed by its spec and the corpus package's
version, so it is trained once per machine; the same inputs give the same pieces. Until then
``model.tokenizer`` is None, and reading text says how to get one. None is defined for a vocabulary under :data:`MIN_VOCAB` (the scripts of the eight
languages do not fit), a padding id neither layout has, an encoder–decoder whose end (or start)
id differs from the layout's (T5) or whose language tags close the vocabulary (mBART). A model
read from a checkpoint keeps the checkpoint's tokenizer, or none: its weights were trained with a
tokenizer of their own.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .._files import replace_owned_folder
from ..datasets.download import cache_dir
from ..typed import Where
from .config import EncoderConfig, EncoderDecoderConfig

logger = logging.getLogger(__name__)

LANGUAGES = ("en", "de", "fr", "es", "ru", "zh-CN", "ja", "ar")
MIN_VOCAB = 2000  # sentencepiece needs ~1,500 pieces for the characters of the eight languages alone
# pad id -> (layout, the ids of <s> and </s> in it)
LAYOUTS = {0: ("babelzoo", 1, 2), 1: ("fairseq", 0, 2)}
FORMAT = 1  # bump when the way a default tokenizer is made changes, so that caches are rebuilt


@dataclass(frozen=True)
class DefaultTokenizer:
    """What a default tokenizer is made of; equal specs give the same tokenizer. ``vocab_size``
    is the most ids it may use (the model's embedding rows); ``languages`` are those of its
    training text, which get tags in babelzoo's layout."""

    layout: str
    vocab_size: int
    languages: tuple[str, ...] = LANGUAGES
    packages: tuple[str, ...] = ("gramps",)
    model_type: str = "unigram"
    alpha: float = 0.3
    seed: int = 0

    def build(self):
        """The tokenizer: from this process's memory, the disk cache, or trained now."""
        return _tokenizer(self)

    def key(self) -> str:
        """A short hash of the spec, the corpus packages' versions and :data:`FORMAT`."""
        from importlib.metadata import PackageNotFoundError, version

        def installed(package: str) -> str:
            try:
                return version(package)
            except PackageNotFoundError:
                return "missing"

        text = json.dumps([FORMAT, dataclasses.asdict(self), [installed(p) for p in self.packages]])
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def folder(self) -> Path:
        return cache_dir() / "tokenizers" / f"default-{self.layout}-{self.vocab_size}-{self.key()}"


def default_tokenizer_for(text: EncoderConfig) -> Optional[DefaultTokenizer]:
    """The default tokenizer of a text config, or None where none fits it (see the module)."""
    if text.pad_token_id not in LAYOUTS or text.vocab_size < MIN_VOCAB:
        return None
    layout, start, end = LAYOUTS[text.pad_token_id]
    if isinstance(text, EncoderDecoderConfig):
        if text.languages or text.eos_token_id != end or text.bos_token_id not in (None, start):
            return None
    return DefaultTokenizer(layout, text.vocab_size)


@functools.lru_cache(maxsize=8)
def _tokenizer(spec: DefaultTokenizer):
    # the tokenizer modules import torch: imported when a tokenizer is built, not when the zoo is listed
    from ..datasets.tokenizer import TokenizerError, load_tokenizer

    folder = spec.folder()
    try:
        tokenizer = load_tokenizer(folder) if folder.is_dir() else None
    except TokenizerError:
        tokenizer = None  # an unreadable cache entry is made again
    if tokenizer is None:
        tokenizer = train(spec)
        replace_owned_folder(folder, tokenizer.save, what="tokenizer")
    if tokenizer.vocab_size > spec.vocab_size:
        raise TokenizerError(f"{folder}: the default tokenizer has {tokenizer.vocab_size} ids, more than the "
                             f"{spec.vocab_size} it was made for; delete that folder to make it again")
    return tokenizer


def train(spec: DefaultTokenizer):
    """Train the tokenizer ``spec`` describes (what :meth:`DefaultTokenizer.build` caches)."""
    from ..datasets.spm import SentencePieceTokenizer
    from ..datasets.spm_train import train_model

    logger.info("training the default %s tokenizer (%d pieces at most; once, cached in %s)", spec.layout,
                spec.vocab_size, spec.folder())
    texts = corpus(spec)
    options = dict(model_type=spec.model_type, alpha=spec.alpha, seed=spec.seed, hard_vocab_limit=False)
    if spec.layout == "babelzoo":
        proto, languages, training = train_model(texts, spec.vocab_size, languages=spec.languages, **options)
    else:  # XLM-R's sentencepiece ids (<unk> 0, <s> 1, </s> 2, no <pad>), then fairseq's <pad> and <mask>
        proto, languages, training = train_model(texts, spec.vocab_size - 2, pad_id=-1, unk_id=0, bos_id=1,
                                                 eos_id=2, user_defined_symbols=[], **options)
        languages = ()  # fairseq's layout has no language tags
    return SentencePieceTokenizer(proto, layout=spec.layout, languages=tuple(languages), training=training,
                                  where="default tokenizer")


def corpus(spec: DefaultTokenizer) -> dict[str, list[str]]:
    """The training split of the embedded catalogs in ``spec.languages``, by language."""
    from ..datasets.sources import BuildContext, parse_source

    source = parse_source({"kind": "catalog_text", "langs": list(spec.languages), "packages": list(spec.packages)},
                          Where(label="default tokenizer"))
    source.load()
    return source.texts(BuildContext(tokenizer=None, fingerprint="", cache_dir=spec.folder().parent))
