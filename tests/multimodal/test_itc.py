"""ITC: the symmetric InfoNCE loss against a hand computation, group-aware targets, temperature
clamping, the objective end to end, and negatives gathered across two ranks."""

import math

import pytest
import torch
import torch.multiprocessing as mp

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives.itc import ITC, MAX_LOGIT_SCALE, contrastive_loss

V = [[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]
T = [[0.8, 0.6], [0.0, 1.0], [-0.6, 0.8]]


def by_hand(v, t, scale, targets):
    """−Σ_j y_ij log softmax_j(scale·<a_i, b_j>) averaged over i, for both directions."""
    def direction(a, b):
        total = 0.0
        for i, row in enumerate(a):
            logits = [scale * sum(x * y for x, y in zip(row, col)) for col in b]
            log_z = math.log(sum(math.exp(l) for l in logits))
            total -= sum(targets[i][j] * (logits[j] - log_z) for j in range(len(b)))
        return total / len(a)
    return (direction(v, t) + direction(t, v)) / 2


def test_loss_equals_the_hand_computation():
    s = math.log(10.0)
    loss, metrics = contrastive_loss(torch.tensor(V), torch.tensor(T), torch.tensor(s), gather=lambda x: (x, 0))
    identity = [[1.0 if i == j else 0.0 for j in range(3)] for i in range(3)]
    assert float(loss) == pytest.approx(by_hand(V, T, 10.0, identity), rel=1e-6)
    assert metrics["temperature"] == pytest.approx(0.1)
    # V·Tᵀ rows: [.8 0 -.6], [.96 .8 .28], [.6 1 .8] → argmax 0, 0, 1: image 0 right, 1 and 2 wrong
    assert metrics["itc_acc_m2t"] == pytest.approx(1 / 3)


def test_items_of_one_group_are_positives_of_each_other():
    groups = torch.tensor([7, 7, 3])
    loss, _ = contrastive_loss(torch.tensor(V), torch.tensor(T), torch.tensor(0.0), groups, gather=lambda x: (x, 0))
    soft = [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]
    assert float(loss) == pytest.approx(by_hand(V, T, 1.0, soft), rel=1e-6)


def specials():
    return SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=8000)


def examples(n=4, seed=0, size=64):
    g = torch.Generator().manual_seed(seed)
    return [{"input_ids": torch.randint(5, 8000, (3 + i,), generator=g).tolist(), "lang": "en",
             "group": str(i), "source": f"{i}.png", "pixel_values": torch.randn(3, size, size, generator=g)}
            for i in range(n)]


@pytest.mark.parametrize("raw, temperature", [(10.0, 0.01), (-3.0, 1.0), (math.log(20.0), 0.05)])
def test_objective_matches_the_loss_and_clamps_the_temperature(raw, temperature):
    model = babelzoo.create_model("vl_dual_tiny").eval()
    with torch.no_grad():
        model.logit_scale.fill_(raw)
    itc = ITC(specials())
    batch = itc.prepare(examples())
    out = itc(model, batch)
    assert out.metrics["temperature"] == pytest.approx(temperature, rel=1e-5)
    with torch.no_grad():
        t = model.embed_text(batch["input_ids"], batch["attention_mask"])
        v = model.embed_modality(pixel_values=batch["pixel_values"])
    expected, _ = contrastive_loss(v, t, torch.tensor(min(max(raw, 0.0), MAX_LOGIT_SCALE)), gather=lambda x: (x, 0))
    assert float(out.value.detach()) == pytest.approx(float(expected), rel=1e-5)
    out.value.backward()
    # the clamp passes no gradient outside [0, ln 100]
    assert bool(model.logit_scale.grad != 0) == (0.0 <= raw <= MAX_LOGIT_SCALE)


def _rank_worker(rank, world, init_file, v, t, groups, out_dir):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        rows = slice(rank * 2, rank * 2 + 2)
        lv, lt = v[rows].clone().requires_grad_(True), t[rows].clone().requires_grad_(True)
        loss, _ = contrastive_loss(lv, lt, torch.tensor(1.5), groups[rows])
        loss.backward()
        torch.save((loss.detach(), lv.grad, lt.grad), f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_negatives_are_gathered_across_ranks(tmp_path):
    g = torch.Generator().manual_seed(0)
    v = torch.nn.functional.normalize(torch.randn(4, 5, generator=g), dim=-1)
    t = torch.nn.functional.normalize(torch.randn(4, 5, generator=g), dim=-1)
    groups = torch.tensor([0, 1, 1, 2])  # a positive pair that straddles the two ranks
    fv, ft = v.clone().requires_grad_(True), t.clone().requires_grad_(True)
    full, _ = contrastive_loss(fv, ft, torch.tensor(1.5), groups, gather=lambda x: (x, 0))
    full.backward()
    mp.start_processes(_rank_worker, args=(2, str(tmp_path / "init"), v, t, groups, str(tmp_path)), nprocs=2,
                       join=True, start_method="spawn")
    results = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    # the mean of the ranks' losses is the one-process loss over the global batch ...
    assert float(results[0][0] + results[1][0]) / 2 == pytest.approx(float(full.detach()), rel=1e-5)
    # ... and each rank's rows get the gradient of the sum of all ranks' losses (DDP then averages)
    for rank in (0, 1):
        rows = slice(rank * 2, rank * 2 + 2)
        torch.testing.assert_close(results[rank][1], 2 * fv.grad[rows], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(results[rank][2], 2 * ft.grad[rows], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["itc", "itm", "mlm_conditioned"])
def test_image_text_objectives_refuse_a_text_model_by_name(name):
    # A text model's forward takes no pixel_values: the objective names the problem and the fix.
    from babelzoo.errors import InputError
    from babelzoo.objectives.itm import ITM
    from babelzoo.objectives.mlm_conditioned import ConditionedMLM

    model = babelzoo.create_model("xlmr_tiny", vocab_size=8000)
    objective = {"itc": lambda: ITC(specials()), "itm": lambda: ITM(specials(), model.config),
                 "mlm_conditioned": lambda: ConditionedMLM(specials())}[name]()
    with pytest.raises(InputError) as err:
        objective(model, objective.prepare(examples()))
    assert str(err.value) == (f"{name} reads images or speech with their text, but model 'xlmr_tiny' is a text model "
                              "(no vision or audio part); train a fusion model such as 'vl_fusion_tiny' or "
                              "'speech_text_tiny'")
