"""The trainer under faults: an unexpected exception leaves an emergency checkpoint (when the
state is finite) that resumes; a full disk leaves no half-written checkpoint behind; a pickle
that would run code is refused without advice to run it."""

import errno
import os
import pickle
import warnings

import pytest
import torch

from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.mlm import MLM
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.config import ConfigError
from babelzoo.zoo.factory import create_model
from babelzoo.errors import CheckpointError
from babelzoo.zoo.checkpoint_io import read_weights

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=64)
ROWS = [[5 + (i * 7 + j) % 50 for j in range(6 + i % 5)] for i in range(48)]


class FailingMLM(MLM):
    """MLM that raises on one forward call, optionally poisoning a weight first."""

    def __init__(self, fail_at: int, poison: bool = False):
        super().__init__(SPECIALS, max_length=32, use_language_ids=False)
        # kept under other names: the fault is not a setting of the run (resume compares those)
        self._fail_at, self._poison, self._count = fail_at, poison, 0

    def forward(self, model, batch):
        self._count += 1
        if self._count == self._fail_at:
            if self._poison:
                with torch.no_grad():
                    next(model.parameters()).fill_(float("nan"))
            raise RuntimeError("a bug in step code")
        return super().forward(model, batch)


def tiny():
    torch.manual_seed(0)
    return create_model("xlmr_tiny", vocab_size=64, num_layers=1, max_positions=32)


def config(tmp_path, **changes):
    settings = dict(output_dir=str(tmp_path / "run"), max_steps=8, batch_size=4, lr=1e-3, checkpoint_every=100,
                    progress=False, tensorboard=False, measure_mfu=False, device="cpu")
    return TrainConfig.from_dict({**settings, **changes})


def checkpoints(tmp_path):
    folder = tmp_path / "run" / "checkpoints"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_an_exception_leaves_an_emergency_checkpoint_that_resumes(tmp_path):
    with pytest.warns(RuntimeWarning, match=r"RuntimeError at step 5: emergency checkpoint .*step-00000004 written"):
        with pytest.raises(RuntimeError, match="a bug in step code"):
            Trainer(tiny(), FailingMLM(fail_at=5), ROWS, config(tmp_path)).fit()
    assert checkpoints(tmp_path) == ["step-00000004"]
    summary = Trainer(tiny(), FailingMLM(fail_at=0), ROWS, config(tmp_path)).fit()
    assert summary["resumed_from"].endswith("step-00000004") and summary["steps"] == 8
    assert summary["steps_this_run"] == 4


def test_no_emergency_checkpoint_of_a_non_finite_state(tmp_path):
    with pytest.warns(RuntimeWarning, match="parameters are not finite, so no emergency checkpoint"):
        with pytest.raises(RuntimeError):
            Trainer(tiny(), FailingMLM(fail_at=3, poison=True), ROWS, config(tmp_path)).fit()
    assert checkpoints(tmp_path) == []


def test_resume_off_on_a_used_directory_is_a_config_error(tmp_path):
    Trainer(tiny(), FailingMLM(fail_at=0), ROWS, config(tmp_path, max_steps=2)).fit()
    with pytest.raises(ConfigError, match=r"already holds checkpoints .* checkpoints\.resume is off: resume them "
                                          r"\(checkpoints\.resume: true\) or choose a new output_dir"):
        Trainer(tiny(), FailingMLM(fail_at=0), ROWS, config(tmp_path, max_steps=2, resume=False)).fit()


def test_a_full_disk_leaves_no_partial_checkpoint(small_disk):
    torch.manual_seed(0)
    model = create_model("xlmr_tiny", vocab_size=64, num_layers=2, max_positions=32, hidden_size=128,
                         intermediate_size=512, num_heads=2)  # ~2 MB of weights: more than the disk holds
    cfg = TrainConfig(output_dir=str(small_disk / "run"), max_steps=2, batch_size=4,
                      checkpoints=CheckpointConfig(every=1),
                      logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the emergency save fails the same way
        with pytest.raises(OSError) as err:
            Trainer(model, FailingMLM(fail_at=0), ROWS, cfg).fit()
    assert err.value.errno == errno.ENOSPC and "step-00000001" in err.value.filename
    assert "the partial save was removed" in str(err.value)
    assert [p.name for p in (small_disk / "run" / "checkpoints").iterdir()] == []


class RunsCode:
    def __reduce__(self):
        return (os.system, ("echo owned",))


def test_a_code_running_pickle_is_refused_without_advice_to_run_it(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(pickle.dumps({"weight": RunsCode()}, protocol=2))
    with pytest.raises(CheckpointError) as err:
        read_weights(path)
    message = str(err.value)
    assert "weights_only=False" not in message and "never runs a checkpoint's code" in message
    assert "system" in message  # the global it refused
