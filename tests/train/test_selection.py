"""Model selection on the shared trainer: evaluation every N steps, the best model saved, early
stopping, exact resume of the selection state, and layer-wise learning-rate decay."""

import json
import re
import shutil

import pytest
import torch
from tiny_objectives import FixedMaskMLM, corpus, one_thread, tiny_model  # noqa: F401

import babelzoo
from babelzoo.errors import CheckpointError
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import OptimConfig
from babelzoo.train.optim import build_optimizer, layer_depth
from babelzoo.train.selection import Selection
from babelzoo.train.train_module import TrainModule
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.checkpoint_io import read_weights

pytestmark = pytest.mark.usefixtures("one_thread")


class ScriptedEvaluator:
    """Returns scripted dev scores (one per call) and records the step-time weights it saw."""

    metric = "dev/accuracy"

    def __init__(self, scores):
        self.scores, self.calls, self.seen = list(scores), 0, []

    def __call__(self, model):
        self.seen.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        assert not model.training
        score = self.scores[self.calls]
        self.calls += 1
        return {"dev/accuracy": score}


def config(tmp_path, **changes):
    settings = dict(output_dir=str(tmp_path), max_steps=8, batch_size=4, lr=1e-2, checkpoint_every=100,
                    progress=False, tensorboard=False, measure_mfu=False)
    return TrainConfig.from_dict({**settings, **changes})


def test_selection_keeps_the_strictly_best_and_counts_patience():
    s = Selection("dev/accuracy", patience=2)
    assert s.update(2, {"dev/accuracy": 0.5}) and s.best_step == 2
    assert not s.update(4, {"dev/accuracy": 0.5}) and s.since_best == 1 and not s.should_stop
    assert not s.update(6, {"dev/accuracy": 0.4}) and s.should_stop
    assert s.best == 0.5 and s.best_step == 2
    with pytest.raises(KeyError, match="not the selection metric"):
        s.update(8, {"dev/loss": 1.0})


def test_trainer_evaluates_every_n_steps_and_keeps_the_best_weights(tmp_path):
    evaluator = ScriptedEvaluator([0.2, 0.7, 0.5, 0.6])
    summary = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path, eval_every=2),
                      evaluator=evaluator).fit()
    assert [e["step"] for e in summary["evaluations"]] == [2, 4, 6, 8]
    assert summary["best_step"] == 4 and summary["best"] == 0.7 and not summary["stopped_early"]
    best = read_weights(tmp_path / "best" / "model.safetensors")
    for key, value in best.items():
        assert torch.equal(value, evaluator.seen[1][key]), key
    assert babelzoo.ModelConfig.from_json(tmp_path / "best" / "config.json").architecture == "xlmr_tiny"
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r.get("dev/accuracy") for r in records] == [None, 0.2, None, 0.7, None, 0.5, None, 0.6]
    assert records[5]["best dev/accuracy"] == 0.7


def test_early_stopping_ends_the_run_and_a_resume_does_not_restart_it(tmp_path):
    evaluator = ScriptedEvaluator([0.5, 0.4, 0.3, 0.9])
    summary = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path, eval_every=2, patience=2),
                      evaluator=evaluator).fit()
    assert summary["steps"] == 6 and summary["stopped_early"] and summary["best_step"] == 2
    again = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path, eval_every=2, patience=2),
                    evaluator=ScriptedEvaluator([])).fit()
    assert again["steps"] == 6 and again["steps_this_run"] == 0 and again["best_step"] == 2


def test_a_resumed_run_selects_exactly_as_an_uninterrupted_one(tmp_path):
    scores = [0.1, 0.3, 0.2, 0.35]
    # a constant rate, so that stopping at step 4 and raising max_steps continues the same run
    whole = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path / "a", eval_every=2,
                                                                      schedule="constant"),
                    evaluator=ScriptedEvaluator(scores)).fit()
    first = Trainer(tiny_model(), FixedMaskMLM(), corpus(64),
                    config(tmp_path / "b", eval_every=2, max_steps=4, checkpoint_every=4, schedule="constant"),
                    evaluator=ScriptedEvaluator(scores[:2])).fit()
    assert first["best_step"] == 4
    rest = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path / "b", eval_every=2,
                                                                     schedule="constant"),
                   evaluator=ScriptedEvaluator(scores[2:])).fit()
    assert rest["evaluations"] == whole["evaluations"]
    assert (rest["best"], rest["best_step"]) == (whole["best"], whole["best_step"]) == (0.35, 8)
    a = read_weights(tmp_path / "a" / "best" / "model.safetensors")
    b = read_weights(tmp_path / "b" / "best" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_without_selection_state_is_refused(tmp_path):
    Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path, max_steps=2, checkpoint_every=2)).fit()
    with pytest.raises(ValueError, match="without evaluation"):
        Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path, max_steps=4),
                evaluator=ScriptedEvaluator([1.0])).fit()


@pytest.mark.parametrize("name, depth", [
    ("model.embeddings.word.weight", 0), ("model.encoder.layers.0.attention.qkv.weight", 1),
    ("model.encoder.layers.1.ffn_norm.bias", 2), ("model.head.out.weight", 3), ("model.pooler.dense.bias", 3),
    ("objectives.classifier.weight", 3),
])
def test_layer_depth(name, depth):
    assert layer_depth(name, num_layers=2) == depth


