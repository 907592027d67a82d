"""A batch row of padding only, in train mode with dropout (the explicit-softmax path on the CPU)
or in eval mode (SDPA), leaves every gradient finite and the other rows unchanged."""

import pytest
import torch

from babelzoo.zoo.factory import create_model


@pytest.mark.parametrize("train", [True, False])
def test_a_fully_padded_row_keeps_gradients_finite(train):
    torch.manual_seed(0)
    model = create_model("xlmr_tiny", vocab_size=64, num_layers=2, max_positions=32, dropout=0.1,
                         attention_dropout=0.1)
    model.train(train)
    ids = torch.randint(5, 64, (3, 8))
    mask = torch.ones_like(ids)
    ids[1], mask[1] = 1, 0  # row 1: padding only
    out = model(ids, attention_mask=mask)
    loss = out.last_hidden[[0, 2]].pow(2).mean()  # the loss reads the real rows only
    loss.backward()
    assert torch.isfinite(out.last_hidden).all()
    bad = [name for name, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert bad == []
    if not train:  # the real rows are what they are without the padded one
        alone = model(ids[[0, 2]], attention_mask=mask[[0, 2]]).last_hidden
        torch.testing.assert_close(out.last_hidden[[0, 2]], alone, atol=1e-5, rtol=1e-5)
