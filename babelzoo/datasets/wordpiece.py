"""BERT's WordPiece tokenizer (Devlin et al., 2019; Wu et al., 2016, "Google's Neural Machine
Translation System"), reading a Hugging Face ``vocab.txt``.

Two steps, each exactly as Hugging Face ``tokenizers`` (``BertNormalizer`` +
``BertPreTokenizer`` + ``WordPiece``) does it, so ids equal ``transformers.BertTokenizer``'s:

1. Basic tokenisation: special tokens written in the text are kept whole; then control
   characters, U+0000 and U+FFFD are removed and whitespace becomes a space; CJK ideographs get
   spaces around them; accents are stripped (NFD, drop non-spacing marks) and text lower-cased
   one character at a time (so a final capital sigma becomes ``σ``, not ``ς``); the text is split
   at whitespace and every punctuation character becomes its own word.
2. WordPiece: greedy longest-match-first over each word, continuation pieces prefixed ``##``;
   a word longer than 100 characters, or one that cannot be covered, becomes ``[UNK]``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional, Union

from ._unicode import category as _category
from ._unicode import lowercase_chars, strip_accents_nfd
from .specials import SpecialIds
from .tokenizer import Tokenizer, TokenizerError

VOCAB_FILE = "vocab.txt"
HF_CONFIG = "tokenizer_config.json"
PREFIX = "##"
# Rust's char::is_whitespace (what tokenizers uses), not Python's str.isspace
_WHITESPACE = frozenset("\t\n\r\x0b\x0c \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
                        "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
# BERT's CJK ranges as tokenizers spells them: its Extension E range starts at 0x2B920, not 0x2B820
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_CACHE_LIMIT = 1 << 16
_CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
            (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def _is_control(ch: str) -> bool:
    # Cc, Cf, Co, Cs; unassigned code points (Cn) are kept, as tokenizers keeps them
    return ch not in "\t\n\r" and _category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT treats every non-alphanumeric ASCII character as punctuation ("$", "^", "`" are symbols in Unicode)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return _category(ch).startswith("P")


def basic_tokenize(text: str, lowercase: bool = True, strip_accents: Optional[bool] = None,
                   chinese_chars: bool = True, clean_text: bool = True) -> list[str]:
    """BERT's basic tokenisation of a text without special tokens (see the module docstring).
    ``strip_accents=None`` strips accents exactly when lower-casing, as BERT does."""
    if clean_text:
        text = "".join(" " if ch in _WHITESPACE else ch for ch in text
                       if ch != "\x00" and ch != "\ufffd" and not _is_control(ch))
    if chinese_chars:
        text = "".join(f" {ch} " if _is_cjk(ord(ch)) else ch for ch in text)
    if strip_accents if strip_accents is not None else lowercase:
        text = strip_accents_nfd(text)
    if lowercase:
        text = lowercase_chars(text)
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        if ch in _WHITESPACE:
            if current:
                words.append("".join(current))
                current = []
        elif _is_punctuation(ch):
            if current:
                words.append("".join(current))
                current = []
            words.append(ch)
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words


class WordPieceTokenizer(Tokenizer):
    """WordPiece over a BERT vocabulary; ids equal Hugging Face ``BertTokenizer``'s.

    >>> tok = WordPieceTokenizer.from_hf("all-MiniLM-L6-v2")      # vocab.txt + tokenizer_config.json
    >>> tok.tokenize("Unaffable ÉTÉ!")                             # ['una', '##ffa', '##ble', 'ete', '!']
    """

    kind = "wordpiece"

    def __init__(self, vocab: list[str], lowercase: bool = True, strip_accents: Optional[bool] = None,
                 chinese_chars: bool = True, unk_token: str = "[UNK]", pad_token: str = "[PAD]",
                 cls_token: str = "[CLS]", sep_token: str = "[SEP]", mask_token: str = "[MASK]",
                 max_chars_per_word: int = 100, languages: tuple[str, ...] = (), where: str = "vocabulary"):
        self.vocab = list(vocab)
        self.index: dict[str, int] = {}
        for i, piece in enumerate(self.vocab):
            self.index[piece] = i  # a repeated line keeps its last id, as in Hugging Face's load_vocab
        self.lowercase, self.strip_accents, self.chinese_chars = lowercase, strip_accents, chinese_chars
        self.max_chars_per_word = max_chars_per_word
        self.tokens = {"unk": unk_token, "pad": pad_token, "cls": cls_token, "sep": sep_token, "mask": mask_token}
        missing = [t for t in self.tokens.values() if t not in self.index]
        if missing:
            raise TokenizerError(f"{where}: special tokens {missing} are not in the vocabulary")
        ids = {k: self.index[t] for k, t in self.tokens.items()}
        self._specials = SpecialIds(pad=ids["pad"], cls=ids["cls"], sep=ids["sep"], unk=ids["unk"],
                                    mask=ids["mask"], vocab_size=len(self.vocab),
                                    languages={lang: i for i, lang in enumerate(languages)},
                                    special=frozenset(ids.values()))
        self._longest = max((len(p) for p in self.vocab), default=1)
        self._cache: dict[str, list[int]] = {}

    # ---- construction -----------------------------------------------------------------------

    @classmethod
    def from_vocab_file(cls, path: Union[str, Path], **options) -> "WordPieceTokenizer":
        """Read a ``vocab.txt`` (one piece per line; the line number is the id)."""
        path = Path(path)
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            line = path.read_bytes()[:err.start].count(b"\n") + 1
            raise TokenizerError(f"{path}:{line}: invalid UTF-8") from None
        # as Hugging Face's load_vocab: universal newlines, one piece per line, nothing else stripped
        vocab = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        if not vocab:
            raise TokenizerError(f"{path}: empty vocabulary")
        return cls(vocab, where=str(path), **options)

    @classmethod
    def from_hf(cls, directory: Union[str, Path], **overrides) -> "WordPieceTokenizer":
        """A Hugging Face BERT tokenizer directory: ``vocab.txt`` plus the options
        ``do_lower_case``, ``strip_accents``, ``tokenize_chinese_chars`` and the special tokens
        from ``tokenizer_config.json`` when present (BERT's defaults otherwise)."""
        directory = Path(directory)
        options: dict = {}
        config_path = directory / HF_CONFIG
        if config_path.is_file():
            try:
                config = json.loads(config_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise TokenizerError(f"{config_path}:{err.lineno}: invalid JSON ({err.msg})") from None
            mapping = {"do_lower_case": "lowercase", "strip_accents": "strip_accents",
                       "tokenize_chinese_chars": "chinese_chars"}
            options = {ours: config[theirs] for theirs, ours in mapping.items() if theirs in config}
            for key in ("unk", "pad", "cls", "sep", "mask"):
                value = config.get(f"{key}_token")
                if isinstance(value, dict):  # AddedToken serialisation
                    value = value.get("content")
                if isinstance(value, str):
                    options[f"{key}_token"] = value
        options.update(overrides)
        return cls.from_vocab_file(directory / VOCAB_FILE, **options)

    # ---- Tokenizer interface ----------------------------------------------------------------

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        return {t: self.index[t] for t in self.tokens.values()}

    def _words(self, text: str) -> list[str]:
        return basic_tokenize(text, self.lowercase, self.strip_accents, self.chinese_chars)

    def _word_ids(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        unk = [self._specials.unk]
        if len(word) > self.max_chars_per_word:
            return unk
        ids, start = [], 0
        while start < len(word):
            end = min(len(word), start + self._longest)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else PREFIX + word[start:end]
                found = self.index.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                ids = unk
                break
            ids.append(found)
            start = end
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[word] = ids
        return ids

    def _pieces(self, text: str) -> list[str]:
        return [self.vocab[i] for w in self._words(text) for i in self._word_ids(w)]

    def _piece_ids(self, texts: list[str]) -> list[list[int]]:
        return [[i for w in self._words(t) for i in self._word_ids(w)] for t in texts]

    def _detokenize(self, ids: list[int]) -> str:
        """Join pieces, gluing ``##`` continuations, and drop the space BERT's splitting put before
        punctuation; token by token, exactly as tokenizers' WordPiece decoder (``cleanup``) does."""
        out = []
        for n, i in enumerate(ids):
            piece = self.vocab[i]
            if n:
                piece = piece[len(PREFIX):] if piece.startswith(PREFIX) else " " + piece
            for before, after in _CLEANUP:
                piece = piece.replace(before, after)
            out.append(piece)
        return "".join(out)

    def id_to_token(self, index: int) -> str:
        return self.vocab[index]

    def token_to_id(self, token: str) -> int:
        return self.index.get(token, self._specials.unk)

    def _word_start_flags(self) -> list[bool]:
        return [not piece.startswith(PREFIX) for piece in self.vocab]

    def _save_backend(self, directory: Path) -> dict:
        tmp = directory / (VOCAB_FILE + ".tmp")
        tmp.write_text("".join(p + "\n" for p in self.vocab), encoding="utf-8")
        os.replace(tmp, directory / VOCAB_FILE)
        return {"vocab_file": VOCAB_FILE, "lowercase": self.lowercase, "strip_accents": self.strip_accents,
                "chinese_chars": self.chinese_chars, "max_chars_per_word": self.max_chars_per_word,
                "tokens": self.tokens}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict) -> "WordPieceTokenizer":
        o = meta.get("options", {})
        tokens = o.get("tokens", {})
        return cls.from_vocab_file(
            directory / o.get("vocab_file", VOCAB_FILE), lowercase=o.get("lowercase", True),
            strip_accents=o.get("strip_accents"), chinese_chars=o.get("chinese_chars", True),
            max_chars_per_word=o.get("max_chars_per_word", 100), languages=tuple(meta.get("languages", ())),
            **{f"{k}_token": v for k, v in tokens.items()})

    def save_hf(self, directory: Union[str, Path]) -> Path:
        """Write ``vocab.txt`` + ``tokenizer_config.json`` that ``transformers.BertTokenizer`` loads."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._save_backend(directory)
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase,
                  "strip_accents": self.strip_accents, "tokenize_chinese_chars": self.chinese_chars,
                  **{f"{k}_token": v for k, v in self.tokens.items()}}
        (directory / HF_CONFIG).write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return directory
