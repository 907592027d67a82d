"""MLM, MMLM, CLM and code-switched CLMLM: layouts, hand-computed losses, example errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import CLM, CLMLM, MLM, MMLM, ExampleError, Pair
from babelzoo.objectives.batching import IGNORE

S = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={"en": 0, "de": 1})


def original(batch):
    return torch.where(batch["labels"].ne(IGNORE), batch["labels"], batch["input_ids"])


def test_mlm_frames_pads_and_adds_language_ids():
    batch = MMLM(S).prepare([([10, 11, 12], "en"), ([20], "de")])
    assert original(batch).tolist() == [[1, 10, 11, 12, 2], [1, 20, 2, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["language_ids"].tolist() == [[0, 0, 0, 0, 0], [1, 1, 1, 0, 0]]
    assert "language_ids" not in MLM(S).prepare([[10, 11], [12]])


def test_mlm_loss_equals_cross_entropy_at_masked_positions():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    mlm = MLM(S)
    batch = mlm.prepare([([10, 11, 12, 13, 14, 15, 16, 17], "en"), ([20, 21, 22, 23, 24], "de")])
    loss = mlm(model, batch)
    hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                   language_ids=batch["language_ids"]).last_hidden
    where = batch["labels"].ne(IGNORE)
    logits = model.mlm_logits(hidden)[where]
    assert torch.allclose(loss.value, F.cross_entropy(logits, batch["labels"][where]), atol=1e-6)
    assert loss.metrics["predicted"] == int(where.sum())
    accuracy = (logits.argmax(-1) == batch["labels"][where]).float().mean()
    assert loss.metrics["accuracy"] == pytest.approx(float(accuracy))
    assert loss.tokens == 10 + 7


def test_mmlm_needs_languages_and_known_codes():
    with pytest.raises(ExampleError, match="example 1 has no language"):
        MMLM(S).prepare([([10], "en"), [11]])
    with pytest.raises(ExampleError, match="'xx'"):
        MLM(S).prepare([([10], "xx")])
    with pytest.raises(ExampleError, match="example 1.*outside the vocabulary"):
        MLM(S).prepare([[10], [99]])
    with pytest.raises(ExampleError, match="example 0"):
        MLM(S).prepare(["not token ids"])


def test_mlm_truncation_is_counted():
    batch = MLM(S, max_length=6).prepare([list(range(10, 20))])
    assert original(batch).tolist() == [[1, 10, 11, 12, 13, 2]]
    assert int(batch["truncated"]) == 6


def test_clm_labels_are_next_tokens_and_loss_is_causal():
    model = babelzoo.create_model("xlm_tiny", vocab_size=64).eval()
    clm = CLM(S)
    batch = clm.prepare([([10, 11, 12], "en"), ([20], "de")])
    assert batch["input_ids"].tolist() == [[1, 10, 11, 12, 2], [1, 20, 2, 0, 0]]
    assert batch["labels"].tolist() == [[10, 11, 12, 2, IGNORE], [20, 2, IGNORE, IGNORE, IGNORE]]
    loss = clm(model, batch)
    hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"],
                   language_ids=batch["language_ids"], causal=True).last_hidden
    where = batch["labels"].ne(IGNORE)
    expected = F.cross_entropy(model.mlm_logits(hidden)[where], batch["labels"][where])
    assert torch.allclose(loss.value, expected, atol=1e-6)
    # Causality: the prediction at position t does not see tokens after t.
    changed = dict(batch, input_ids=batch["input_ids"].clone())
    changed["input_ids"][0, 3] = 30
    h2 = model(changed["input_ids"], attention_mask=batch["attention_mask"],
               language_ids=batch["language_ids"], causal=True).last_hidden
    assert torch.allclose(hidden[0, :3], h2[0, :3], atol=1e-5)
    assert not torch.allclose(hidden[0, 3], h2[0, 3], atol=1e-5)


def test_clmlm_switches_alternate_sentences_with_their_languages():
    document = [Pair([10, 11], [40, 41, 42], "en", "de"), Pair([12], [43], "en", "de"),
                Pair([13, 14], [44], "en", "de")]
    seen = set()
    for seed in range(8):
        torch.manual_seed(seed)
        batch = CLMLM(S).prepare([document])
        tokens = original(batch)[0].tolist()
        langs = batch["language_ids"][0].tolist()
        seen.add(tuple(tokens))
        if tokens[1] == 10:  # starts with the source side: s1 t2 s3
            assert tokens == [1, 10, 11, 43, 13, 14, 2]
            assert langs == [0, 0, 0, 1, 0, 0, 0]
        else:  # starts with a translation: t1 s2 t3
            assert tokens == [1, 40, 41, 42, 12, 44, 2]
            assert langs == [1, 1, 1, 1, 0, 1, 1]
    assert len(seen) == 2, "both parities occur"


def test_clmlm_truncates_at_max_length():
    document = [Pair(list(range(10, 20)), list(range(20, 30)), "en", "de")] * 3
    batch = CLMLM(S, max_length=16).prepare([document])
    assert batch["input_ids"].shape == (1, 16)
    assert int(batch["truncated"]) == 30 - 14


def test_mlm_runs_the_last_layer_at_masked_positions_with_the_same_gradients():
    """The objective calls the model with ``output_positions`` (the path benchmarks/speed.py
    measures); loss and every gradient equal a full forward pass's."""
    from babelzoo.objectives.mlm import token_prediction_loss

    torch.manual_seed(0)
    model = babelzoo.create_model("xlmr_tiny", vocab_size=64, pad_token_id=0, dropout=0.0, attention_dropout=0.0)
    mlm = MLM(S, use_language_ids=False)
    torch.manual_seed(1)
    batch = mlm.prepare([[10 + i for i in range(12)], [30 + i for i in range(7)], [50, 51, 52, 53, 54, 55]])
    calls = []
    hook = model.encoder.register_forward_hook(lambda module, args, kwargs, out: calls.append((kwargs, out)),
                                               with_kwargs=True)
    fast = mlm(model, batch).value
    hook.remove()
    (kwargs, (last, _)), = calls
    where = batch["labels"].ne(IGNORE)
    assert torch.equal(kwargs["output_positions"], where) and last.shape == (int(where.sum()), model.config.text.hidden_size)
    fast.backward()
    fast_grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
    slow, _ = token_prediction_loss(model, hidden, batch["labels"])
    slow.backward()
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=1e-6)
    for name, grad in fast_grads.items():
        torch.testing.assert_close(grad, model.get_parameter(name).grad, atol=1e-6, rtol=1e-5, msg=name)
