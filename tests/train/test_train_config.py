"""Recipes: YAML ⇄ TrainConfig 1:1, unknown keys named with file, line, a close match and every
valid key, --set overrides, type checks; the shipped recipes load."""

import re
from pathlib import Path

import pytest

from babelzoo.train.config import TrainConfig, apply_overrides, load_recipe, recipe_path

from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.zoo.config import ConfigError

SHIPPED = [path for path in sorted((Path(__file__).resolve().parents[2] / "babelzoo" / "recipes").glob("*.yaml"))
           if "\nkind: link_prediction" not in path.read_text(encoding="utf-8")]  # tests/knowledge/test_text_kge.py


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "recipe.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_recipe_maps_onto_train_config(tmp_path):
    path = write(tmp_path, "model: xlm_tiny\noptim: {lr: 1e-3, betas: [0.9, 0.98]}\nmax_steps: 7\nprecision: bf16\n"
                           "checkpoints: {every: 3}\nlogging: {progress: false}\nobjectives: {mlm: {max_length: 64}}\n")
    cfg = load_recipe(path)
    assert cfg.model == "xlm_tiny" and cfg.optim.lr == 1e-3 and cfg.optim.betas == (0.9, 0.98) and cfg.max_steps == 7
    assert cfg.optim == OptimConfig(lr=1e-3, betas=(0.9, 0.98))  # the rest of the group at its defaults
    assert cfg.checkpoints == CheckpointConfig(every=3) and cfg.logging == LoggingConfig(progress=False)
    assert cfg.precision == "bf16" and cfg.objectives == {"mlm": {"max_length": 64}}
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg  # round trip
    assert cfg.to_dict()["optim"]["betas"] == [0.9, 0.98]  # JSON's spelling


def test_the_flat_settings_of_earlier_versions_are_read_into_their_groups(tmp_path):
    flat = {"lr": 2e-3, "betas": [0.9, 0.98], "schedule": "cosine", "checkpoint_every": 7, "keep_checkpoints": 1,
            "resume": False, "checkpoint_format": "sharded", "log_every": 3, "progress": False, "peak_flops": 1e12}
    path = write(tmp_path, "".join(f"{k}: {v}\n".replace("False", "false") for k, v in flat.items()))
    cfg = load_recipe(path)
    assert cfg.optim == OptimConfig(lr=2e-3, betas=(0.9, 0.98), schedule="cosine")
    assert cfg.checkpoints == CheckpointConfig(every=7, keep=1, resume=False, format="sharded")
    assert cfg.logging == LoggingConfig(every=3, progress=False, peak_flops=1e12)
    assert TrainConfig.from_dict(flat) == cfg  # a config a run folder saved before the groups
    # --set in either spelling; the old one lands in the group, over the file's value
    assert load_recipe(path, ["lr=5e-4", "logging.every=9"]).optim.lr == 5e-4
    assert load_recipe(path, ["optim.lr=5e-4", "log_every=9"]).logging.every == 9
    # an error in an old key names its line and the setting's new place
    with pytest.raises(ConfigError, match=r"recipe.yaml:2: TrainConfig.optim.lr=-1.0 must be positive"):
        load_recipe(write(tmp_path, "seed: 1\nlr: -1\n"))
    with pytest.raises(ConfigError, match="'lr' and 'optim.lr' both set; 'lr' is the earlier spelling of 'optim.lr'"):
        load_recipe(write(tmp_path, "lr: 1e-3\noptim: {lr: 2e-3}\n"))


def test_replace_changes_only_the_settings_a_group_mapping_names():
    cfg = TrainConfig(optim=OptimConfig(lr=1e-2, schedule="constant"))
    assert cfg.replace(optim={"lr": 5e-4}).optim == OptimConfig(lr=5e-4, schedule="constant")
    assert cfg.replace(optim=OptimConfig(lr=5e-4)).optim.schedule == "linear"  # an object replaces the group
    with pytest.raises(ConfigError, match="unknown TrainConfig.optim key 'learning_rate'"):
        cfg.replace(optim={"learning_rate": 1})
    with pytest.raises(ConfigError, match="TrainConfig.optim.lr=-1.0 must be positive"):
        OptimConfig(lr=-1)


def test_unknown_key_names_file_line_close_match_and_valid_keys(tmp_path):
    path = write(tmp_path, "model: xlmr_tiny\nmax_steps: 5\nlearning_rate: 0.1\n")
    with pytest.raises(ConfigError) as err:
        load_recipe(path)
    message = str(err.value)
    assert f"{path}:3 TrainConfig.learning_rate: unknown TrainConfig key 'learning_rate'" in message
    assert "Valid keys:" in message and all(k in message for k in ("optim", "max_steps", "grad_accum", "precision"))
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        load_recipe(write(tmp_path, "batch_sise: 3\n"))


