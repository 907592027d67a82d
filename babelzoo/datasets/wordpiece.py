"""BERT's WordPiece tokenizer (Devlin et al., 2019; Wu et al., 2016, "Google's Neural Machine
Translation System"), reading a Hugging Face ``vocab.txt``, run by the Rust ``tokenizers``
library exactly as Hugging Face's BERT tokenizer runs it (``BertNormalizer`` +
``BertPreTokenizer`` + ``WordPiece``), so ids equal ``transformers.BertTokenizer``'s:

1. Basic tokenisation: special tokens written in the text are kept whole; then control
   characters, U+0000 and U+FFFD are removed and whitespace becomes a space; CJK ideographs get
   spaces around them; accents are stripped (NFD, drop non-spacing marks) and text lower-cased
   one character at a time (so a final capital sigma becomes ``σ``, not ``ς``); the text is split
   at whitespace and every punctuation character becomes its own word.
2. WordPiece: greedy longest-match-first over each word, continuation pieces prefixed ``##``;
   a word longer than 100 characters, or one that cannot be covered, becomes ``[UNK]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

from .._files import read_json
from .fast import FastTokenizer
from .specials import SpecialIds
from .tokenizer import TokenizerError, check_subset
from .tokenizer_files import write_atomic

VOCAB_FILE = "vocab.txt"
HF_CONFIG = "tokenizer_config.json"
PREFIX = "##"


def _normalizer(lowercase: bool, strip_accents: Optional[bool], chinese_chars: bool, clean_text: bool = True):
    from tokenizers import normalizers

    return normalizers.BertNormalizer(clean_text=clean_text, handle_chinese_chars=chinese_chars,
                                      strip_accents=strip_accents, lowercase=lowercase)


def basic_tokenize(text: str, lowercase: bool = True, strip_accents: Optional[bool] = None,
                   chinese_chars: bool = True, clean_text: bool = True) -> list[str]:
    """BERT's basic tokenisation of a text without special tokens (see the module docstring).
    ``strip_accents=None`` strips accents exactly when lower-casing, as BERT does."""
    from tokenizers import pre_tokenizers

    normalized = _normalizer(lowercase, strip_accents, chinese_chars, clean_text).normalize_str(text)
    return [word for word, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(normalized)]


class WordPieceTokenizer(FastTokenizer):
    """WordPiece over a BERT vocabulary; ids equal Hugging Face ``BertTokenizer``'s.

    >>> tok = WordPieceTokenizer.from_hf("all-MiniLM-L6-v2")      # vocab.txt + tokenizer_config.json
    >>> tok.tokenize("Unaffable ÉTÉ!")                             # ['una', '##ffa', '##ble', 'ete', '!']
    """

    kind = "wordpiece"
    hf_class = "BertTokenizerFast"

    def __init__(self, vocab: list[str], lowercase: bool = True, strip_accents: Optional[bool] = None,
                 chinese_chars: bool = True, unk_token: str = "[UNK]", pad_token: str = "[PAD]",
                 cls_token: str = "[CLS]", sep_token: str = "[SEP]", mask_token: str = "[MASK]",
                 max_chars_per_word: int = 100, languages: tuple[str, ...] = (), max_length: Optional[int] = None,
                 where: str = "vocabulary"):
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
        self.max_length = max_length
        self._set_backend(self._pipeline())

    def _pipeline(self):
        from tokenizers import Tokenizer as RustTokenizer
        from tokenizers import decoders, models, pre_tokenizers

        backend = RustTokenizer(models.WordPiece(self.index, unk_token=self.tokens["unk"],
                                                 max_input_chars_per_word=self.max_chars_per_word))
        backend.normalizer = _normalizer(self.lowercase, self.strip_accents, self.chinese_chars)
        backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        backend.decoder = decoders.WordPiece(prefix=PREFIX, cleanup=True)
        return backend

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
            config = read_json(config_path, TokenizerError)
            mapping = {"do_lower_case": "lowercase", "strip_accents": "strip_accents",
                       "tokenize_chinese_chars": "chinese_chars", "model_max_length": "max_length"}
            options = {ours: config[theirs] for theirs, ours in mapping.items() if theirs in config}
            if not isinstance(options.get("max_length"), int) or options["max_length"] > 1 << 20:
                options.pop("max_length", None)  # transformers writes 1e30 for "no limit"
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

    def token_to_id(self, token: str) -> int:
        return self.index.get(token, self._specials.unk)

    def _word_start_flags(self) -> list[bool]:
        return [not piece.startswith(PREFIX) for piece in self.vocab]

    def subset(self, keep: Sequence[int]) -> "WordPieceTokenizer":
        """The pieces ``keep``. Greedy longest-match-first picks, at each step, the longest piece
        that matches; when every piece of a word's segmentation is kept, the longest kept match is
        that same piece, so such words segment exactly as before."""
        keep = check_subset(self, keep)
        small = WordPieceTokenizer([self.vocab[i] for i in keep], lowercase=self.lowercase,
                                   strip_accents=self.strip_accents, chinese_chars=self.chinese_chars,
                                   max_chars_per_word=self.max_chars_per_word, languages=self.languages,
                                   max_length=self.max_length, **{f"{k}_token": v for k, v in self.tokens.items()})
        return self._trimmed(small)

    def _save_backend(self, directory: Path) -> dict:
        write_atomic(directory / VOCAB_FILE, "".join(p + "\n" for p in self.vocab))
        return {"vocab_file": VOCAB_FILE, "lowercase": self.lowercase, "strip_accents": self.strip_accents,
                "chinese_chars": self.chinese_chars, "max_chars_per_word": self.max_chars_per_word,
                "tokens": self.tokens, "max_length": self.max_length}

    def hf_pipeline(self):
        return self._pipeline()

    def _hf_options(self) -> dict:
        return {"do_lower_case": self.lowercase, "strip_accents": self.strip_accents,
                "tokenize_chinese_chars": self.chinese_chars}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict, meta_path: Path) -> "WordPieceTokenizer":
        o = meta.get("options", {})
        tokens = o.get("tokens", {})
        return cls.from_vocab_file(
            directory / o.get("vocab_file", VOCAB_FILE), lowercase=o.get("lowercase", True),
            strip_accents=o.get("strip_accents"), chinese_chars=o.get("chinese_chars", True),
            max_chars_per_word=o.get("max_chars_per_word", 100), languages=tuple(meta.get("languages", ())),
            max_length=o.get("max_length"),
            **{f"{k}_token": v for k, v in tokens.items()})
