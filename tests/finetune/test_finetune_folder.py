"""A fine-tuning run keeps to its own output_dir: a user's folder (their results.json) is refused
before any work, and a run whose best/ could not be written is completed by the rerun rather than
stuck on the missing weights."""

import json

import pytest
import torch
from topic_task import recipe

from babelzoo.finetune import run_finetune
from babelzoo.finetune.cli import finetune_main
from babelzoo.zoo.checkpoint_io import read_weights

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


def test_a_failed_save_of_best_is_completed_by_the_rerun(tmp_path, tokenizer_dir, topic_data, full_disk_on_save_best):
    calls = full_disk_on_save_best(1)
    cfg = config(tmp_path, tokenizer_dir)
    with pytest.warns(RuntimeWarning, match="emergency checkpoint"), pytest.raises(OSError, match="No space left"):
        run_finetune(cfg, data_dir=topic_data, log=lambda _: None)
    run = tmp_path / "run"
    assert not (run / "best").exists() and not (run / "results.json").exists()
    result = run_finetune(cfg, data_dir=topic_data, log=lambda _: None)
    assert len(calls) == 2 and result["summary"]["steps_this_run"] == 0
    assert result["protocol"]["best_step"] == 4 and [e["step"] for e in result["summary"]["evaluations"]] == [4]
    best = read_weights(run / "best" / "model.safetensors")
    state = result["model"].state_dict()
    assert all(torch.equal(value, state[key]) for key, value in best.items())
    saved = json.loads((run / "results.json").read_text())
    assert saved["protocol"]["best_step"] == 4 and set(saved["test"]) == {"eng", "xx", "yy"}
