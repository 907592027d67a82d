"""What a run gives an objective is what the objective declares (Objective.from_run), never
what a constructor happens to name: the word-start table and a teacher loaded for the run."""

import pytest
import torch

from babelzoo.errors import InputError
from babelzoo.objectives.base import Loss, Objective, register_objective
from babelzoo.objectives.mixture import objective_class
from babelzoo.train.config import ObjectiveSpec
from babelzoo.train.run import with_run_inputs


class Tokenizer:
    calls = 0

    def word_starts(self):
        Tokenizer.calls += 1
        return torch.tensor([True, False, True])


class Models:
    def get(self, name):
        return f"loaded {name}"


def test_the_run_gives_exactly_what_each_objective_declares():
    assert objective_class("mlm").from_run == ("word_starts",)
    assert objective_class("distill_sentence").from_run == ("teacher",)
    # entity_mlm's constructor names word_starts (from the masking family), but it declares nothing
    assert objective_class("entity_mlm").from_run == ()
    spec = {"mlm": ObjectiveSpec("mlm"), "own": ObjectiveSpec("mlm", options={"word_starts": "mine"}),
            "clm": ObjectiveSpec("clm", options={"max_length": 16}), "entities": ObjectiveSpec("entity_mlm"),
            "sentences": ObjectiveSpec("distill_sentence", options={"teacher": "multilingual_e5_small"}),
            "folder": ObjectiveSpec("distill_sentence", options={"teacher": "/some/checkpoint"})}
    Tokenizer.calls = 0
    given = with_run_inputs(spec, Tokenizer(), Models())
    assert given["mlm"]["word_starts"].tolist() == [True, False, True]
    assert given["own"] == {"word_starts": "mine"}  # the recipe's own value stays
    assert given["clm"] == {"max_length": 16}
    assert given["entities"] == {}
    assert given["sentences"] == {"teacher": "loaded multilingual_e5_small"}
    assert given["folder"] == {"teacher": "/some/checkpoint"}  # not a zoo entry
    assert Tokenizer.calls == 1  # one table for every objective that takes it
    assert spec["mlm"].options == {}  # the recipe's typed options are left as they were


def test_a_declaration_must_name_a_run_input_and_a_keyword_option():
    class Base(Objective):
        consumes = "sentence"

        def prepare(self, examples):
            return {}

        def forward(self, model, batch):
            return Loss(torch.zeros(()))

    class Unknown(Base):
        name, from_run = "declares_unknown", ("tokenizer",)

        def __init__(self, specials, *, tokenizer=None):
            super().__init__()

    class Unnamed(Base):
        name, from_run = "declares_unnamed", ("word_starts",)

        def __init__(self, specials, *, max_length: int = 8):
            super().__init__()

    with pytest.raises(InputError, match=r"^Unknown.from_run: 'tokenizer' is not something a run gives; it gives "
                                         r"word_starts, teacher$"):
        register_objective(Unknown)
    with pytest.raises(InputError, match=r"^Unnamed.from_run names 'word_starts', which is not a keyword-only "
                                         r"parameter of its constructor$"):
        register_objective(Unnamed)
