"""babelzoo._threads: the thread count a run or an encoder uses — the candidates, the choice
from timed products, the caller's overrides and bounds, and the count restored afterwards."""

from __future__ import annotations

import pytest
import torch

from babelzoo import _threads as T
from babelzoo.errors import ConfigError


@pytest.fixture
def two_threads(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(T.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv(T.ENV, raising=False)
    yield
    torch.set_num_threads(before)


def test_candidates_halve_down_to_one():
    assert T.candidates(8) == [8, 4, 2, 1] and T.candidates(6) == [6, 3, 1] and T.candidates(1) == [1]


@pytest.mark.parametrize("times, chosen", [({2: 0.5, 1: 1.0}, 2),    # two threads twice as fast: two
                                           ({2: 1.0, 1: 0.95}, 1),   # a busy core: one thread is faster
                                           ({2: 0.9, 1: 1.0}, 1),    # within 15%: the fewer threads
                                           ({4: 0.30, 2: 0.33, 1: 1.0}, 2)])
def test_the_fewest_threads_within_15_percent_of_the_fastest_are_chosen(two_threads, monkeypatch, times, chosen):
    monkeypatch.setattr(T, "allowed_threads", lambda: max(times))
    asked = []
    monkeypatch.setattr(T, "product_seconds", lambda width, threads: asked.append((width, threads)) or times)
    threads, why = T.choose_threads(384)
    assert threads == chosen and asked == [(384, T.candidates(max(times)))] and "width 384" in why


def test_the_caller_bounds_and_overrides_the_choice(two_threads, monkeypatch):
    monkeypatch.setattr(T, "product_seconds", lambda *a: pytest.fail("no probe when the count is given"))
    assert T.choose_threads(128, requested=3) == (3, "set by the caller")
    monkeypatch.setenv(T.ENV, "1")
    assert T.choose_threads(128) == (1, "BABELZOO_THREADS=1")
    monkeypatch.delenv(T.ENV)
    torch.set_num_threads(1)  # a process told to use one thread uses one
    assert T.choose_threads(128) == (1, "one thread allowed")


@pytest.mark.parametrize("value", ["two", "0"])
def test_a_bad_environment_count_names_the_variable(two_threads, monkeypatch, value):
    monkeypatch.setenv(T.ENV, value)
    with pytest.raises(ConfigError, match="BABELZOO_THREADS"):
        T.choose_threads(128)


def test_the_probe_times_every_candidate_and_restores_the_count(two_threads):
    times = T.product_seconds(64, [2, 1])
    assert set(times) == {2, 1} and all(0 < t < 1 for t in times.values())
    assert torch.get_num_threads() == 2


def test_the_count_is_set_for_the_block_only(two_threads):
    with pytest.raises(RuntimeError):
        with T.cpu_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2


def test_the_trainer_and_the_encoder_run_with_the_chosen_count(two_threads, tmp_path, monkeypatch):
    import babelzoo
    from babelzoo.datasets.specials import SpecialIds
    from babelzoo.objectives.mlm import MLM
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
    from babelzoo.train.trainer import Trainer

    seen = []
    model = babelzoo.create_model("xlmr_tiny", vocab_size=50, hidden_size=32, intermediate_size=64)
    model.register_forward_pre_hook(lambda *a: seen.append(torch.get_num_threads()))
    specials = SpecialIds(pad=1, cls=0, sep=2, unk=4, mask=3, vocab_size=50)
    data = [list(range(5, 5 + n)) for n in range(3, 20)]
    config = TrainConfig(output_dir=str(tmp_path / "run"), max_steps=2, batch_size=4,
                         optim=OptimConfig(optimizer="adamw"), checkpoints=CheckpointConfig(every=2),
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), threads=1,
                         device="cpu")
    summary = Trainer(model, MLM(specials, max_length=24), data, config).fit()
    assert summary["cpu_threads"] == 1 and set(seen) == {1} and torch.get_num_threads() == 2
    seen.clear()
    monkeypatch.setenv(T.ENV, "1")
    from babelzoo.zoo.sentences import embed_rows

    embed_rows(model, [[0, 7, 8, 2], [0, 9, 2]], pad=1)
    assert set(seen) == {1} and torch.get_num_threads() == 2


def test_the_docs_quote_the_committed_contention_run():
    import json
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    report = json.loads((repo / "benchmarks/results/cpu_contention/xeon.json").read_text(encoding="utf-8"))["results"]
    readme = (repo / "docs" / "performance.md").read_text(encoding="utf-8").replace("\n", " ")
    demo = report["demo"]["contended_s"] / report["demo"]["quiet_s"]
    every = report["cells"]["every core"]
    steps = every["one competitor"]["step_s"] / every["quiet"]["step_s"]
    assert f"took {demo:.2f}× its quiet time" in readme and f"{steps:.2f}× slower" in readme
    assert demo <= 2.5 and report["cells"]["chosen"]["one competitor"]["threads"] == 1
