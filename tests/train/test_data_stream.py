"""Micro-batch planning: ranks and accumulation partition each global batch exactly, epochs are
permutations, prepared batches do not depend on workers or on resuming, and a dict of datasets
feeds a mixture with one micro-batch per dataset."""

import numpy as np
import pytest
import torch

from babelzoo.train.data import BatchPlan, DataStream


def collect(plan, step, accum, world):
    return [i for m in range(accum) for r in range(world) for i in plan.indices(step, m, r)]


@pytest.mark.parametrize("batch, accum, world", [(8, 1, 1), (4, 2, 1), (4, 1, 2), (2, 2, 2), (1, 4, 2)])
def test_every_layout_of_a_global_batch_reads_the_same_examples(batch, accum, world):
    reference = BatchPlan("d", 50, 8, 1, 1, seed=3)
    plan = BatchPlan("d", 50, batch, accum, world, seed=3)
    assert plan.chunks_per_epoch == 6  # 50 // 8: the 2-example tail is dropped, every rank equal
    for step in range(13):
        assert collect(plan, step, accum, world) == collect(reference, step, 1, 1)
    epoch0 = [i for s in range(6) for i in collect(plan, s, accum, world)]
    assert len(set(epoch0)) == 48  # no example twice within an epoch
    assert collect(plan, 6, accum, world) != collect(plan, 0, accum, world)  # epoch 1 is reshuffled


def test_too_small_dataset_is_an_error():
    with pytest.raises(ValueError, match="has 5 examples, fewer than one global batch of 8"):
        BatchPlan("tiny", 5, 4, 1, 2, seed=0)


class RandomPrepare:
    def __call__(self, examples):
        return {"x": torch.tensor(examples), "noise": torch.rand(len(examples))}


def batches(stream, steps):
    return [b for _ in range(steps) for b in stream.next_step()]


def test_prepared_batches_do_not_depend_on_workers_or_resume():
    data = list(range(40))
    kwargs = dict(batch_size=4, grad_accum=2, rank=0, world_size=1, seed=5)
    plain = batches(DataStream(data, RandomPrepare(), **kwargs), 6)
    workers = batches(DataStream(data, RandomPrepare(), num_workers=2, **kwargs), 6)
    resumed = DataStream(data, RandomPrepare(), **kwargs)
    first = batches(resumed, 2)
    state = resumed.state_dict()
    again = DataStream(data, RandomPrepare(), **kwargs)
    again.load_state_dict(state)
    later = batches(again, 4)
    for other in (workers, first + later):
        assert all(torch.equal(a["x"], b["x"]) and torch.equal(a["noise"], b["noise"]) for a, b in zip(plain, other))
    assert state["step"] == 2 and state["datasets"]["data"] == {"size": 40, "global_batch": 8, "epoch": 0, "chunk": 2}
    torch.manual_seed(0)
    expected = torch.rand(())
    torch.manual_seed(0)
    batches(DataStream(data, RandomPrepare(), **kwargs), 1)
    assert torch.equal(torch.rand(()), expected)  # collation never consumes the global RNG


def test_resume_refuses_a_different_global_batch():
    stream = DataStream(list(range(40)), RandomPrepare(), batch_size=4, grad_accum=1, rank=0, world_size=1, seed=0)
    state = stream.state_dict()
    other = DataStream(list(range(40)), RandomPrepare(), batch_size=8, grad_accum=1, rank=0, world_size=1, seed=0)
    with pytest.raises(ValueError, match="global batch of 4 examples, this run uses 8"):
        other.load_state_dict(state)


def test_dict_of_datasets_gives_one_micro_batch_per_name_with_own_epochs():
    seen = []

    def prepare(examples):
        seen.append({k: list(v) for k, v in examples.items()})
        return examples

    stream = DataStream({"a": list(range(8)), "b": list(range(100, 124))}, prepare, batch_size=4, grad_accum=1,
                        rank=0, world_size=1, seed=0)
    batches(stream, 6)
    assert all(set(s) == {"a", "b"} and len(s["a"]) == len(s["b"]) == 4 for s in seen)
    a_epoch = [sorted(s["a"] + t["a"]) for s, t in zip(seen[0::2], seen[1::2])]
    assert all(e == list(range(8)) for e in a_epoch)  # "a" cycles every 2 steps
    assert sorted(i for s in seen[:6] for i in s["b"]) == list(range(100, 124))  # "b" every 6
    assert stream.state_dict()["datasets"]["a"]["epoch"] == 3 and stream.state_dict()["datasets"]["b"]["epoch"] == 1


def test_sampler_order_replaces_the_permutation():
    class Order:
        def epoch_order(self, epoch):
            return np.array([0, 0, 1, 1, 2, 2, 3, 3]) + epoch

    stream = DataStream((list(range(10)), Order()), lambda ex: ex, batch_size=4, grad_accum=1, rank=0,
                        world_size=1, seed=0)
    assert batches(stream, 3) == [[0, 0, 1, 1], [2, 2, 3, 3], [1, 1, 2, 2]]
    with pytest.raises(TypeError, match="must be map-style"):
        DataStream(iter(range(10)), lambda ex: ex, batch_size=1, grad_accum=1, rank=0, world_size=1, seed=0)