def test_set_overrides_parse_yaml_and_reach_into_mappings(tmp_path):
    path = write(tmp_path, "optim: {lr: 0.1}\nmodel_overrides: {hidden_size: 64}\n"
                           "objectives: {mlm: {max_length: 32}}\n")
    cfg = load_recipe(path, ["optim.lr=5e-4", "logging.progress=false", "optim.betas=[0.8,0.9]",
                             "model_overrides.num_layers=3", "objectives.mlm.masking.probability=0.2",
                             "output_dir=runs/x"])
    assert cfg.optim.lr == 5e-4 and cfg.logging.progress is False and cfg.optim.betas == (0.8, 0.9)
    assert cfg.output_dir == "runs/x"
    assert cfg.model_overrides == {"hidden_size": 64, "num_layers": 3}
    assert cfg.objectives == {"mlm": {"max_length": 32, "masking": {"probability": 0.2}}}
    # an objective's options are checked as the recipe is read, not after its data is
    with pytest.raises(ConfigError, match="TrainConfig.objectives.mlm.masking.rate: unknown MaskingConfig key 'rate'"):
        load_recipe(path, ["objectives.mlm.masking.rate=0.2"])
    with pytest.raises(ConfigError, match="unknown TrainConfig key 'optm'; did you mean 'optim'"):
        load_recipe(path, ["optm.lr=1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["lr"])
    with pytest.raises(ConfigError, match="TrainConfig.seed is not a mapping"):
        apply_overrides({}, ["seed.x=1"])


@pytest.mark.parametrize("text, fragment", [
    ("max_steps: ten\n", "recipe.yaml:1 TrainConfig.max_steps='ten' must be an integer"),
    ("precision: fp8\n", "recipe.yaml:1: TrainConfig.precision='fp8' must be one of 'fp32', 'bf16', 'fp16'"),
    ("seed: 1\nbatch_size: 0\n", "recipe.yaml:2: TrainConfig.batch_size=0 must be at least 1"),
    ("optim:\n  betas: [0.9]\n", "recipe.yaml:2: TrainConfig.optim.betas=(0.9,) must be two numbers"),
    ("optim: {betas: [a, 0.9]}\n", "recipe.yaml:1 TrainConfig.optim.betas[0]='a' must be a number, got str"),
    ("logging: {progress: 3}\n", "recipe.yaml:1 TrainConfig.logging.progress=3 must be true or false"),
    ("optim:\n  lr: -1\n", "recipe.yaml:2: TrainConfig.optim.lr=-1.0 must be positive"),
    ("optim: 3\n", "recipe.yaml:1 TrainConfig.optim=3 must be a mapping of OptimConfig fields"),
    ("checkpoints: {every: 0}\n", "recipe.yaml:1: TrainConfig.checkpoints.every=0 must be at least 1"),
    ("checkpoints: {eviry: 3}\n", "unknown CheckpointConfig key 'eviry'; did you mean 'every'"),
    ("- a\n- b\n", "a recipe must be a mapping"),
    ("lr: [1\n", "invalid YAML"),
])
def test_bad_values_are_reported_with_the_field(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as err:
        load_recipe(write(tmp_path, text))
    assert fragment in str(err.value)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_recipes_load(path):
    cfg = load_recipe(recipe_path(path.stem))
    if cfg.task:  # a fine-tuning recipe (babelzoo finetune): its task part checks itself
        from babelzoo.finetune.recipe import TaskSpec

        assert TaskSpec.from_dict(cfg.task).train and not cfg.objectives
    else:
        assert cfg.objectives and set(cfg.objectives) == set(cfg.data)
    import babelzoo

    assert cfg.model in babelzoo.list_models()


def test_unknown_recipe_name_suggests_the_shipped_ones_it_looks_like():
    with pytest.raises(ConfigError) as err:
        recipe_path("mlm_tin")
    assert str(err.value) == ("unknown recipe 'mlm_tin': no such file, nor a shipped recipe; did you mean 'mlm_tiny', "
                              "'mmlm_tiny', 'clmlm_tiny'? (every shipped recipe: babelzoo list recipes)")
    with pytest.raises(ConfigError, match=r"^unknown recipe 'no_such_recipe': no such file, nor a shipped recipe "
                                          r"\(every shipped recipe: babelzoo list recipes\)$"):
        recipe_path("no_such_recipe")


@pytest.mark.parametrize("model_dir", ["../model", "/tmp/model", "a/../..", "."])
def test_a_model_dir_outside_output_dir_is_refused_naming_the_field(model_dir, tmp_path):
    with pytest.raises(ConfigError, match=rf"TrainConfig.model_dir={re.escape(repr(model_dir))} must name a "
                                          r"folder inside output_dir"):
        TrainConfig(model_dir=model_dir)
    with pytest.raises(ConfigError, match=r"recipe.yaml:1: TrainConfig.model_dir="):
        load_recipe(write(tmp_path, f"model_dir: '{model_dir}'\n"))
    assert TrainConfig(model_dir="final/model").model_dir == "final/model"


def test_a_checkpoint_saved_with_the_flat_settings_resumes_under_the_groups():
    from babelzoo.train.identity import ResumeMismatch, check_same_run

    now = TrainConfig(optim=OptimConfig(lr=1e-3, schedule="constant"), checkpoints=CheckpointConfig(every=5))
    saved = {k: v for k, v in now.to_dict().items() if k not in ("optim", "checkpoints", "logging")}
    # as an earlier version saved it: flat, and without the settings added since (min_lr_ratio, peak_flops, ...)
    saved.update(optimizer="lamb", lr=2e-3, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-6, schedule="constant",
                 warmup_steps=0, max_grad_norm=1.0, checkpoint_every=50, keep_checkpoints=3, log_every=1)
    check_same_run("step-2", {"config": saved}, {"config": now.to_dict()}, 2)  # lr and the cadences may change
    with pytest.raises(ResumeMismatch, match=r"optim\.schedule: 'linear' \(checkpoint\) → 'constant' \(now\)"):
        check_same_run("step-2", {"config": {**saved, "schedule": "linear"}}, {"config": now.to_dict()}, 2)
    with pytest.raises(ResumeMismatch, match=r"optim\.min_lr_ratio: 0\.0 \(checkpoint\) → 0\.5 \(now\)"):
        check_same_run("step-2", {"config": saved}, {"config": now.replace(optim={"min_lr_ratio": 0.5}).to_dict()}, 2)
