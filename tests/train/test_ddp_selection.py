"""Model selection under data parallelism (gloo, 2 CPU ranks): every rank evaluates, all agree
on the best step and on when to stop, and rank 0 writes the same best model as one process with
the same global batch, under DDP and FSDP."""

import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tiny_objectives import FixedMaskMLM, corpus, fit_fixed, one_thread  # noqa: F401
from test_ddp import free_port

pytestmark = pytest.mark.usefixtures("one_thread")


class DevScore:
    """dev/score = −(FixedMaskMLM loss on a fixed held-out batch): a real, deterministic metric."""

    metric = "dev/score"

    def __init__(self):
        self.objective = FixedMaskMLM(contrastive=False).double()
        self.batch = self.objective.prepare(corpus(16, seed=9))

    def __call__(self, model):
        return {self.metric: -float(self.objective(model, self.batch).value)}


def fit_selecting(output_dir, **config):
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.trainer import Trainer
    from tiny_objectives import tiny_model

    settings = dict(output_dir=str(output_dir), max_steps=6, batch_size=8, lr=5e-2, progress=False,
                    tensorboard=False, measure_mfu=False, checkpoint_every=100, schedule="constant", eval_every=1,
                    patience=2)
    settings.update(config)
    model = tiny_model(torch.float64, dropout=0.0)
    trainer = Trainer(model, FixedMaskMLM(contrastive=False).double(), corpus(64), TrainConfig.from_dict(settings),
                      evaluator=DevScore())
    return trainer.fit()


def worker(rank: int, port: int, root: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        for strategy in ("ddp", "fsdp"):
            summary = fit_selecting(f"{root}/{strategy}", distributed=strategy, batch_size=4)
            with open(f"{root}/{strategy}-rank{rank}.json", "w") as handle:
                json.dump({k: summary[k] for k in ("best_step", "best", "steps", "evaluations")}, handle)
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("selection")
    # spawn, not fork: once this process has run torch.export (the ONNX tests), PyTorch refuses
    # autograd in a forked child ("Unable to handle autograd's threading ... fork")
    mp.start_processes(worker, args=(free_port(), str(root)), nprocs=2, start_method="spawn")
    return root


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_ranks_select_like_one_process(strategy, two_rank_runs, tmp_path):
    from babelzoo.zoo.checkpoint_io import read_weights

    one = fit_selecting(tmp_path, batch_size=8)
    ranks = [json.loads((two_rank_runs / f"{strategy}-rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0] == ranks[1]  # every rank saw the same evaluations and stopped together
    assert ranks[0]["best_step"] == one["best_step"] and ranks[0]["steps"] == one["steps"]
    for a, b in zip(ranks[0]["evaluations"], one["evaluations"]):
        assert a["step"] == b["step"] and a["dev/score"] == pytest.approx(b["dev/score"], abs=1e-9)
    mine = read_weights(tmp_path / "best" / "model.safetensors")
    theirs = read_weights(two_rank_runs / strategy / "best" / "model.safetensors")
    assert mine.keys() == theirs.keys()
    for key in mine:
        assert torch.allclose(mine[key], theirs[key], atol=1e-6, rtol=0), key
