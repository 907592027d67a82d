"""A fine-tuning run keeps to its own output_dir: a user's folder (their results.json) is refused
before any work."""

import json

import pytest
from topic_task import recipe

from babelzoo.finetune.cli import finetune_main

pytestmark = pytest.mark.usefixtures("one_thread")


def config(tmp_path, tokenizer_dir):
    """Four steps, evaluated once, at the end."""
    return recipe(tmp_path, tokenizer_dir, epochs=None).replace(max_steps=4, eval_every=0)


def test_the_cli_refuses_a_users_results_json_untouched(tmp_path, tokenizer_dir, topic_data, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text('{"test": {"deu": {"accuracy": 0.93}}}\n')
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(config(tmp_path, tokenizer_dir).to_dict()), encoding="utf-8")
    code = finetune_main(["--config", str(path), "--data-dir", str(topic_data), "--set", f"output_dir={mine}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines()[-1] == (f"babelzoo finetune: output_dir {mine}: not a folder a babelzoo training "
                                            "run wrote (it holds results.json); nothing was written there: choose a "
                                            "new or empty output_dir, or move those files out")
    assert [p.name for p in mine.iterdir()] == ["results.json"]
    assert json.loads((mine / "results.json").read_text()) == {"test": {"deu": {"accuracy": 0.93}}}

