"""Numbers in configs are refused up front when no code downstream can use them: NaN and
infinity in any float field (a learning rate of inf trains to NaN weights and exits 0, a NaN
clipping norm switches clipping off), ints beyond 64 bits, seeds torch or numpy refuse, and each
field's own range; the message names the field and the value, and the file and line when the
value came from one."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Optional

import pytest

from babelzoo.cli import main
from babelzoo.errors import ConfigError, InputError
from babelzoo.typed import INT64, Range, Seed, Where, build, check, check_fields, coerce
from babelzoo.zoo.generation import GenerationSettings

RECIPE = "model: xlmr_tiny\nobjectives:\n  mlm: {max_length: 16}\n  tlm: {max_length: 16}\n"


def pretrain(tmp_path, capsys, *overrides: str, recipe: str = RECIPE) -> tuple[int, str, str]:
    (tmp_path / "r.yaml").write_text(recipe, encoding="utf-8")
    argv = ["pretrain", "--config", str(tmp_path / "r.yaml"), "--print-config"]
    for item in overrides:
        argv += ["--set", item]
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err.replace(str(tmp_path), "DIR"), captured.out


@pytest.mark.parametrize("override, message", [
    ("lr=.inf", "TrainConfig.optim.lr=inf must be a finite number"),
    ("lr=1e400", "TrainConfig.optim.lr='1e400' must be a finite number"),  # YAML 1.1 reads it as a string
    ("eps=.inf", "TrainConfig.optim.eps=inf must be a finite number"),
    ("max_grad_norm=.nan", "TrainConfig.optim.max_grad_norm=nan must be a finite number"),
    ("weight_decay=.nan", "TrainConfig.optim.weight_decay=nan must be a finite number"),
    ("weight_decay=-.inf", "TrainConfig.optim.weight_decay=-inf must be a finite number"),
    ("betas=[0.9, .nan]", "TrainConfig.optim.betas[1]=nan must be a finite number"),
    ("max_seconds=.inf", "TrainConfig.max_seconds=inf must be a finite number"),
    ("peak_flops=.nan", "TrainConfig.logging.peak_flops=nan must be a finite number"),
    ("seed=1180591620717411303424", "TrainConfig.seed=1180591620717411303424 must be in [0, 4294967295]"),
    ("seed=4294967296", "TrainConfig.seed=4294967296 must be in [0, 4294967295]"),
    ("seed=-1", "TrainConfig.seed=-1 must be in [0, 4294967295]"),
    ("max_steps=99999999999999999999", "TrainConfig.max_steps=99999999999999999999 must be an integer from "
                                       "-9223372036854775808 to 9223372036854775807"),
    ("objectives.mlm.max_length=1e3", "TrainConfig.objectives.mlm.max_length='1e3' must be an integer, got str"),
    ("objectives.mlm.masking.probability=.nan", "TrainConfig.objectives.mlm.masking.probability=nan must be a "
                                                "finite number"),
    ("objectives.tlm.weight=.inf", "TrainConfig.objectives.tlm.weight=inf must be a finite number"),
    ("objectives.tlm.weight=0", "TrainConfig.objectives.tlm.weight=0 must be positive"),
    ("objectives.tlm=3", "TrainConfig.objectives.tlm=3 must be a mapping of options"),
    ("tokenizer={vocab_size: 100, alpha: .nan}", "TrainConfig.tokenizer.alpha=nan must be a finite number"),
    ("tokenizer={vocab_size: 1e4}", "TrainConfig.tokenizer.vocab_size='1e4' must be an integer, got str"),
])
def test_a_set_value_no_run_can_use_is_one_line_before_anything_is_read(tmp_path, capsys, override, message):
    code, err, out = pretrain(tmp_path, capsys, override)
    assert (code, err, out) == (2, f"babelzoo pretrain: DIR/r.yaml {message}\n", "")


def test_the_same_value_in_the_recipe_names_its_line(tmp_path, capsys):
    code, err, _ = pretrain(tmp_path, capsys, recipe="model: xlmr_tiny\nlr: .inf\n")
    assert (code, err) == (2, "babelzoo pretrain: DIR/r.yaml:2 TrainConfig.optim.lr=inf must be a finite number\n")
    code, err, _ = pretrain(tmp_path, capsys, recipe=RECIPE + "seed: 18446744073709551616\n")
    assert (code, err) == (2, "babelzoo pretrain: DIR/r.yaml:5 TrainConfig.seed=18446744073709551616 must be in "
                              "[0, 4294967295]\n")
    code, err, _ = pretrain(tmp_path, capsys, recipe=RECIPE.replace("mlm: {max_length: 16}", "mlm: {max_length: .nan}"))
    assert (code, err) == (2, "babelzoo pretrain: DIR/r.yaml:3 TrainConfig.objectives.mlm.max_length=nan must be an "
                              "integer, got float\n")


def test_the_edges_of_each_range_are_accepted(tmp_path, capsys):
    code, err, out = pretrain(tmp_path, capsys, "seed=4294967295", "lr=1e-12", "max_grad_norm=0", "weight_decay=0",
                              "objectives.mlm.max_length=1000")
    assert (code, err) == (0, "")
    assert '"seed": 4294967295' in out and '"max_grad_norm": 0.0' in out and '"max_length": 1000' in out


@pytest.mark.parametrize("board, message", [
    ("tasks: [tatoeba]\nseed: 4294967296\nmodels:\n  - {name: a, kind: peer, source: muse_v3, max_length: .inf}\n",
     "board.yaml:2 LeaderboardConfig.seed=4294967296 must be in [0, 4294967295]"),
    ("tasks: [tatoeba]\nmodels:\n  - {name: a, kind: peer, source: muse_v3, max_length: .inf}\n",
     "board.yaml:3 LeaderboardConfig.models[0].max_length=inf must be an integer, got float"),
])
def test_a_leaderboard_config_is_held_to_the_same_numbers(tmp_path, capsys, board, message):
    (tmp_path / "board.yaml").write_text(board, encoding="utf-8")
    assert main(["eval", "--config", str(tmp_path / "board.yaml"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"babelzoo eval: {tmp_path}/{message}\n"
    assert not (tmp_path / "out").exists()


@dataclass
class Knobs:
    rate: float = 0.5
    fraction: Annotated[float, Range(0, 1, high_open=True)] = 0.0
    ceiling: Annotated[float, Range(0, low_open=True, finite=False)] = math.inf
    steps: Annotated[int, Range(1)] = 1
    seed: Seed = 0
    scale: Optional[float] = None
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_fields(self)


@pytest.mark.parametrize("field, value, message", [
    ("rate", float("nan"), "Knobs.rate=nan must be a finite number"),
    ("rate", float("-inf"), "Knobs.rate=-inf must be a finite number"),
    ("rate", 10 ** 400, f"Knobs.rate={10 ** 400} must be a finite number"),  # beyond any float
    ("fraction", 1.0, "Knobs.fraction=1.0 must be in [0, 1)"),
    ("fraction", -0.1, "Knobs.fraction=-0.1 must be in [0, 1)"),
    ("ceiling", float("nan"), "Knobs.ceiling=nan must be a finite number"),  # infinity allowed, NaN never
    ("ceiling", 0.0, "Knobs.ceiling=0.0 must be positive"),
    ("steps", 0, "Knobs.steps=0 must be at least 1"),
    ("seed", 2 ** 32, "Knobs.seed=4294967296 must be in [0, 4294967295]"),
    ("scale", float("inf"), "Knobs.scale=inf must be a finite number"),
    ("weights", (1.0, float("nan")), "Knobs.weights[1]=nan must be a finite number"),
])
def test_a_dataclass_built_in_python_is_held_to_the_same_numbers(field, value, message):
    with pytest.raises(ConfigError) as err:
        Knobs(**{field: value})
    assert str(err.value) == message


def test_declared_bounds_accept_what_they_declare():
    knobs = Knobs(rate=1, fraction=0.999, ceiling=math.inf, steps=2 ** 62, seed=2 ** 32 - 1, scale=-1e300)
    assert knobs.rate == 1.0 and isinstance(knobs.rate, float) and knobs.ceiling == math.inf
    assert coerce("1e-3", float, Where("x")) == 1e-3
    assert check(INT64.high, int, Where("x")) == 2 ** 63 - 1
    with pytest.raises(ConfigError, match=r"^x=9223372036854775808 must be an integer from -9223372036854775808 "):
        check(2 ** 63, int, Where("x"))
    with pytest.raises(ConfigError, match=r"^x=nan must be a finite number$"):
        check(float("nan"), float, Where("x"))  # config.json that babelzoo reads strictly too


def test_a_file_value_out_of_range_names_its_line():
    lines = {"fraction": 3}
    with pytest.raises(ConfigError, match=r"^k.yaml:3 fraction=1.5 must be in \[0, 1\)$"):
        build(Knobs, {"fraction": 1.5}, Where(file="k.yaml", lines=lines))


def test_model_overrides_are_typed_numbers_too():
    from babelzoo.zoo.factory import create_model

    with pytest.raises(ConfigError, match=r"^TransformerConfig.dropout=nan must be a finite number$"):
        create_model("xlmr_tiny", dropout=float("nan"))


GENERATION = dict(max_new_tokens=4, decoder_start_token_id=0, eos_token_id=1, pad_token_id=0, vocab_size=8,
                  num_beams=2)


@pytest.mark.parametrize("field, value, message", [
    ("length_penalty", float("nan"), "generate: length_penalty=nan must be a finite number"),
    ("length_penalty", float("inf"), "generate: length_penalty=inf must be a finite number"),
    ("temperature", float("inf"), "generate: temperature=inf must be a positive finite number"),
    ("temperature", float("nan"), "generate: temperature=nan must be a positive finite number"),
    ("top_p", float("nan"), "generate: top_p=nan must be in (0, 1]"),
])
def test_generation_options_refuse_values_that_change_results_silently(field, value, message):
    with pytest.raises(InputError) as err:
        GenerationSettings(**{**GENERATION, field: value})
    assert str(err.value) == message
    assert GenerationSettings(**{**GENERATION, "length_penalty": -2.0}).length_penalty == -2.0


def test_a_number_option_is_read_as_a_field_of_its_type():
    import argparse

    from babelzoo.options import option

    assert option(float)("1e-3") == 1e-3 and option(Seed)("4294967295") == 4294967295
    for hint, text, message in [(float, "nan", "'nan' must be a finite number"),
                                (float, "-inf", "'-inf' must be a finite number"),
                                (Seed, "-1", "'-1' must be in [0, 4294967295]"),
                                (int, "9223372036854775808", "'9223372036854775808' must be in "
                                                             "[-9223372036854775808, 9223372036854775807]"),
                                (Annotated[float, Range(0, 1, high_open=True)], "1", "'1' must be in [0, 1)")]:
        with pytest.raises(argparse.ArgumentTypeError) as err:
            option(hint)(text)
        assert str(err.value) == message
    with pytest.raises(ValueError):  # argparse words it: invalid int value: '1e3'
        option(int)("1e3")
    assert option(Annotated[float, Range(0, low_open=True, finite=False)])("inf") == float("inf")
