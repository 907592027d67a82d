"""Fine-tuning end to end on small real files written here: recipes, model selection on the
source language only, per-language test accuracy, and the zero-shot guarantee by construction."""

import json
import re

import pytest
import torch
from topic_task import WORDS, recipe, write_tsv

import babelzoo
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.finetune import TaskSpec, run_finetune
from babelzoo.finetune.cli import finetune_main
from babelzoo.finetune.data import hold_out
from babelzoo.train.config import load_recipe, recipe_path
from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.checkpoint_io import read_weights

pytestmark = pytest.mark.usefixtures("one_thread")


def test_sequence_task_trains_selects_on_dev_and_tests_every_language(tmp_path, tokenizer_dir, topic_data):
    result = run_finetune(recipe(tmp_path, tokenizer_dir), data_dir=topic_data, log=lambda _: None)
    assert set(result["test"]) == {"eng", "xx", "yy"}
    assert result["labels"] == ["politics", "sport", "weather"]
    assert all(row["n"] == 30 for row in result["test"].values())
    assert result["test"]["eng"]["accuracy"] >= 0.9  # the topic word decides the label
    protocol = result["protocol"]
    assert protocol["selection"].endswith("topics/eng/dev.tsv") and protocol["max_steps"] == 48
    assert protocol["best_step"] == result["summary"]["best_step"] and protocol["pooling"] == "mean"
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["test"]["xx"]["accuracy"] == result["test"]["xx"]["accuracy"]
    best = babelzoo.from_pretrained(tmp_path / "run" / "best")
    assert best.config.head.labels == ("politics", "sport", "weather")
    assert all(torch.equal(v, result["model"].state_dict()[k]) for k, v in best.state_dict().items())


