"""The one ``${VAR}`` expander of recipes and configs (babelzoo._files.expand_path): its rules,
tested here once, and each consumer (pre-training data, fine-tuning tasks, leaderboard models
and folders) shown to go through it."""

import os
import re

import pytest

from babelzoo._files import expand_path
from babelzoo.errors import CheckpointError, ConfigError
from babelzoo.typed import Where


def test_variables_home_and_dollar():
    env = {"DATA": "/d", "LANG_DIR": "de"}
    assert expand_path("${DATA}/$LANG_DIR/x.txt", "p", env) == "/d/de/x.txt"
    assert expand_path("~/x", "p", {}) == os.path.expanduser("~/x") != "~/x"
    assert expand_path("a$$b", "p", {}) == "a$b"
    assert expand_path("plain/path.txt", "p", {}) == "plain/path.txt"


def test_an_unset_variable_is_named_with_the_place_and_the_hint():
    with pytest.raises(ConfigError, match=r"^data.mlm\[0\].path: '\$\{NOPE\}/x' names 'NOPE', which is not set"
                                          r" \(set it\)$"):
        expand_path("${NOPE}/x", "data.mlm[0].path", {"DATA": "/d"}, hint=" (set it)")


def test_a_dollar_that_starts_no_variable_is_refused():
    with pytest.raises(ConfigError, match=r"^p: 'costs \$5' has a '\$' that starts no \$\{VAR\} \(write \$\$"):
        expand_path("costs $5", "p", {})


def test_the_environment_is_the_default(monkeypatch):
    monkeypatch.setenv("BABELZOO_TEST_EXPAND", "/from/env")
    assert expand_path("${BABELZOO_TEST_EXPAND}/a", "p") == "/from/env/a"


# --- its consumers ---------------------------------------------------------------------------

def test_pretraining_sources_expand_their_paths(monkeypatch, tmp_path):
    from babelzoo.datasets.sources import parse_source

    monkeypatch.delenv("BABELZOO_TEST_NOPE", raising=False)
    source = parse_source({"kind": "text", "path": "${BABELZOO_TEST_NOPE}/de.txt", "lang": "de"},
                          Where("data.mlm[0]"))
    with pytest.raises(ConfigError, match=r"^data.mlm\[0\].path: '\$\{BABELZOO_TEST_NOPE\}/de.txt' names "
                                          r"'BABELZOO_TEST_NOPE', which is not set$"):
        source.load()
    (tmp_path / "de.txt").write_text("Hallo Welt\n", encoding="utf-8")
    monkeypatch.setenv("BABELZOO_TEST_NOPE", str(tmp_path))
    source = parse_source({"kind": "text", "path": "${BABELZOO_TEST_NOPE}/de.txt", "lang": "de"},
                          Where("data.mlm[0]"))
    source.load()
    assert source.texts(None) == {"de": ["Hallo Welt"]}


def test_finetuning_tasks_expand_their_paths(monkeypatch, tmp_path):
    from babelzoo.finetune.recipe import TaskSpec

    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    spec = TaskSpec.from_dict({"train": "${BABELZOO_DATA_DIR}/t.tsv", "dev": "~/d.tsv", "test": "$$x/*/t.tsv"})
    with pytest.raises(ConfigError, match=r"^task.train: '\$\{BABELZOO_DATA_DIR\}/t.tsv' names 'BABELZOO_DATA_DIR', "
                                          r"which is not set \(for BABELZOO_DATA_DIR, pass --data-dir\)$"):
        spec.resolve()
    resolved = spec.resolve(tmp_path)
    assert (resolved.train, resolved.dev, resolved.test) == (f"{tmp_path}/t.tsv", os.path.expanduser("~/d.tsv"),
                                                             "$x/*/t.tsv")


def test_leaderboard_folders_expand_their_paths(monkeypatch, tmp_path):
    from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder

    monkeypatch.delenv("BABELZOO_TEST_NOPE", raising=False)
    for kind in ("checkpoint", "kge"):
        with pytest.raises(ConfigError, match=r"^model 'm': source: '\$\{BABELZOO_TEST_NOPE\}/run' names "
                                              r"'BABELZOO_TEST_NOPE', which is not set$"):
            build_encoder(ModelSpec("m", kind=kind, source="${BABELZOO_TEST_NOPE}/run"))
    monkeypatch.setenv("BABELZOO_TEST_NOPE", str(tmp_path))
    with pytest.raises(CheckpointError, match=f"^{re.escape(str(tmp_path / 'run'))}: not a checkpoint directory"):  # expanded
        build_encoder(ModelSpec("m", kind="checkpoint", source="${BABELZOO_TEST_NOPE}/run"))


def test_leaderboard_config_folders_expand(monkeypatch, tmp_path):
    from babelzoo.evaluation.cli import build_parser, run_eval

    monkeypatch.delenv("BABELZOO_TEST_NOPE", raising=False)
    config = tmp_path / "board.yaml"
    config.write_text("tasks: [tatoeba]\nmodels: [{name: m, kind: peer, source: muse_v3}]\n"
                      "data_dir: ${BABELZOO_TEST_NOPE}/data\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{config}: data_dir: '\$\{{BABELZOO_TEST_NOPE\}}/data' names "
                                          r"'BABELZOO_TEST_NOPE', which is not set$"):
        run_eval(build_parser().parse_args(["--config", str(config)]))
