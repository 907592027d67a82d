"""Backends whose text → pieces step runs in Hugging Face's Rust ``tokenizers`` library.

A :class:`FastTokenizer` holds a ``tokenizers.Tokenizer`` for the content (normaliser,
pre-tokeniser, model, decoder, and the special tokens as added tokens, so that one written in
the text is matched whole there; no post-processor): framing, truncation and padding stay in
:class:`~babelzoo.datasets.tokenizer.Tokenizer`, and whole batches go to the library's
``encode_batch``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from .._files import read_json_object
from .tokenizer import Tokenizer, TokenizerError
from .tokenizer_files import write_atomic

if TYPE_CHECKING:
    import tokenizers


class FastTokenizer(Tokenizer):
    """Base class: a subclass sets ``self.backend`` (a ``tokenizers.Tokenizer``) and ``self.vocab``
    (the piece of every id, in id order)."""

    backend: "tokenizers.Tokenizer"
    vocab: list[str]

    def _set_backend(self, backend: "tokenizers.Tokenizer") -> None:
        """Use ``backend``, with :meth:`special_tokens` matched whole in text (verbatim, longest
        first, before normalisation: what :meth:`Tokenizer._segments` does in Python)."""
        from tokenizers import AddedToken

        specials = self.special_tokens()
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                    for t in sorted(specials, key=specials.__getitem__)])
        self.backend = backend

    def _content_ids(self, texts) -> list[list[int]]:
        return self._piece_ids(list(texts))

    def _pieces(self, text: str) -> list[str]:
        return [self.vocab[i] for i in self._piece_ids([text])[0]]

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        # the _fast variant leaves out character offsets, which nothing here reads
        return [e.ids for e in self.backend.encode_batch_fast(texts, add_special_tokens=False)]

    def _detokenize(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=False)

    def id_to_token(self, index: int) -> str:
        return self.vocab[index]


def write_vocabulary(directory: Path, name: str, data: dict) -> None:
    """A backend's vocabulary as one JSON file (written atomically)."""
    write_atomic(directory / name, json.dumps(data, ensure_ascii=False))


def read_vocabulary(directory: Path, name: str, what: str, meta_path: Path) -> tuple[Path, dict]:
    """The path and content of the JSON vocabulary ``name`` that ``meta_path`` refers to."""
    path = directory / name
    if not path.is_file():
        raise TokenizerError(f"{path}: missing (the {what} vocabulary named by {meta_path})")
    return path, read_json_object(path, TokenizerError)
