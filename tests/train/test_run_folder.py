"""A training run writes only into a new or empty ``output_dir`` or one a run of the same identity
wrote: a user's folder or another run's is refused before anything is written there, naming the
folder and its files or the differences; the same run still resumes (and a folder of checkpoints
from before runs recorded themselves too); pre-training and KG-embedding runs follow the rule.
Fine-tuning runs: tests/finetune/test_finetune_folder.py."""

import json
import re
import shutil

import pytest
import yaml
from tiny_objectives import FixedMaskMLM, corpus, one_thread, tiny_model  # noqa: F401

from babelzoo.knowledge import GraphKB, LinkPredictionData, create_kge, train_kge
from babelzoo.knowledge.link_prediction import KGETrainConfig
from babelzoo.train.cli import pretrain_main
from babelzoo.train.config import TrainConfig
from babelzoo.train.identity import ResumeMismatch
from babelzoo.train.run_folder import RUN_RECORD, RunFolderNotOwned
from babelzoo.train.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


def fit(output_dir, **changes) -> dict:
    settings = dict(output_dir=str(output_dir), max_steps=2, batch_size=4, lr=1e-2, checkpoint_every=100,
                    progress=False, tensorboard=False, measure_mfu=False, device="cpu")
    return Trainer(tiny_model(), FixedMaskMLM(), corpus(32), TrainConfig.from_dict({**settings, **changes})).fit()


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def mine(tmp_path):
    """A user's folder with a summary and a metrics log of their own (a line of step 0 among them)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "summary.json").write_text('{"accuracy": 0.91}\n')
    (folder / "metrics.jsonl").write_text('{"step": 0, "loss": 3.5}\n{"step": 7, "loss": 1.2}\n')
    return folder


def test_a_users_summary_and_metrics_are_refused_untouched(mine):
    before = snapshot(mine)
    with pytest.raises(RunFolderNotOwned, match=rf"^output_dir {re.escape(str(mine))}: not a folder a babelzoo "
                                                r"training run wrote \(it holds metrics.jsonl, summary.json\); "
                                                r"nothing was written there: choose a new or empty output_dir"):
        fit(mine)
    assert snapshot(mine) == before


def test_another_runs_folder_is_refused_with_the_differences(tmp_path):
    run = tmp_path / "run"
    fit(run)
    shutil.rmtree(run / "checkpoints")  # its log, summary and record stay
    before = snapshot(run)
    with pytest.raises(ResumeMismatch, match=rf"^output_dir {re.escape(str(run))} was written by a different "
                                             "run") as err:
        fit(run, seed=1)
    assert "seed: 0 (that run) → 1 (now)" in str(err.value)
    assert snapshot(run) == before


def test_the_same_run_resumes_and_counts_only_its_own_steps(tmp_path):
    run = tmp_path / "run"
    assert fit(run)["steps"] == 2
    summary = fit(run, max_steps=3, lr=5e-3)  # more steps and another rate: the same run
    assert summary["resumed_from"].endswith("step-00000002")
    assert (summary["steps"], summary["steps_this_run"]) == (3, 1)
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    record = json.loads((run / RUN_RECORD).read_text())
    assert (record["written_by"], record["what"]) == ("babelzoo", "training run")
    assert record["run"]["config"]["max_steps"] == 2 and record["run"]["config"]["seed"] == 0
    assert record["run"]["objectives"]["objective"]["class"] == "FixedMaskMLM"
    assert record["run"]["model"]["text"]["num_layers"] == tiny_model().config.text.num_layers


def test_a_run_folder_from_before_the_record_resumes_and_gets_it(tmp_path):
    run = tmp_path / "run"
    fit(run)
    (run / RUN_RECORD).unlink()  # as a run written before runs recorded themselves
    summary = fit(run, max_steps=3)
    assert summary["resumed_from"].endswith("step-00000002") and summary["steps"] == 3
    assert json.loads((run / RUN_RECORD).read_text())["run"]["config"]["max_steps"] == 3


def test_a_folder_holding_only_an_unfinished_record_is_taken(tmp_path):
    """A run refused or stopped before it wrote anything leaves only its record: not a run to keep."""
    run = tmp_path / "run"
    run.mkdir()
    (run / RUN_RECORD).write_text(json.dumps({"written_by": "babelzoo", "what": "training run",
                                              "run": {"config": {"seed": 5}}}))
    assert fit(run)["steps"] == 2
    assert json.loads((run / RUN_RECORD).read_text())["run"]["config"]["seed"] == 0


def test_pretrain_refuses_a_users_folder_before_its_tokenizer_is_trained(tmp_path, mine, capsys):
    text = tmp_path / "de.txt"
    words = ["der", "Hund", "schläft", "heute", "im", "Garten", "die", "Katze", "läuft", "morgen", "nach", "Hause"]
    text.write_text("\n".join(" ".join(words[(i * k) % len(words)] for k in range(1, 7)) + f" {i}" for i in range(200))
                    + "\n", encoding="utf-8")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": "xlm_tiny", "model_overrides": {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64},
        "tokenizer": {"vocab_size": 60, "model_type": "unigram"}, "objectives": {"mlm": {"max_length": 16}},
        "data": {"mlm": [{"kind": "text", "path": str(text), "lang": "de"}]}, "max_steps": 2, "batch_size": 4,
        "progress": False, "tensorboard": False}), encoding="utf-8")
    assert pretrain_main(["--config", str(recipe), "--set", f"output_dir={tmp_path / 'run'}"]) == 0  # a new folder
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2
    capsys.readouterr()
    before = snapshot(mine)
    assert pretrain_main(["--config", str(recipe), "--set", f"output_dir={mine}"]) == 2
    err = capsys.readouterr().err
    assert f"output_dir {mine}: not a folder a babelzoo training run wrote (it holds metrics.jsonl, " \
           "summary.json)" in err
    assert snapshot(mine) == before  # no tokenizer/, no cache/


def test_a_kg_embedding_run_refuses_a_users_folder(mine):
    kb = GraphKB("chain")
    for i in range(5):
        kb.add_triple(f"e{i}", "next", f"e{i + 1}")
    data = LinkPredictionData.from_kb(kb)
    data.valid = data.test = data.train
    before = snapshot(mine)
    with pytest.raises(RunFolderNotOwned, match="not a folder a babelzoo training run wrote"):
        train_kge(create_kge("transe", data.num_entities, data.num_relations, 8), data,
                  KGETrainConfig(epochs=1, batch_size=5), output_dir=mine)
    assert snapshot(mine) == before


def test_a_step_0_line_is_not_counted_as_a_step(tmp_path):
    """The trainer's records start at step 1; a line without a step of at least 1 is not one."""
    run = tmp_path / "run"
    fit(run)
    log = run / "metrics.jsonl"
    log.write_text('{"step": 0}\n[1, 2]\n' + log.read_text())
    assert fit(run, max_steps=3)["steps"] == 3
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [1, 2, 3]

