"""Mixed precision: bf16 autocast trains (and really runs in bf16), a step with an infinite
gradient is skipped and counted without touching parameters or optimizer state, and fp16's
loss scaler backs off after the overflow."""

import json

import pytest
import torch
from safetensors.torch import load_file

from babelzoo.train.config import TrainConfig
from babelzoo.train.precision import Precision
from babelzoo.train.trainer import Trainer
from tiny_objectives import FixedMaskMLM, RandomMaskMLM, corpus, one_thread, tiny_model, zipf_corpus  # noqa: F401

pytestmark = pytest.mark.usefixtures("one_thread")


def config(tmp_path, **changes) -> TrainConfig:
    settings = dict(output_dir=str(tmp_path), batch_size=16, progress=False, tensorboard=False, measure_mfu=False,
                    checkpoint_every=1000, warmup_steps=3)
    settings.update(changes)
    return TrainConfig.from_dict(settings)


def losses(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]


def test_bf16_autocast_trains_a_tiny_model(tmp_path):
    data, entropy = zipf_corpus()
    model = tiny_model()
    seen = set()
    model.encoder.layers[0].ffn.up.register_forward_hook(lambda m, i, out: seen.add(out.dtype))
    Trainer(model, RandomMaskMLM(0.3), data, config(tmp_path, precision="bf16", optimizer="adamw", lr=1e-2,
                                                      max_steps=30)).fit()
    assert seen == {torch.bfloat16}  # the matmuls ran in bf16 ...
    assert all(p.dtype == torch.float32 for p in model.parameters())  # ... on fp32 master weights
    curve = [r["loss"] for r in losses(tmp_path)]
    first, last = sum(curve[:5]) / 5, sum(curve[-5:]) / 5
    assert first > entropy + 1.0 and last < first - 1.0 and last < entropy + 0.4, (first, last, entropy)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_infinite_gradient_is_skipped_and_counted(tmp_path, precision):
    objective = FixedMaskMLM(poison_calls=(2,))  # the third forward pass (step 3) overflows
    summary = Trainer(tiny_model(dropout=0.0), objective, corpus(64),
                      config(tmp_path, precision=precision, batch_size=8, max_steps=5, checkpoint_every=1,
                             keep_checkpoints=5, lr=1e-2)).fit()
    log = losses(tmp_path)
    assert [r["skipped"] for r in log] == [False, False, True, False, False]
    # the schedule follows the steps attempted: warm-up over 3, then linear to 0 at step 5
    assert [r["lr"] for r in log] == pytest.approx([1e-2 / 3, 2e-2 / 3, 1e-2, 5e-3, 0.0])
    assert summary["skipped_steps"] == 1 and summary["skipped_total"] == 1
    assert not torch.isfinite(torch.tensor(log[2]["grad_norm"]))
    ckpt = tmp_path / "checkpoints"
    for name in ("model", "optimizer"):
        before, after = load_file(ckpt / f"step-00000002/{name}.safetensors"), load_file(
            ckpt / f"step-00000003/{name}.safetensors")
        assert all(torch.equal(before[k], after[k]) for k in before), name  # untouched by the bad step
        final = load_file(ckpt / f"step-00000005/{name}.safetensors")
        assert all(torch.isfinite(v.float()).all() for v in final.values())
    at3, at4 = load_file(ckpt / "step-00000003/model.safetensors"), load_file(ckpt / "step-00000004/model.safetensors")
    assert any(not torch.equal(at3[k], at4[k]) for k in at3)  # step 4 trained again
    if precision == "fp16":
        scales = [r["loss_scale"] for r in log]
        assert scales[2] == scales[1] / 2  # the scaler backed off after the overflow
        trainer_state = json.loads((ckpt / "step-00000005/trainer.json").read_text())
        assert trainer_state["precision"]["scaler"]["scale"] == scales[4]
        assert trainer_state["updates"] == 4 and trainer_state["step"] == 5


@pytest.mark.parametrize("fused", [False, True])  # the host decides / the fused kernel skips on the device
def test_precision_step_skips_non_finite_gradients(fused):
    layer = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(layer.parameters(), lr=0.1, **({"fused": True} if fused else {"foreach": True}))
    prec = Precision("fp32", torch.device("cpu"))
    layer(torch.randn(4, 3)).sum().backward()
    layer.bias.grad[0] = float("nan")
    before = [p.detach().clone() for p in layer.parameters()]
    result = prec.step(opt, layer.parameters(), max_grad_norm=1.0)
    assert result.skipped and prec.skipped == 1
    if fused:  # state created, left at zero: no step taken
        assert all(float(s["step"]) == 0 and not s["exp_avg"].any() and not s["exp_avg_sq"].any()
                   for s in opt.state.values())
    else:
        assert not opt.state
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters()))
    opt.zero_grad()
    layer(torch.randn(4, 3)).sum().backward()
    result = prec.step(opt, layer.parameters(), max_grad_norm=1e-3)
    assert not result.skipped and result.grad_norm > 1e-3
    moved = torch.cat([(a - b.detach()).flatten() for a, b in zip(before, layer.parameters())])
    assert moved.abs().max() > 0


def test_clipping_bounds_the_global_norm():
    layer = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(layer.parameters(), lr=1.0)
    (100 * layer(torch.randn(4, 3))).sum().backward()
    before = [p.detach().clone() for p in layer.parameters()]
    result = Precision("fp32", torch.device("cpu")).step(opt, layer.parameters(), max_grad_norm=0.5)
    step = torch.cat([(a - b.detach()).flatten() for a, b in zip(before, layer.parameters())])
    assert result.grad_norm > 0.5
    assert float(step.norm()) == pytest.approx(0.5, rel=1e-5)  # SGD lr 1: the update is the clipped grad


def test_half_precision_refuses_half_parameters():
    with pytest.raises(ValueError, match="not fp32.*Leave the model in float32"):
        Precision("bf16", torch.device("cpu")).check_master_params(torch.nn.Linear(2, 2).bfloat16())
