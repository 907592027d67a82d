"""Fixtures for the objective tests: real parallel text from the gettext catalogs Django ships
(read with the standard library), a small sentencepiece model trained on it, and tiny models."""

from __future__ import annotations

import gettext
import io
import re
from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.knowledge.facts import EntityExample
from babelzoo.objectives import Pair

LANGS = ("de", "fr", "es")
PLACEHOLDER = re.compile(r"%\(\w+\)[sdifr]|%[sdifr]|\{\w*\}")


def clean(text: str) -> str:
    """Drop printf/format placeholders and accelerator ampersands, collapse spaces."""
    text = PLACEHOLDER.sub(" ", text).replace("&", "")
    return " ".join(text.split())


def read_catalogs(lang: str) -> dict[str, str]:
    """English msgid → translation, over every Django catalog for ``lang`` (singular strings)."""
    django = pytest.importorskip("django")
    root = Path(django.__file__).parent
    out: dict[str, str] = {}
    for path in sorted(root.glob(f"**/locale/{lang}/LC_MESSAGES/*.mo")):
        with open(path, "rb") as handle:
            catalog = gettext.GNUTranslations(handle)._catalog
        for key, value in catalog.items():
            if not isinstance(key, str) or not key:
                continue  # plural forms are keyed by (msgid, n); the header by ""
            src, tgt = clean(key), clean(value)
            if src and tgt and len(src.split()) >= 2:
                out.setdefault(src, tgt)
    return out


@pytest.fixture(scope="session")
def catalogs() -> dict[str, dict[str, str]]:
    return {lang: read_catalogs(lang) for lang in LANGS}


@pytest.fixture(scope="session")
def spm(catalogs):
    """A 1,000-piece unigram model over English and the three target languages; ids 0-4 are
    <pad>, <s> ([CLS]), </s> ([SEP]), <unk>, <mask>."""
    import sentencepiece

    texts = sorted({t for c in catalogs.values() for pair in c.items() for t in pair})
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=1000, model_type="unigram",
        pad_id=0, bos_id=1, eos_id=2, unk_id=3, user_defined_symbols=["<mask>"], character_coverage=1.0,
        num_threads=2, minloglevel=2)
    return sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())


@pytest.fixture(scope="session")
def specials(spm) -> SpecialIds:
    assert spm.piece_to_id("<mask>") == 4
    return SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=spm.get_piece_size(),
                      languages={"en": 0, "de": 1, "fr": 2, "es": 3})


@pytest.fixture(scope="session")
def parallel(catalogs, spm) -> list[Pair]:
    """English → {de, fr, es} translation pairs, tokenised, at most 24 pieces a side."""
    pairs = []
    for lang, catalog in catalogs.items():
        for src, tgt in catalog.items():
            a, b = spm.encode(src), spm.encode(tgt)
            if len(a) <= 24 and len(b) <= 24:
                pairs.append(Pair(a, b, "en", lang))
    return pairs


@pytest.fixture(scope="session")
def word_starts(spm) -> torch.Tensor:
    from babelzoo.objectives import word_starts_from_pieces

    return word_starts_from_pieces([spm.id_to_piece(i) for i in range(spm.get_piece_size())])


@pytest.fixture(scope="session")
def toy() -> tuple[SpecialIds, dict[str, list]]:
    """A 64-token vocabulary and a small hand-made batch of each example type (an objective's
    ``consumes``, one of :data:`babelzoo.datasets.sources.EXAMPLE_TYPES`) that a plain text
    encoder reads; ``examples[OBJECTIVES.get(name).consumes]`` is objective ``name``'s batch."""
    specials = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})
    sentences = [([10 + i, 11 + i, 12 + i, 13 + i, 14 + i, 15 + i, 16 + i], "en" if i % 2 else "de")
                 for i in range(8)]
    pairs = [Pair([10 + i, 11 + i, 12 + i, 13 + i], [30 + i, 31 + i, 32 + i], "en", "de") for i in range(8)]
    examples = {
        "sentence": sentences,
        "pair": pairs,
        "document": [[sentences[i], sentences[i + 1], sentences[i + 2]] for i in range(6)],
        "parallel_document": [pairs[0:3], pairs[3:6], pairs[5:8]],
        # two mentions a sentence: the first two tokens and the last three
        "entity_mentions": [EntityExample(ids[:6], [(0, 2), (3, 6)], lang) for ids, lang in sentences],
    }
    return specials, examples


@pytest.fixture
def tiny(specials):
    """Build a registered tiny model sized to the test vocabulary, without dropout (so losses
    measured before and after training are comparable)."""

    def make(name: str = "xlm_tiny", **overrides):
        options = dict(vocab_size=specials.vocab_size, max_positions=128, dropout=0.0, attention_dropout=0.0)
        options.update(overrides)
        return babelzoo.create_model(name, **options)

    return make


@pytest.fixture(scope="session")
def train_on():
    """``train_on(model, objective, examples, steps=, batch_size=, lr=)``: AdamW steps of the
    objective on random draws of ``examples`` (the objective's own parameters trained too), as the
    "learns" tests train."""
    def train(model, objective, examples, *, steps: int, batch_size: int, lr: float) -> None:
        params = list({id(p): p for p in [*model.parameters(), *objective.parameters()]}.values())
        optimizer = torch.optim.AdamW(params, lr=lr)
        model.train()
        for _ in range(steps):
            picks = torch.randint(len(examples), (batch_size,)).tolist()
            loss = objective(model, objective.prepare([examples[i] for i in picks]))
            optimizer.zero_grad()
            loss.value.backward()
            optimizer.step()

    return train
