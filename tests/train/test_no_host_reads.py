"""The training step does not read the device: over 20 steps between two log points, the
trainer, the objectives and the optimizer never call ``item``/``float``/``int``/``bool``/
``tolist`` on a tensor (on a GPU each is a sync that stalls the queue); the 20 records are read
back at the log point in one transfer. What remains are the model's data-dependent shape
decisions (``babelzoo.zoo``: the masked positions' count, whether a batch has padding)."""

import collections
import sys

import pytest
import torch
from tiny_objectives import corpus, one_thread, tiny_model  # noqa: F401

from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.classification import SequenceClassification
from babelzoo.objectives.mlm import MLM
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.data import DataStream
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.model_config import HeadConfig
from babelzoo.zoo.build import with_head

pytestmark = pytest.mark.usefixtures("one_thread")

READS = ("item", "__float__", "__int__", "__bool__", "__index__", "tolist")
SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=72)


class ReadCounter:
    """Counts tensor reads by the module that makes them, while ``active``."""

    def __init__(self, monkeypatch):
        self.active, self.by_module = False, collections.Counter()
        for name in READS:
            original = getattr(torch.Tensor, name)

            def read(tensor, *args, _name=name, _original=original, **kwargs):
                if self.active:
                    caller = sys._getframe(1).f_globals.get("__name__", "?")
                    self.by_module[(caller, _name)] += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, read)

    def watch(self, function):
        def watched(*args, **kwargs):
            self.active = True
            try:
                return function(*args, **kwargs)
            finally:
                self.active = False
        return watched

    def pause(self, function):
        def paused(*args, **kwargs):
            was, self.active = self.active, False
            try:
                return function(*args, **kwargs)
            finally:
                self.active = was
        return paused


def run_counted(monkeypatch, tmp_path, model, objective, data, **changes):
    counter = ReadCounter(monkeypatch)
    reads = []
    original_read_records = Trainer.read_records

    def read_records(trainer, records):
        reads.append([r["step"] for r in records])
        return original_read_records(trainer, records)

    monkeypatch.setattr(Trainer, "train_step", counter.watch(Trainer.train_step))
    monkeypatch.setattr(DataStream, "next_step", counter.pause(DataStream.next_step))  # collation is host work
    monkeypatch.setattr(Trainer, "read_records", read_records)
    settings = dict(output_dir=str(tmp_path), max_steps=20, log_every=20, checkpoint_every=20, batch_size=8,
                    optimizer="adamw", lr=1e-3, max_grad_norm=1.0, progress=False, tensorboard=False,
                    measure_mfu=False, num_workers=0)
    settings.update(changes)
    summary = Trainer(model, objective, data, TrainConfig.from_dict(settings)).fit()
    return counter.by_module, reads, summary


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_masked_lm_steps_read_nothing_until_the_log_point(monkeypatch, tmp_path, precision):
    by_module, reads, summary = run_counted(monkeypatch, tmp_path, tiny_model(), MLM(SPECIALS, max_length=24),
                                            corpus(64), precision=precision)
    assert reads == [list(range(1, 21))]  # one read-back, of all 20 records, at the log point
    assert summary["steps"] == 20 and summary["skipped_steps"] == 0
    outside_model = {key: n for key, n in by_module.items() if not key[0].startswith("babelzoo.zoo")}
    assert outside_model == {}, outside_model
    assert not any(name in ("item", "__float__") for _, name in by_module)


def test_fine_tuning_steps_read_nothing_until_the_log_point(monkeypatch, tmp_path):
    model = with_head(tiny_model(), HeadConfig.from_dict({"kind": "sequence_classification", "labels": ["a", "b"]}))
    g = torch.Generator().manual_seed(0)
    data = [(row, [0] * len(row), int(torch.randint(2, (1,), generator=g))) for row in
            ([0, *r[:10], 2] for r in corpus(48))]
    by_module, reads, _ = run_counted(monkeypatch, tmp_path, model, SequenceClassification(SPECIALS, max_length=24, num_labels=2),
                                      data)
    assert reads == [list(range(1, 21))]
    outside_model = {key: n for key, n in by_module.items() if not key[0].startswith("babelzoo.zoo")}
    assert outside_model == {}, outside_model


def test_the_records_read_back_hold_plain_numbers(tmp_path):
    import json

    config = TrainConfig(output_dir=str(tmp_path), max_steps=6,
                         logging=LoggingConfig(every=3, progress=False, tensorboard=False, measure_mfu=False),
                         checkpoints=CheckpointConfig(every=6), optim=OptimConfig(optimizer="adamw"), batch_size=8)
    Trainer(tiny_model(), MLM(SPECIALS, max_length=24), corpus(32), config).fit()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    for r in records:
        assert isinstance(r["loss"], float) and r["loss"] > 0 and isinstance(r["tokens"], int) and r["tokens"] > 0
        assert r["skipped"] is False and r["grad_norm"] > 0 and 0 <= r["accuracy"] <= 1
        assert r["tokens_per_s"] == pytest.approx(r["tokens"] / r["step_time"])
