"""Tokenizers across the Hugging Face boundary: an imported model gets the tokenizer its
directory holds (BERT ``vocab.txt`` as WordPiece, XLM-R ``sentencepiece.bpe.model`` and ALBERT
``spiece.model`` as sentencepiece), checked against the model; export writes the files
``transformers`` reads back (the backend's vocabulary and ``tokenizer.json``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

from ..config import EncoderConfig
from ..pretrained import CheckpointError
from .family import Family


def load_hf_tokenizer(directory: Path, family: Family, text: EncoderConfig):
    """The tokenizer of an HF model directory, or None when it holds none."""
    from ...datasets.tokenizer import TokenizerError, load_tokenizer

    if family.tokenizer is None:
        if (directory / "tokenizer.json").is_file():
            warnings.warn(f"{directory}: babelzoo reads no {family.model_type} tokenizer files, so the model is "
                          f"imported without its tokenizer", stacklevel=3)
        return None
    kind, vocab_file = family.tokenizer
    if not (directory / vocab_file).is_file():
        if (directory / "tokenizer.json").is_file():
            warnings.warn(f"{directory}: tokenizer.json without {vocab_file}; babelzoo reads {vocab_file}, so "
                          f"the model is imported without a tokenizer", stacklevel=3)
        return None
    try:
        tokenizer = load_tokenizer(directory)
    except TokenizerError as err:
        raise CheckpointError(f"{directory}: cannot read the tokenizer ({err})") from None
    check_tokenizer(tokenizer, family, text, str(directory / vocab_file))
    return tokenizer


def check_tokenizer(tokenizer, family: Family, text: EncoderConfig, where: str) -> None:
    """A tokenizer must be of the family's kind, fit in the embedding table and pad with the
    id the model masks out."""
    kind = family.tokenizer[0] if family.tokenizer is not None else None
    if tokenizer.kind != kind:
        raise CheckpointError(f"{where}: a {tokenizer.kind} tokenizer cannot go with a {family.model_type} model "
                              f"(expected {kind or 'none'})")
    if tokenizer.vocab_size > text.vocab_size:
        raise CheckpointError(f"{where}: tokenizer has {tokenizer.vocab_size} pieces but the model's embedding "
                              f"table has {text.vocab_size} rows")
    if tokenizer.specials.pad != text.pad_token_id:
        raise CheckpointError(f"{where}: tokenizer pads with id {tokenizer.specials.pad} but the model's "
                              f"pad_token_id is {text.pad_token_id}")


def save_hf_tokenizer(tokenizer, directory: Path, family: Family, text: EncoderConfig) -> Optional[Path]:
    """Write ``tokenizer`` in the layout ``transformers.AutoTokenizer`` loads for ``family``."""
    check_tokenizer(tokenizer, family, text, f"tokenizer for {directory}")
    return tokenizer.save_hf(directory)