def test_zero_shot_never_reads_a_target_language_label(tmp_path, tokenizer_dir, topic_data):
    """By construction: rewrite every target-language test file (labels flipped) and the run
    trains, evaluates and selects identically; only the reported target accuracy changes."""
    first = run_finetune(recipe(tmp_path / "a", tokenizer_dir), data_dir=topic_data, log=lambda _: None)
    root = topic_data / "topics"
    rows = [line.split("\t") for line in (root / "xx" / "test.tsv").read_text().splitlines()[1:]]
    flip = {"weather": "sport", "sport": "politics", "politics": "weather"}
    write_tsv(root / "xx" / "test.tsv", [(i, flip[c], t) for i, c, t in rows])
    second = run_finetune(recipe(tmp_path / "b", tokenizer_dir), data_dir=topic_data, log=lambda _: None)
    assert first["summary"]["evaluations"] == second["summary"]["evaluations"]
    assert first["summary"]["best_step"] == second["summary"]["best_step"]
    a = read_weights(tmp_path / "a" / "run" / "best" / "model.safetensors")
    b = read_weights(tmp_path / "b" / "run" / "best" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert first["test"]["eng"] == second["test"]["eng"]
    assert first["test"]["xx"]["accuracy"] != second["test"]["xx"]["accuracy"]


CONLLU = """# sent_id = s{n}
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\t{noun}\t{noun}\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tis\tbe\tAUX\t_\t_\t0\troot\t_\t_
4\tbig\tbig\tADJ\t_\t_\t3\tamod\t_\t_

"""


def test_token_task_holds_back_a_dev_share_and_scores_words(tmp_path, tokenizer_dir):
    train = tmp_path / "en-ud-train.conllu"
    train.write_text("".join(CONLLU.format(n=i, noun=["sun", "rain", "law", "vote"][i % 4]) for i in range(60)),
                     encoding="utf-8")
    test = tmp_path / "en-ud-test.conllu"
    test.write_text("".join(CONLLU.format(n=i, noun=["sun", "rain", "law", "vote"][i % 4]) for i in range(60, 120)),
                    encoding="utf-8")
    cfg = recipe(tmp_path, tokenizer_dir, kind="token_classification", train=str(train), dev=None,
                 dev_fraction=0.1, test={"en": str(test)}, label_column="label", id_column=None, head={})
    result = run_finetune(cfg, log=lambda _: None)
    assert result["labels"][:3] == ["ADJ", "ADP", "ADV"] and len(result["labels"]) == 17
    assert result["test"]["en"]["n"] == 240 and result["test"]["en"]["truncated"] == 0
    assert result["test"]["en"]["accuracy"] >= 0.95
    assert "0.1 of" in result["protocol"]["selection"]


def test_held_out_share_is_seeded_and_disjoint():
    rows = list(range(100))
    train, dev = hold_out(rows, 0.1, seed=3)
    assert len(dev) == 10 and not set(train) & set(dev) and sorted(train + dev) == rows
    assert hold_out(rows, 0.1, seed=3) == (train, dev) and hold_out(rows, 0.1, seed=4)[1] != dev


@pytest.mark.parametrize("task, message", [
    ({"train": "a.tsv", "dev": "b.tsv", "colour": 1}, "unknown task key"),
    ({"train": "a.tsv"}, "hold back a share of train"),
    ({"train": "a.tsv", "dev": "b.tsv", "dev_fraction": 0.1}, "give one"),
    ({"train": "a.conllu", "dev": "b.conllu", "kind": "token_classification", "prefix": "query: "}, "sequence tasks"),
    ({"train": "a.tsv", "dev": "b.tsv", "kind": "regression"}, "must be one of"),
    ({"train": "a.tsv", "dev": "b.tsv", "head": {"labels": ["x"]}}, "come from task.kind and task.labels"),
])
def test_task_spec_errors_name_the_key(task, message):
    with pytest.raises(ConfigError, match=message):
        TaskSpec.from_dict(task)


def test_unset_data_dir_is_named(monkeypatch):
    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    spec = TaskSpec.from_dict({"train": "${BABELZOO_DATA_DIR}/x.tsv", "dev": "d.tsv"})
    with pytest.raises(ConfigError, match="pass --data-dir"):
        spec.resolve(None)


@pytest.mark.parametrize("name", ["sib200_e5_small", "sib200_tiny", "udpos_e5_small", "udpos_tiny"])
def test_shipped_finetune_recipes_are_valid(name, tmp_path):
    cfg = load_recipe(recipe_path(name))
    spec = TaskSpec.from_dict(cfg.task).resolve(tmp_path)
    assert spec.train.startswith(str(tmp_path)) and cfg.eval_every > 0


def test_cli_reports_a_bad_recipe_key_and_exits_2(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text("model: xlmr_tiny\ntask: {train: a.tsv, dev: b.tsv, colum: x}\n", encoding="utf-8")
    assert finetune_main(["--config", str(path)]) == 2
    assert "r.yaml:2 task.colum: unknown task key 'colum'; did you mean" in capsys.readouterr().err


def test_building_the_model_seeds_its_weights_and_leaves_the_global_rng_alone(tmp_path, tokenizer_dir, topic_data):
    from babelzoo.finetune.run import build_model, prepare_splits

    cfg = recipe(tmp_path, tokenizer_dir)
    spec = TaskSpec.from_dict(cfg.task).resolve(topic_data)
    labels = prepare_splits(cfg, spec)[2]
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first, _ = build_model(cfg, spec, labels)
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(9)
    second, _ = build_model(cfg, spec, labels)
    other, _ = build_model(cfg.replace(seed=1), spec, labels)
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(next(first.head.parameters()), next(other.head.parameters()))  # the seed decides


def test_cli_prints_each_accuracy_once_and_the_dev_score_to_4_places(tmp_path, tokenizer_dir, topic_data, capsys):
    cfg = recipe(tmp_path, tokenizer_dir, epochs=1)
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(cfg.to_dict()), encoding="utf-8")
    assert finetune_main(["--config", str(path), "--data-dir", str(topic_data)]) == 0
    out = capsys.readouterr().out.splitlines()
    for lang in ("eng", "xx", "yy"):
        assert len([line for line in out if line.split()[:1] == [lang]]) == 1, out
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    dev = [line for line in out if line.startswith("dev")]
    assert dev == [f"dev/accuracy (selection) {saved['dev']:.4f} at step {saved['protocol']['best_step']}"]
    assert f"mean without the source    {saved['mean_zero_shot']:.4f}" in out


def test_checkpoints_keep_only_the_touched_rows_of_adams_moments_and_resume_exactly(tmp_path, topic_data):
    """A large vocabulary of which training touches a few rows: the optimizer part stores those
    rows and their index, and an interrupted run resumes to the very weights of an
    uninterrupted one."""
    from babelzoo.train.checkpoint import read_part

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s", *(f"w{i}" for i in range(2100))]
    WordPieceTokenizer(vocab).save(tmp_path / "big")  # 2,118 rows x 32 = 67,776 elements: above the threshold

    def cfg(out, steps):
        return recipe(tmp_path, tmp_path / "big", epochs=None).replace(output_dir=str(tmp_path / out), max_steps=steps,
                                                                       checkpoints={"every": 3, "keep": 1},
                                                                       # the same rate whatever max_steps says,
                                                                       # so that 3 + 3 steps are 6
                                                                       optim={"schedule": "constant"})

    run_finetune(cfg("whole", 6), data_dir=topic_data, log=lambda _: None)
    run_finetune(cfg("split", 3), data_dir=topic_data, log=lambda _: None)
    resumed = run_finetune(cfg("split", 6), data_dir=topic_data, log=lambda _: None)
    assert resumed["summary"]["resumed_from"].endswith("step-00000003")
    step = tmp_path / "whole" / "checkpoints" / "step-00000006"
    a, b = read_weights(step / "model.safetensors"), read_weights(tmp_path / "split" / step.relative_to(
        tmp_path / "whole") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ours = read_part(tmp_path / "split" / "checkpoints" / "step-00000006", "optimizer")["state"]
    theirs = read_part(step, "optimizer")["state"]
    assert all(torch.equal(ours[i][k], theirs[i][k]) for i in theirs for k in theirs[i])
    skeleton = (step / "optimizer.json").read_text()
    shapes = re.findall(r'"__rows__": "[^"]+", "shape": \[(\d+), (\d+)\]', skeleton)
    assert shapes == [(str(len(vocab)), "32")] * 2  # exp_avg and exp_avg_sq of the word embeddings
    state = read_part(step, "optimizer")["state"]
    moments = next(s["exp_avg"] for s in state.values() if s["exp_avg"].shape == (len(vocab), 32))
    touched = int(moments.ne(0).any(1).sum())
    assert 0 < touched <= 20  # the 17 pieces the data uses, at most
    dense = 2 * len(vocab) * 32 * 4
    assert (step / "optimizer.safetensors").stat().st_size < dense / 2  # all moments: under half of these two


def test_frozen_parameters_have_no_optimizer_state(tmp_path, tokenizer_dir, topic_data):
    from babelzoo.train.checkpoint import read_part

    cfg = recipe(tmp_path, tokenizer_dir, epochs=None, freeze=["embeddings.word"]).replace(max_steps=2)
    result = run_finetune(cfg, data_dir=topic_data, log=lambda _: None)
    words = result["model"].state_dict()["embeddings.word.weight"].shape
    state = read_part(tmp_path / "run" / "checkpoints" / "step-00000002", "optimizer")["state"]
    assert state and all(s["exp_avg"].shape != words for s in state.values())


def test_an_explicit_max_steps_caps_task_epochs_and_the_log_says_which_won(tmp_path, tokenizer_dir, topic_data,
                                                                          caplog):
    """96 training rows in batches of 8 are 12 steps an epoch: task.epochs=4 alone trains 48;
    ``--set max_steps=3`` stops the run at 3, and the log says that max_steps capped it."""
    settings = recipe(tmp_path, tokenizer_dir, epochs=4).to_dict()
    del settings["max_steps"]  # the recipe leaves it to task.epochs
    path = tmp_path / "r.yaml"
    path.write_text(json.dumps(settings), encoding="utf-8")
    with caplog.at_level("INFO", logger="babelzoo"):
        assert finetune_main(["--config", str(path), "--data-dir", str(topic_data), "--set", "max_steps=3"]) == 0
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["protocol"]["max_steps"] == 3 and saved["summary"]["steps"] == 3
    assert "; 3 steps (max_steps=3 caps task.epochs=4 at 12 steps an epoch (48 steps))" in caplog.text


@pytest.mark.parametrize("epochs, max_steps, given, expected", [
    (4, 3, True, (3, "max_steps=3 caps task.epochs=4 at 12 steps an epoch (48 steps)")),
    (4, 100, True, (48, "task.epochs=4 at 12 steps an epoch, within max_steps=100")),
    (4, 3, False, (48, "task.epochs=4 at 12 steps an epoch")),  # a default max_steps caps nothing
    (0.5, 1000, False, (6, "task.epochs=0.5 at 12 steps an epoch")),
    (None, 7, False, (7, "max_steps=7")),
])
def test_training_steps_rule(epochs, max_steps, given, expected):
    from babelzoo.finetune.recipe import training_steps

    spec = TaskSpec(train="train.tsv", dev="dev.tsv", epochs=epochs)
    assert training_steps(spec, max_steps, given, train_size=100, global_batch=8) == expected


def test_a_finetune_run_has_the_shape_of_every_run(tmp_path, tokenizer_dir, topic_data):
    from babelzoo.finetune.run import build_finetune_run
    from babelzoo.train.run import Run

    run, testing = build_finetune_run(recipe(tmp_path, tokenizer_dir), data_dir=topic_data, log=lambda _: None)
    assert isinstance(run, Run) and run.config.max_steps == 48 and run.evaluator.metric == "dev/accuracy"
    assert testing.labels == ("politics", "sport", "weather") and set(testing.zero_shot.tests) == {"eng", "xx", "yy"}
    assert not (tmp_path / "run" / "results.json").exists()  # built, not trained
