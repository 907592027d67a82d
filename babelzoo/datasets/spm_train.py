"""Training a multilingual sentencepiece model (Kudo & Richardson, 2018) on language-smoothed
samples, as XLM and XLM-R build their vocabularies.

Sentences are drawn per language with q_i = p_i^α / Σ_j p_j^α, p_i = n_i / Σ_k n_k (Lample &
Conneau, 2019, §3.1; :func:`babelzoo.datasets.sampling.resample`), so that low-resource languages
get enough pieces of their own instead of being split into characters. babelzoo's special tokens
take fixed ids 0..4 (``<pad> <s> </s> <unk> <mask>``) and one tag per language (``[de]``) follows
as a user-defined symbol, so every trained model shares one layout (see ``specials.py``).
"""

from __future__ import annotations

import io
import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Mapping, Optional, Union

from .sampling import resample, sampling_probabilities
from .specials import BOS, EOS, MASK, PAD, UNK, language_tag, sentinel_token
from .tokenizer import TokenizerError

MAX_SENTENCE_BYTES = 4192  # sentencepiece's default max_sentence_length; it would skip longer lines unseen

Source = Union[str, os.PathLike, Iterable[str]]


def train_model(corpus: Mapping[str, Source], vocab_size: int, model_type: str = "unigram", alpha: float = 0.3,
                seed: int = 0, languages: Optional[Iterable[str]] = None, max_sentences: Optional[int] = None,
                character_coverage: float = 0.9995, byte_fallback: bool = False, num_threads: int = 1,
                sentinels: int = 0, **trainer_options) -> tuple[bytes, list[str], dict]:
    """Train a model; return its bytes, the language order and what was read and sampled.
    ``SentencePieceTokenizer.train`` documents the arguments."""
    import sentencepiece as spm

    if model_type not in ("unigram", "bpe"):
        raise TokenizerError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
    if not corpus:
        raise TokenizerError("corpus is empty: give {language: sentences or path}")
    languages = list(languages) if languages is not None else sorted(corpus)
    unknown = sorted(set(corpus) - set(languages))
    if unknown:
        raise TokenizerError(f"corpus languages {unknown} are not in languages={languages}")
    if len(set(languages)) != len(languages):
        raise TokenizerError(f"languages has duplicates: {languages}")

    stats: dict[str, dict] = {}
    sentences: dict[str, list[str]] = {}
    for lang in sorted(corpus):
        sentences[lang], stats[lang] = read_sentences(corpus[lang], lang)
    counts = {lang: len(s) for lang, s in sentences.items()}
    if sum(counts.values()) == 0:
        raise TokenizerError("corpus has no non-empty sentences")
    probabilities = sampling_probabilities(counts, alpha)
    total = max_sentences if max_sentences is not None else sum(counts.values())
    drawn = resample({k: v for k, v in sentences.items() if v}, alpha, total, seed)
    sample: list[str] = []
    for lang in sorted(sentences):
        chosen = drawn.get(lang, [])
        stats[lang].update(probability=probabilities[lang], sampled=len(chosen))
        sample.extend(chosen)

    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    options = dict(
        model_type=model_type, vocab_size=vocab_size, character_coverage=character_coverage,
        byte_fallback=byte_fallback, pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece=PAD, bos_piece=BOS,
        eos_piece=EOS, unk_piece=UNK, user_defined_symbols=[MASK, *(language_tag(lang) for lang in languages),
                                                        *(sentinel_token(k) for k in range(sentinels))],
        num_threads=num_threads, max_sentence_length=MAX_SENTENCE_BYTES, minloglevel=2,
    )
    options.update(trainer_options)
    try:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(sample), model_writer=model, **options)
    except RuntimeError as err:
        raise TokenizerError(f"sentencepiece training failed: {err}") from None
    training = {"model_type": model_type, "vocab_size": vocab_size, "alpha": alpha, "seed": seed,
                "sentences": len(sample), "languages": stats}
    return model.getvalue(), languages, training


def read_sentences(source: Source, lang: str) -> tuple[list[str], dict]:
    """Sentences of one language, stripped, with counts of what was skipped (``empty`` lines,
    lines ``too_long`` for sentencepiece). Invalid UTF-8 is an error naming file:line."""
    if isinstance(source, (str, os.PathLike)):
        paths = [Path(source)]
    elif isinstance(source, (list, tuple)) and source and all(isinstance(s, Path) for s in source):
        paths = list(source)
    else:
        paths = []
    stats = Counter(lines=0, empty=0, too_long=0)
    out: list[str] = []

    def take(line: str) -> None:
        stats["lines"] += 1
        line = line.strip()
        if not line:
            stats["empty"] += 1
        elif len(line.encode("utf-8")) > MAX_SENTENCE_BYTES:
            stats["too_long"] += 1
        else:
            out.append(line)

    if paths:
        for path in paths:
            if not path.is_file():
                raise TokenizerError(f"corpus[{lang!r}]: {path} is not a file")
            with open(path, "rb") as handle:
                for number, raw in enumerate(handle, 1):
                    try:
                        take(raw.decode("utf-8"))
                    except UnicodeDecodeError as err:
                        raise TokenizerError(f"{path}:{number}: invalid UTF-8 ({err.reason})") from None
    else:
        for i, sentence in enumerate(source):
            if not isinstance(sentence, str):
                raise TokenizerError(f"corpus[{lang!r}][{i}] is {type(sentence).__name__}, not str")
            take(sentence)
    return out, dict(stats)
