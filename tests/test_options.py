"""babelzoo.options: a function's keyword options as a typed dataclass."""

from dataclasses import MISSING, fields

import pytest

from babelzoo.errors import ConfigError
from babelzoo.options import options_class, read_options
from babelzoo.typed import Where


def train(corpus, vocab_size: int, alpha: float = 0.3, *, seed: int = 0, langs: list = ["en"], **extra):
    """A function with keyword options (as a tokenizer's ``train``)."""


def test_a_functions_options_are_a_dataclass_made_once():
    cls = options_class(train, "train", skip=("corpus",))
    assert cls is options_class(train, "train", skip=("corpus",))
    assert [(f.name, f.default) for f in fields(cls)][:3] == [("vocab_size", MISSING), ("alpha", 0.3), ("seed", 0)]
    assert cls(vocab_size=1).langs == ["en"] and cls(vocab_size=1).langs is not cls(vocab_size=1).langs
    assert [f.name for f in fields(options_class(train, "kw"))] == ["seed", "langs"]  # keyword-only by default
    given = read_options(train, {"vocab_size": 8.0, "alpha": "0.5", "byte_fallback": True}, Where("t"), "train",
                         skip=("corpus",))
    assert given == {"vocab_size": 8, "alpha": 0.5, "byte_fallback": True}  # **extra takes what it does not name
    with pytest.raises(ConfigError, match=r"^t.alpha='x' must be a number, got str$"):
        read_options(train, {"vocab_size": 8, "alpha": "x"}, Where("t"), "train", skip=("corpus",))
    with pytest.raises(ConfigError, match=r"^t: train option needs vocab_size$"):
        read_options(train, {}, Where("t"), "train", skip=("corpus",))