def test_layer_wise_decay_scales_each_layers_learning_rate():
    model = babelzoo.create_model("xlmr_tiny", num_layers=2, head={"labels": ["a", "b"]})
    module = TrainModule(model, FixedMaskMLM())
    optimizer = build_optimizer(module, TrainConfig(optim=OptimConfig(lr=1e-3, layer_lr_decay=0.5, optimizer="adamw")))
    lr_of = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    names = dict(module.named_parameters())
    assert lr_of[id(names["model.head.out.weight"])] == pytest.approx(1e-3)
    assert lr_of[id(names["model.encoder.layers.1.ffn.up.weight"])] == pytest.approx(5e-4)
    assert lr_of[id(names["model.encoder.layers.0.ffn.up.weight"])] == pytest.approx(2.5e-4)
    assert lr_of[id(names["model.embeddings.word.weight"])] == pytest.approx(1.25e-4)
    decay_of = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert decay_of[id(names["model.encoder.layers.0.ffn.up.bias"])] == 0.0
    assert decay_of[id(names["model.encoder.layers.0.ffn.up.weight"])] == 0.01
    plain = build_optimizer(module, TrainConfig(optim=OptimConfig(lr=1e-3)))
    assert len(plain.param_groups) == 2 and {g["lr"] for g in plain.param_groups} == {1e-3}


def test_a_time_budget_evaluates_checkpoints_and_stops(tmp_path, monkeypatch):
    """max_seconds on the CPU clock: the step that spends the budget is the last; the run
    evaluates there and leaves a checkpoint of it."""
    import babelzoo.train.trainer as trainer_module

    ticks = iter(range(0, 1000, 10))  # each read of the clock: 10 s later
    monkeypatch.setattr(trainer_module.time, "process_time", lambda: float(next(ticks)))
    evaluator = ScriptedEvaluator([0.4])
    summary = Trainer(tiny_model(), FixedMaskMLM(), corpus(64),
                      config(tmp_path, max_seconds=25.0, budget_clock="cpu"), evaluator=evaluator).fit()
    assert summary["steps"] == 3 and summary["out_of_time"] and summary["budget_seconds_used"] == 40.0
    assert evaluator.calls == 1 and summary["best_step"] == 3
    assert (tmp_path / "checkpoints" / "step-00000003").is_dir()
    with pytest.raises(ValueError, match="max_seconds=0.0 must be positive"):
        config(tmp_path, max_seconds=0.0)


def test_a_failed_save_of_the_best_model_is_evaluated_again_on_resume(tmp_path, full_disk_on_save_best):
    """The best step a checkpoint records is the one best/ holds: when writing best/ fails at
    the last evaluation, the emergency checkpoint keeps the earlier best, and the rerun evaluates
    that step again, writes best/ and ends as an uninterrupted run."""
    whole = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(tmp_path / "whole", max_steps=4, eval_every=2),
                    evaluator=ScriptedEvaluator([0.2, 0.7])).fit()
    full_disk_on_save_best(2)
    run = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="emergency checkpoint"), pytest.raises(OSError, match="No space left"):
        Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(run, max_steps=4, eval_every=2),
                evaluator=ScriptedEvaluator([0.2, 0.7])).fit()
    state = json.loads((run / "checkpoints" / "step-00000004" / "trainer.json").read_text())
    assert state["step"] == 4 and state["selection"]["best_step"] == 2
    assert [e["step"] for e in state["selection"]["history"]] == [2]
    evaluator = ScriptedEvaluator([0.7])
    again = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(run, max_steps=4, eval_every=2),
                    evaluator=evaluator).fit()
    assert evaluator.calls == 1 and again["steps_this_run"] == 0
    assert again["evaluations"] == whole["evaluations"] and (again["best"], again["best_step"]) == (0.7, 4)
    a = read_weights(tmp_path / "whole" / "best" / "model.safetensors")
    b = read_weights(run / "best" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # the checkpoint now records that evaluation: a further rerun evaluates nothing
    assert Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(run, max_steps=4, eval_every=2),
                   evaluator=ScriptedEvaluator([])).fit()["best_step"] == 4


def test_a_missing_best_model_is_written_again_or_named_with_the_fix(tmp_path):
    """best/ gone under a finished run: the weights resumed are the best step's when it is the
    last one, and are written again; an earlier best step's are not kept, and the error says so."""
    run = tmp_path / "run"
    Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(run, max_steps=4, eval_every=2),
            evaluator=ScriptedEvaluator([0.2, 0.7])).fit()
    saved = read_weights(run / "best" / "model.safetensors")
    shutil.rmtree(run / "best")
    again = Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(run, max_steps=4, eval_every=2),
                    evaluator=ScriptedEvaluator([])).fit()
    assert again["best_step"] == 4
    restored = read_weights(run / "best" / "model.safetensors")
    assert saved.keys() == restored.keys() and all(torch.equal(saved[k], restored[k]) for k in saved)

    other = tmp_path / "other"
    Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(other, max_steps=4, eval_every=2),
            evaluator=ScriptedEvaluator([0.7, 0.2])).fit()
    (other / "best" / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=rf"^{re.escape(str(other / 'best'))}: holds no saved model, but the "
                                              r"checkpoint resumed records step 2 as the best .* train it again: "
                                              rf"remove {re.escape(str(other / 'checkpoints'))}"):
        Trainer(tiny_model(), FixedMaskMLM(), corpus(64), config(other, max_steps=4, eval_every=2),
                evaluator=ScriptedEvaluator([])).fit()
