"""``babelzoo demo --fresh`` removes only what the demo wrote: a folder the demo marked, whose
train/, model/ and leaderboard/ are a training run, a saved model and a leaderboard babelzoo wrote.
A user's folder, a folder reached through a link, or an output holding the user's files is
refused before anything is deleted."""

from __future__ import annotations

import re

import pytest
import torch

from babelzoo.datasets.specials import SpecialIds
from babelzoo.demo import claim_run_folder
from babelzoo.errors import UsageError
from babelzoo.evaluation.leaderboard import Cell, write_outputs
from babelzoo.evaluation.tasks import Result
from babelzoo.objectives.mlm import MLM
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import LoggingConfig
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.factory import create_model

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=64)
ROWS = [[5 + (i * 7 + j) % 50 for j in range(6 + i % 5)] for i in range(16)]


def tiny():
    torch.manual_seed(0)
    return create_model("xlmr_tiny", vocab_size=64, num_layers=1, max_positions=32)


def snapshot(folder) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def user_project(tmp_path):
    """A user's folder whose entries happen to be named as the demo's outputs."""
    folder = tmp_path / "proj"
    (folder / "model").mkdir(parents=True)
    (folder / "train").mkdir()
    (folder / "model" / "pytorch_model.bin").write_bytes(b"my weights")
    (folder / "train" / "data.csv").write_text("text,label\nhello,1\n")
    return folder


def demo_outputs(out):
    """What the demo writes into ``out``: a training run, its saved model, a leaderboard."""
    model = tiny()
    cfg = TrainConfig(output_dir=str(out / "train"), max_steps=2, batch_size=4,
                      logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), device="cpu")
    Trainer(model, MLM(SPECIALS, max_length=32, use_language_ids=False), ROWS, cfg).fit()
    model.save_pretrained(out / "model")
    write_outputs([Result("bli", "m", "acc@1", 0.5)], [Cell("m", "bli", "ok")], out / "leaderboard", {"run": 1})


def test_fresh_refuses_a_users_folder_named_like_the_demos(user_project):
    before = snapshot(user_project)
    with pytest.raises(UsageError, match=r"proj: not a folder babelzoo demo made \(it holds model, train\); "
                                         r"nothing was changed"):
        claim_run_folder(user_project, fresh=True)
    assert snapshot(user_project) == before


def test_fresh_refuses_a_link_to_a_users_folder(user_project, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(user_project)
    before = snapshot(user_project)
    with pytest.raises(UsageError, match="not a folder babelzoo demo made"):
        claim_run_folder(link, fresh=True)
    assert snapshot(user_project) == before


def test_fresh_removes_the_demos_own_outputs_and_keeps_the_rest(tmp_path):
    out = tmp_path / "demo"
    claim_run_folder(out, fresh=False)
    demo_outputs(out)
    (out / "notes.txt").write_text("mine\n")
    claim_run_folder(out, fresh=True)
    assert sorted(p.name for p in out.iterdir()) == [".babelzoo-demo", "notes.txt"]


@pytest.mark.parametrize("spoil, named", [
    (lambda out: (out / "model" / "NOTES.md").write_text("mine\n"), r"demo/model holds files babelzoo did not "
                                                                     r"write there \(NOTES.md\)"),
    (lambda out: (out / "leaderboard" / "my-figure.png").write_bytes(b"\x89PNG"),
     r"demo/leaderboard holds files babelzoo did not write there \(my-figure.png\)"),
    (lambda out: (out / "train" / ".babelzoo-run.json").unlink(),
     r"demo/train is not a train folder babelzoo wrote \(it holds checkpoints, metrics.jsonl, summary.json\)"),
])
def test_fresh_refuses_outputs_holding_what_babelzoo_did_not_write(tmp_path, spoil, named):
    out = tmp_path / "demo"
    claim_run_folder(out, fresh=False)
    demo_outputs(out)
    spoil(out)
    before = snapshot(out)
    with pytest.raises(UsageError, match=rf"--out .*demo --fresh: .*{named}.*; nothing was deleted"):
        claim_run_folder(out, fresh=True)
    assert snapshot(out) == before


def test_fresh_never_follows_a_link_in_the_demos_folder(tmp_path, user_project):
    out = tmp_path / "demo"
    claim_run_folder(out, fresh=False)
    (out / "model").symlink_to(user_project / "model")
    before = snapshot(user_project)
    with pytest.raises(UsageError, match=re.escape(f"{out / 'model'} is a link, not a folder babelzoo wrote")):
        claim_run_folder(out, fresh=True)
    assert snapshot(user_project) == before and (out / "model").is_symlink()
