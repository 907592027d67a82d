"""SentencePiece tokenizers (Kudo & Richardson, 2018): unigram (Kudo, 2018) or BPE (Sennrich et
al., 2016) models trained by babelzoo, and imported XLM-R and ALBERT models.

Three id layouts:

- ``"babelzoo"`` (trained here, :mod:`~babelzoo.datasets.spm_train`): ``<pad>=0, <s>=1, </s>=2,
  <unk>=3, <mask>=4``, then one tag per language (``[de]``), then the learned pieces.
- ``"fairseq"`` (XLM-R, Conneau et al., 2020): ``<s>=0, <pad>=1, </s>=2, <unk>=3``, every other
  sentencepiece id shifted by +1, ``<mask>`` last; exactly Hugging Face's ``XLMRobertaTokenizer``.
- ``"albert"`` (ALBERT, Lan et al., 2020): the model's own ids (``<pad>=0, <unk>=1, [CLS]=2,
  [SEP]=3, [MASK]=4``); text is first normalised as Hugging Face's ``AlbertTokenizer`` does
  (`````/``''`` → ``"``, NFKD with accents dropped unless ``keep_accents``, lower-cased
  character by character when ``lowercase``).

Text is encoded by the ``tokenizers`` pipeline that :meth:`SentencePieceTokenizer.hf_pipeline`
builds and ``tokenizer.json`` saves, so that ``transformers.AutoTokenizer`` on a saved folder
gives the same ids on every text. For XLM-R and ALBERT that pipeline is the one ``transformers``
builds for ``XLMRobertaTokenizer`` and ``AlbertTokenizer`` (which read only the vocabulary from
``tokenizer.json``). It agrees with the sentencepiece library on ordinary text; they part on
rare inputs: a combining sequence the character map folds as a whole (sentencepiece matches the
longest rule, ``tokenizers`` looks at one grapheme), and text that normalises into a control
piece (``＜s＞``), which ``tokenizers`` matches and sentencepiece never does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Optional, Union

from .._files import read_json_object
from .specials import (BOS, EOS, MASK, PAD, SPECIAL_TOKENS, UNK, SpecialIds, language_tag, reserved_ids,
                       sentinel_token)
from .fast import FastTokenizer
from .spm_train import Source, train_model
from .tokenizer import PAIR_STYLES, TokenizerError
from .tokenizer_files import write_atomic

MODEL_FILE = "sentencepiece.model"
XLMR_MODEL_FILE = "sentencepiece.bpe.model"
ALBERT_MODEL_FILE = "spiece.model"
HF_CONFIG = "tokenizer_config.json"
SPACE = "\u2581"  # sentencepiece's word-boundary mark "▁"
LAYOUTS = ("babelzoo", "fairseq", "albert")
ALBERT_TOKENS = {"pad": PAD, "unk": UNK, "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


def albert_normalizer(lowercase: bool, keep_accents: bool):
    """Hugging Face's ALBERT normalisation before sentencepiece's own: ```` `` ```` and ``''`` to
    ``"``, NFKD with non-spacing marks dropped unless ``keep_accents``, lower-casing one character
    at a time when ``lowercase``."""
    from tokenizers import normalizers

    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not keep_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    return normalizers.Sequence(steps)


def _processor(proto: bytes, where: str):
    import sentencepiece as spm

    try:
        return spm.SentencePieceProcessor(model_proto=proto)
    except (RuntimeError, OSError) as err:
        raise TokenizerError(f"{where}: not a sentencepiece model ({err})") from None


class SentencePieceTokenizer(FastTokenizer):
    """A sentencepiece model behind the :class:`Tokenizer` interface.

    >>> tok = SentencePieceTokenizer.train({"de": Path("de.txt"), "fr": Path("fr.txt")}, vocab_size=8000)
    >>> tok.decode(tok.encode("Guten Morgen"))
    'Guten Morgen'
    """

    kind = "sentencepiece"

    def __init__(self, model_proto: bytes, layout: str = "babelzoo", languages: tuple[str, ...] = (),
                 pair_style: Optional[str] = None, prefix_language_tag: bool = False,
                 training: Optional[dict] = None, lowercase: bool = True, keep_accents: bool = False,
                 sentinels: int = 0, where: str = "sentencepiece model"):
        if layout not in LAYOUTS:
            raise TokenizerError(f"{where}: unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")
        if prefix_language_tag and layout != "babelzoo":
            raise TokenizerError(f"{where}: only babelzoo's layout has language tags")
        if sentinels and layout != "babelzoo":
            raise TokenizerError(f"{where}: only babelzoo's layout reserves sentinels")
        self.sentinels = sentinels
        self.model_proto = bytes(model_proto)
        self.sp = _processor(self.model_proto, where)
        self.layout = layout
        self.pair_style = pair_style or ("roberta" if layout == "fairseq" else "bert")
        if self.pair_style not in PAIR_STYLES:
            raise TokenizerError(f"{where}: unknown pair_style {pair_style!r} (known: {', '.join(PAIR_STYLES)})")
        self.prefix_language_tag = prefix_language_tag
        self.training = training or {}
        self.lowercase, self.keep_accents = lowercase, keep_accents  # ALBERT's normalisation only
        self._albert = albert_normalizer(lowercase, keep_accents) if layout == "albert" else None
        n = self.sp.get_piece_size()
        self._size = n
        if layout == "babelzoo":
            self._special_tokens = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
            self._special_tokens.update({language_tag(lang): len(SPECIAL_TOKENS) + i
                                         for i, lang in enumerate(languages)})
            first = len(SPECIAL_TOKENS) + len(languages)  # sentinels follow the language tags
            self._special_tokens.update({sentinel_token(k): first + k for k in range(sentinels)})
            self._check_pieces(self._special_tokens, where)
            ids = {"pad": 0, "cls": 1, "sep": 2, "unk": 3, "mask": 4}
        elif layout == "fairseq":
            control = (self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id(), self.sp.pad_id())
            if control != (0, 1, 2, -1):
                raise TokenizerError(f"{where}: an XLM-R model has <unk>=0, <s>=1, </s>=2 and no <pad>; "
                                     f"this one has unk/bos/eos/pad ids {control}")
            self._size = n + 2  # + <pad>, + <mask>
            ids = {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": n + 1}
            self._special_tokens = {BOS: 0, PAD: 1, EOS: 2, UNK: 3, MASK: n + 1}
        else:
            ids = {key: self.sp.piece_to_id(tok) for key, tok in ALBERT_TOKENS.items()}
            self._special_tokens = {tok: ids[key] for key, tok in ALBERT_TOKENS.items()}
            self._check_pieces(self._special_tokens, where)
        self._specials = SpecialIds(vocab_size=self._size, languages={lang: i for i, lang in enumerate(languages)},
                                    special=frozenset(self._special_tokens.values()),
                                    **reserved_ids(self._special_tokens, languages), **ids)
        self._backend = None

    @property
    def backend(self):  # type: ignore[override]
        """The ``tokenizers`` pipeline that encodes (built on first use: ~2 s for 250k pieces)."""
        if self._backend is None:
            self._set_backend(self.hf_pipeline())
        return self._backend

    @backend.setter
    def backend(self, value) -> None:
        self._backend = value

    def _check_pieces(self, want: dict[str, int], where: str) -> None:
        n = self.sp.get_piece_size()
        wrong = {t: i for t, i in want.items() if not 0 <= i < n or self.sp.id_to_piece(i) != t}
        if wrong:
            found = {t: self.sp.piece_to_id(t) for t in wrong}
            raise TokenizerError(f"{where}: expected special pieces at ids {wrong}; the model has them at {found} "
                                 f"(an id of {self.sp.unk_id()} means absent)")

    # ---- construction -----------------------------------------------------------------------

    @classmethod
    def from_xlmr(cls, model_file: Union[str, Path], languages: tuple[str, ...] = ()) -> "SentencePieceTokenizer":
        """Import XLM-R's ``sentencepiece.bpe.model`` with fairseq's ids (those of the released
        checkpoints and of Hugging Face's ``XLMRobertaTokenizer``)."""
        return cls(_read(model_file), layout="fairseq", languages=languages, where=str(model_file))

    @classmethod
    def from_albert(cls, model_file: Union[str, Path], lowercase: Optional[bool] = None,
                    keep_accents: Optional[bool] = None) -> "SentencePieceTokenizer":
        """Import ALBERT's ``spiece.model``. ``do_lower_case`` and ``keep_accents`` come from a
        ``tokenizer_config.json`` beside it when not given (ALBERT's defaults: True, False)."""
        path = Path(model_file)
        config = _hf_config(path.parent)
        lowercase = config.get("do_lower_case", True) if lowercase is None else lowercase
        keep_accents = config.get("keep_accents", False) if keep_accents is None else keep_accents
        return cls(_read(path), layout="albert", lowercase=lowercase, keep_accents=keep_accents, where=str(path))

    @classmethod
    def from_model_file(cls, model_file: Union[str, Path], languages: tuple[str, ...] = (),
                        **options) -> "SentencePieceTokenizer":
        """A model trained with babelzoo's layout (specials at 0..4, then language tags)."""
        return cls(_read(model_file), layout="babelzoo", languages=languages, where=str(model_file), **options)

    @classmethod
    def train(cls, corpus: Mapping[str, Source], vocab_size: int, model_type: str = "unigram", alpha: float = 0.3,
              seed: int = 0, languages: Optional[Iterable[str]] = None, max_sentences: Optional[int] = None,
              character_coverage: float = 0.9995, byte_fallback: bool = False, prefix_language_tag: bool = False,
              num_threads: int = 1, sentinels: int = 0, **trainer_options) -> "SentencePieceTokenizer":
        """Train on ``corpus`` = ``{lang: sentences}``; each value is an iterable of sentences, a
        path (``str`` or ``Path``) to a UTF-8 text file with one sentence per line, or a list of
        ``Path`` objects.

        ``max_sentences`` (default: the corpus size) sentences are drawn across languages with
        XLM's smoothed probabilities q_i ∝ p_i^α (Lample & Conneau, 2019, §3.1): a multinomial
        split of the total, then per language a random order without repetition, starting a new
        pass when a small language is upsampled. The draw depends only on ``seed``.

        Empty lines are skipped and lines longer than sentencepiece's limit (4192 bytes) are
        left out; both are counted in ``tokenizer.training["languages"][lang]`` with the number
        of lines read, the probability and the number sampled. ``sentinels``: how many of T5's
        ``<extra_id_k>`` tokens to reserve after the language tags (span corruption needs them).
        Extra ``trainer_options`` go to ``sentencepiece.SentencePieceTrainer``.
        """
        proto, languages, training = train_model(
            corpus, vocab_size, model_type=model_type, alpha=alpha, seed=seed, languages=languages,
            max_sentences=max_sentences, character_coverage=character_coverage, byte_fallback=byte_fallback,
            num_threads=num_threads, sentinels=sentinels, **trainer_options)
        return cls(proto, layout="babelzoo", languages=tuple(languages), prefix_language_tag=prefix_language_tag,
                   training=training, sentinels=sentinels, where="trained model")

    # ---- id mapping between sentencepiece and this tokenizer ---------------------------------

    def _to_ids(self, sp_ids: list[int]) -> list[int]:
        if self.layout != "fairseq":
            return sp_ids
        return [3 if i == 0 else i + 1 for i in sp_ids]  # sentencepiece <unk>=0 → fairseq 3

    def _to_sp(self, index: int) -> int:
        if self.layout != "fairseq":
            return index
        return {0: 1, 2: 2, 3: 0}.get(index, index - 1)

    def _prepare(self, text: str) -> str:
        """ALBERT's normalisation before sentencepiece's own (Hugging Face's normaliser order)."""
        return text if self._albert is None else self._albert.normalize_str(text)

    def sentencepiece_ids(self, texts: list[str]) -> list[list[int]]:
        """Content ids as the sentencepiece library segments ``texts`` (which must hold no special
        token): what the encoding pipeline is checked against."""
        return [self._to_ids(ids) for ids in self.sp.encode([self._prepare(t) for t in texts])]

    # ---- Tokenizer interface ----------------------------------------------------------------

    @property
    def specials(self) -> SpecialIds:
        return self._specials

    def special_tokens(self) -> dict[str, int]:
        return self._special_tokens

    def _pieces(self, text: str) -> list[str]:
        return [self.id_to_token(i) for i in self._piece_ids([text])[0]]

    def _detokenize(self, ids: list[int]) -> str:
        return self.sp.decode([self._to_sp(i) for i in ids])

    def id_to_token(self, index: int) -> str:
        if not 0 <= index < self._size:
            raise TokenizerError(f"id {index} is outside the vocabulary (size {self._size})")
        if self.layout == "fairseq" and index in (1, self._size - 1):
            return PAD if index == 1 else MASK
        return self.sp.id_to_piece(self._to_sp(index))

    def token_to_id(self, token: str) -> int:
        if token in self._special_tokens:
            return self._special_tokens[token]
        return self._to_ids([self.sp.piece_to_id(token)])[0]

    def _word_start_flags(self) -> list[bool]:
        special = set(self._special_tokens.values())
        return [i in special or self.id_to_token(i).startswith(SPACE) for i in range(self._size)]

    def normalize(self, text: str) -> str:
        """The text as the model sees it (sentencepiece's normaliser, e.g. NFKC): what
        ``decode(encode(text))`` gives back when every character is in the vocabulary."""
        return self.sp.normalize(self._prepare(text)).replace(SPACE, " ").strip()

    # ---- persistence -----------------------------------------------------------------------

    def _model_file(self) -> str:
        return {"fairseq": XLMR_MODEL_FILE, "albert": ALBERT_MODEL_FILE}.get(self.layout, MODEL_FILE)

    def _save_backend(self, directory: Path) -> dict:
        name = self._model_file()
        write_atomic(directory / name, self.model_proto)
        return {"model_file": name, "layout": self.layout, "training": self.training,
                "lowercase": self.lowercase, "keep_accents": self.keep_accents, "sentinels": self.sentinels}

    @classmethod
    def _from_saved(cls, directory: Path, meta: dict, meta_path: Path) -> "SentencePieceTokenizer":
        o = meta.get("options", {})
        path = directory / o.get("model_file", MODEL_FILE)
        if not path.is_file():
            raise TokenizerError(f"{meta_path}: its model file {path.name} is missing")
        return cls(path.read_bytes(), layout=o.get("layout", "babelzoo"), languages=tuple(meta.get("languages", ())),
                   pair_style=o.get("pair_style"), prefix_language_tag=o.get("prefix_language_tag", False),
                   training=o.get("training"), lowercase=o.get("lowercase", True),
                   keep_accents=o.get("keep_accents", False), sentinels=o.get("sentinels", 0), where=str(path))

    # ---- Hugging Face files ------------------------------------------------------------------

    @property
    def hf_class(self) -> str:  # type: ignore[override]
        # transformers rebuilds these two classes' pipeline from the vocabulary (a unigram one)
        if self._model_type() != "unigram":
            return "PreTrainedTokenizerFast"
        return {"fairseq": "XLMRobertaTokenizerFast", "albert": "AlbertTokenizerFast"}.get(
            self.layout, "PreTrainedTokenizerFast")

    def _model_type(self) -> str:
        from ._spm_model import model_spec

        return model_spec(self.model_proto, "sentencepiece model").model_type

    def _hf_options(self) -> dict:
        return {"do_lower_case": self.lowercase, "keep_accents": self.keep_accents} if self.layout == "albert" else {}

    def pieces_and_scores(self) -> tuple[list[str], list[float]]:
        """Every id's piece and score (0 for fairseq's added ``<pad>`` and ``<mask>``)."""
        pieces = [self.id_to_token(i) for i in range(self._size)]
        added = (1, self._size - 1) if self.layout == "fairseq" else ()
        scores = [0.0 if i in added else self.sp.get_score(self._to_sp(i)) for i in range(self._size)]
        return pieces, scores

    def symbol_ids(self) -> frozenset[int]:
        """Ids of control and user-defined symbols (never produced by segmenting text)."""
        return frozenset(self._special_tokens.values()) | {self.specials.unk}

    def hf_pipeline(self):
        """The encoding pipeline (see the module docstring): XLM-R's and ALBERT's as
        ``transformers`` builds them; for babelzoo's own models, sentencepiece's text handling
        (only U+0020 separates words)."""
        from ._spm_model import metaspace_pipeline, model_spec, whitespace_split_pipeline
        from .bpe import BPETokenizer
        from .unigram import unigram_model

        spec = model_spec(self.model_proto, "sentencepiece model")
        if spec.model_type == "bpe":
            return BPETokenizer.from_sentencepiece(self).hf_pipeline()
        if spec.model_type != "unigram":
            raise TokenizerError(f"a sentencepiece {spec.model_type} model has no tokenizers counterpart here")
        pieces, scores = self.pieces_and_scores()
        model = unigram_model(pieces, scores, self.specials.unk, spec.byte_fallback)
        if self.layout in ("fairseq", "albert"):
            return whitespace_split_pipeline(model, spec.charsmap, self._albert)
        return metaspace_pipeline(model, spec, self._albert)


def _read(model_file: Union[str, Path]) -> bytes:
    path = Path(model_file)
    if not path.is_file():
        raise TokenizerError(f"{path}: no such sentencepiece model")
    return path.read_bytes()


def _hf_config(directory: Path) -> dict:
    path = directory / HF_CONFIG
    if not path.is_file():
        return {}
    return read_json_object(path, TokenizerError)
