"""Each objective trains exactly the parameters it should: the encoder, plus its own heads and
the model's heads it uses, and nothing else.

Every registered objective is checked here on the tiny XLM encoder, with the toy batch of the
example type it consumes, or is listed in OWN_MODEL with the test file that covers it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo.objectives import OBJECTIVES, build_objective

TESTS = Path(__file__).resolve().parents[1]

ENCODER = {"embeddings.", "encoder."}
LM_HEAD = {"lm_head."}
POOLER = {"pooler."}
# the parameters each objective trains, by name prefix ("objective." for its own heads)
EXPECTED = {
    "mlm": ENCODER | LM_HEAD, "mmlm": ENCODER | LM_HEAD, "tlm": ENCODER | LM_HEAD, "clmlm": ENCODER | LM_HEAD,
    "clm": ENCODER | LM_HEAD,
    "clwr": ENCODER | LM_HEAD | {"objective.attention."},
    "clpc": ENCODER | POOLER | {"objective.classifier."},
    "nsp": ENCODER | POOLER | {"objective.classifier."},
    "sop": ENCODER | POOLER | {"objective.classifier."},
    "rtd": ENCODER | {"objective.generator_project.", "objective.generator.", "objective.generator_head.",
                      "objective.discriminator."},
    "sbo": ENCODER | LM_HEAD | {"objective.head.", "objective.position."},
    "xlco": ENCODER, "translation_ranking": ENCODER,
    "unilm": ENCODER | LM_HEAD, "glm": ENCODER | LM_HEAD | {"objective.block_position."},
    "segment_mlm": ENCODER | LM_HEAD, "segment_clm": ENCODER | LM_HEAD,
    "skip_thoughts": ENCODER | {"objective.decoders."},
    "quick_thoughts": ENCODER | {"objective.context_encoder."},
    "infersent": ENCODER | {"objective.classifier."},
    "entity_mlm": ENCODER | LM_HEAD,
}

SEQ2SEQ = ("an encoder–decoder objective: the decoder writes the target", "objectives/test_seq2seq_objectives.py")
TEACHER = ("distillation: needs a frozen teacher model besides the student", "objectives/test_distill.py")
HEAD = ("fine-tuning: trains the task head a model gets from its `head` option", "objectives/test_classification.py")
MEDIA = "media_text: needs a model with an image or speech tower"
# The objectives that the tiny XLM encoder and the toy batches cannot check: why, and the test
# file (under tests/) that covers each.
OWN_MODEL = {
    "plm": ("needs XLNet's two-stream attention", "objectives/test_plm.py"),
    "text_infilling": SEQ2SEQ, "mbart_denoising": SEQ2SEQ, "span_corruption": SEQ2SEQ, "mass": SEQ2SEQ,
    "translation": SEQ2SEQ, "xae": SEQ2SEQ,
    "distill_mlm": TEACHER, "distill_sentence": TEACHER,
    "sequence_classification": HEAD, "token_classification": HEAD,
    "itc": (MEDIA, "multimodal/test_itc.py"),
    "itm": (MEDIA, "multimodal/test_itm.py"),
    "mlm_conditioned": (MEDIA, "multimodal/test_conditioned_mlm.py"),
    "dea": ("knowledge: needs a model with entity embeddings attached", "knowledge/test_attach.py"),
    "kbert_mlm": ("knowledge: its sentence trees are built from a knowledge base", "knowledge/test_kbert.py"),
}


def trained(model, objective, loss) -> tuple[set[str], set[str]]:
    loss.value.backward()
    params = {f"model.{n}": p for n, p in model.named_parameters()}
    params.update({f"objective.{n}": p for n, p in objective.named_parameters()})
    with_grad = {n for n, p in params.items() if p.grad is not None and bool(p.grad.abs().sum() > 0)}
    return with_grad, set(params)


def matches(name: str, prefixes: set[str]) -> bool:
    name = name.removeprefix("model.")
    return any(name.startswith(p) for p in prefixes)


def file_names(path: str, name: str) -> bool:
    """Whether the test file ``tests/<path>`` exists and names objective ``name`` or its class."""
    file = TESTS / path
    text = file.read_text() if file.is_file() else ""
    return any(word in text for word in (f"'{name}'", f'"{name}"', OBJECTIVES.get(name).__name__))


def test_every_registered_objective_is_covered(every_part_tested):
    # a new objective: add the parameters it trains to EXPECTED, or why and where it is tested to OWN_MODEL
    every_part_tested(OBJECTIVES, set(EXPECTED) | set(OWN_MODEL))
    assert not set(EXPECTED) & set(OWN_MODEL), sorted(set(EXPECTED) & set(OWN_MODEL))


@pytest.mark.parametrize("name", sorted(OWN_MODEL))
def test_an_objective_on_its_own_model_is_tested_where_listed(name):
    reason, path = OWN_MODEL[name]
    assert file_names(path, name), f"{name} ({reason}): OWN_MODEL names tests/{path}, which does not name it"


@pytest.mark.parametrize("name", sorted(set(OBJECTIVES) - set(OWN_MODEL)))
def test_gradients_reach_exactly_the_trained_parameters(name, toy):
    assert name in EXPECTED, f"{name}: add the parameters it trains to EXPECTED (or list it in OWN_MODEL)"
    specials, examples = toy
    consumes = OBJECTIVES.get(name).consumes
    assert consumes in examples, f"{name} consumes {consumes!r}: add a toy batch of that type to the toy fixture"
    torch.manual_seed(0)
    model = babelzoo.create_model("xlm_tiny", vocab_size=64)
    objective = build_objective(name, specials, model.config)
    loss = objective(model, objective.prepare(examples[consumes]))
    with_grad, every = trained(model, objective, loss)
    expected = {n for n in every if matches(n, EXPECTED[name])}
    assert with_grad == expected, (f"unexpected: {sorted(with_grad - expected)}; "
                                   f"missing: {sorted(expected - with_grad)}")
    # The word embeddings are trained by every objective (as input, and as tied LM decoder).
    assert "model.embeddings.word.weight" in with_grad


def test_toy_batches_are_of_known_example_types(toy):
    from babelzoo.datasets.sources import EXAMPLE_TYPES

    assert set(toy[1]) <= set(EXAMPLE_TYPES), sorted(set(toy[1]) - set(EXAMPLE_TYPES))


def test_xlco_on_an_inner_layer_leaves_the_layers_above_untouched(toy):
    specials, examples = toy
    model = babelzoo.create_model("xlm_tiny", vocab_size=64)
    objective = build_objective("xlco", specials, layer=1)
    with_grad, every = trained(model, objective, objective(model, objective.prepare(examples["pair"])))
    assert with_grad == {n for n in every if matches(n, {"embeddings.", "encoder.layers.0."})}
