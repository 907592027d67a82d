"""SpanBERT's span-boundary objective: boundary indices and offsets by hand, the head's formula,
and learning on real text (tests/objectives/test_objectives_learn.py)."""

import torch

from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import build_objective, span_boundaries

I = -100
SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=50)


def test_boundaries_and_offsets_by_hand():
    # row 0: [CLS] a [b c] d [e] [SEP]; row 1: [CLS] [a b c] [SEP] pad
    labels = torch.tensor([[I, I, 11, 12, I, 14, I],
                           [I, 10, 11, 12, I, I, I]])
    left, right, offset = span_boundaries(labels)
    assert left.tolist() == [1, 1, 4, 0, 0, 0]
    assert right.tolist() == [4, 4, 6, 4, 4, 4]
    assert offset.tolist() == [1, 2, 1, 1, 2, 3]


def test_sbo_prediction_follows_the_formula(tiny):
    torch.manual_seed(0)
    model = tiny("xlmr_tiny", vocab_size=50, hidden_size=32, num_heads=2, intermediate_size=64)
    objective = build_objective("sbo", SPECIALS, model.config, masking={"unit": "span", "probability": 0.4})
    batch = objective.prepare([[10 + i for i in range(12)], [20 + i for i in range(9)]])
    assert batch["sbo_left"].numel() == int(batch["labels"].ne(I).sum()) > 0
    model.eval()
    objective.eval()
    loss = objective(model, batch)
    # by hand: h0 = [x_{s-1}; x_{e+1}; p_{i-s+1}] → 2 × (Linear, GeLU, LayerNorm) → tied decoder + bias
    hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
    rows = batch["labels"].ne(I).nonzero(as_tuple=True)[0]
    h0 = torch.cat([hidden[rows, batch["sbo_left"]], hidden[rows, batch["sbo_right"]],
                    objective.position.weight[batch["sbo_offset"]]], -1)
    lin1, _, norm1, lin2, _, norm2 = objective.head
    y = norm2(torch.nn.functional.gelu(lin2(norm1(torch.nn.functional.gelu(lin1(h0))))))
    logits = y @ model.embeddings.word.weight.T + model.lm_head.bias  # the decoder is tied to them
    expected = torch.nn.functional.cross_entropy(logits, batch["labels"][batch["labels"].ne(I)])
    torch.testing.assert_close(loss.metrics["sbo_loss"], expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss.value, loss.metrics["mlm_loss"] + expected, rtol=1e-5, atol=1e-6)
