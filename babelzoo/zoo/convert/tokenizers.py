"""Tokenizers across the Hugging Face boundary: an imported model gets the tokenizer its
directory holds (BERT ``vocab.txt`` as WordPiece, XLM-R ``sentencepiece.bpe.model`` and ALBERT
``spiece.model`` as sentencepiece), checked against the model; export writes the files
``transformers`` reads back (the backend's vocabulary and ``tokenizer.json``). A ``tokenizer_class`` in ``config.json`` names another family's
tokenizer where a checkpoint pairs them (multilingual-e5-small: a BERT encoder over XLM-R's
sentencepiece vocabulary), and so does the ``tokenizer_config.json`` export writes beside it."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping, Optional

from ..._files import read_json
from ...datasets.tokenizer import TokenizerError, load_tokenizer
from ...errors import CheckpointError
from ..config import EncoderConfig
from .hf_family import HFFamily

# transformers' tokenizer classes babelzoo reads: (kind, vocabulary file).
TOKENIZER_CLASSES = {"BertTokenizer": ("wordpiece", "vocab.txt"),
                     "XLMRobertaTokenizer": ("sentencepiece", "sentencepiece.bpe.model"),
                     "AlbertTokenizer": ("sentencepiece", "spiece.model")}


def tokenizer_files(directory: Path, family: HFFamily, hf: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """The (kind, vocabulary file) of a checkpoint's tokenizer: the one ``tokenizer_class``
    names in ``config.json`` or ``tokenizer_config.json`` (with or without ``Fast``), else the
    family's own."""
    named = hf.get("tokenizer_class") or _tokenizer_config(directory).get("tokenizer_class")
    return TOKENIZER_CLASSES.get(str(named or "").removesuffix("Fast"), family.tokenizer)


def _tokenizer_config(directory: Path) -> dict:
    path = directory / "tokenizer_config.json"
    if not path.is_file():
        return {}
    data = read_json(path, CheckpointError)
    return data if isinstance(data, dict) else {}


def load_hf_tokenizer(directory: Path, family: HFFamily, text: EncoderConfig, hf: Optional[Mapping[str, Any]] = None):
    """The tokenizer of an HF model directory, or None when it holds none. Its pad id is
    checked by :func:`check_tokenizer`; here only its kind and size."""
    files = tokenizer_files(directory, family, hf or {})
    if files is None:
        if (directory / "tokenizer.json").is_file():
            warnings.warn(f"{directory}: babelzoo reads no {family.model_type} tokenizer files, so the model is "
                          f"imported without its tokenizer", stacklevel=3)
        return None
    kind, vocab_file = files
    if not (directory / vocab_file).is_file():
        if (directory / "tokenizer.json").is_file():
            warnings.warn(f"{directory}: tokenizer.json without {vocab_file}; babelzoo reads {vocab_file}, so "
                          f"the model is imported without a tokenizer", stacklevel=3)
        return None
    tokenizer = read_tokenizer(directory)
    _check_kind(tokenizer, kind, family, text, str(directory / vocab_file))
    return tokenizer


def read_tokenizer(directory: Path):
    """The tokenizer saved in ``directory``; an unreadable one is a :class:`CheckpointError`."""
    try:
        return load_tokenizer(directory)
    except TokenizerError as err:
        raise CheckpointError(f"{directory}: cannot read the tokenizer ({err})") from None


def check_tokenizer(tokenizer, family: HFFamily, text: EncoderConfig, where: str) -> None:
    """A tokenizer to export must be of the family's kind or of a kind whose files name their
    class (:data:`TOKENIZER_CLASSES`), fit in the embedding table and pad with the id the model
    masks out."""
    own = family.tokenizer[0] if family.tokenizer is not None else None
    named = {kind for kind, _ in TOKENIZER_CLASSES.values()}
    _check_kind(tokenizer, tokenizer.kind if tokenizer.kind in named else own, family, text, where)
    check_pad(tokenizer, text, where)


def check_pad(tokenizer, text: EncoderConfig, where: str) -> None:
    """The tokenizer must pad with the id the model masks out."""
    if tokenizer.specials.pad != text.pad_token_id:
        raise CheckpointError(f"{where}: tokenizer pads with id {tokenizer.specials.pad} but the model's "
                              f"pad_token_id is {text.pad_token_id}")


def check_size(tokenizer, text: EncoderConfig, where: str) -> None:
    """The tokenizer's ids must fit in the model's embedding table."""
    if tokenizer.vocab_size > text.vocab_size:
        raise CheckpointError(f"{where}: tokenizer has {tokenizer.vocab_size} pieces but the model's embedding "
                              f"table has {text.vocab_size} rows")


def _check_kind(tokenizer, kind: Optional[str], family: HFFamily, text: EncoderConfig, where: str) -> None:
    if tokenizer.kind != kind:
        raise CheckpointError(f"{where}: a {tokenizer.kind} tokenizer cannot go with a {family.model_type} model "
                              f"(expected {kind or 'none'})")
    check_size(tokenizer, text, where)


def save_hf_tokenizer(tokenizer, directory: Path, family: HFFamily, text: EncoderConfig) -> Optional[Path]:
    """Write ``tokenizer`` in the layout ``transformers.AutoTokenizer`` loads for ``family``."""
    check_tokenizer(tokenizer, family, text, f"tokenizer for {directory}")
    return tokenizer.save_hf(directory)
