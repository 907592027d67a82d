"""TensorBoard scalars, when tensorboard is installed, hold the logged window averages."""

import pytest

from babelzoo.train.logging import RunLogger


def test_tensorboard_scalars_are_window_averages(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    logger = RunLogger(tmp_path, total_steps=4, progress=False, tensorboard=True, log_every=2)
    for step, loss in enumerate([4.0, 2.0, 1.5, 0.5], start=1):
        logger.log({"step": step, "loss": loss, "tokens": 100, "step_time": 0.5})
    logger.close()
    events = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    losses = [(e.step, e.value) for e in events.Scalars("loss")]
    assert losses == [(2, 3.0), (4, 1.0)]
    assert [e.value for e in events.Scalars("tokens_per_s")] == [200.0, 200.0]
