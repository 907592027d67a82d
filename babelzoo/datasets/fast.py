"""Backends whose text → pieces step runs in Hugging Face's Rust ``tokenizers`` library.

A :class:`FastTokenizer` holds a ``tokenizers.Tokenizer`` for the content only (normaliser,
pre-tokeniser, model, decoder; no added tokens, no post-processor): special tokens written in
the text, framing, truncation and padding stay in :class:`~babelzoo.datasets.tokenizer.Tokenizer`,
and whole batches go to the library's ``encode_batch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tokenizer import Tokenizer

if TYPE_CHECKING:
    import tokenizers


class FastTokenizer(Tokenizer):
    """Base class: a subclass sets ``self.backend`` (a ``tokenizers.Tokenizer``) and ``self.vocab``
    (the piece of every id, in id order)."""

    backend: "tokenizers.Tokenizer"
    vocab: list[str]

    def _pieces(self, text: str) -> list[str]:
        return [self.vocab[i] for i in self._piece_ids([text])[0]]

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def _detokenize(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=False)

    def id_to_token(self, index: int) -> str:
        return self.vocab[index]

    def hf_pipeline(self) -> "tokenizers.Tokenizer":
        import tokenizers

        return tokenizers.Tokenizer.from_str(self.backend.to_str())
