"""Sentence vectors: max and final pooling by hand, final states against torch's own h_n, and
InferSent's max pooling read by every consumer (pair objectives, BabelEncoder, heads) through
``BabelModel.sentence_embedding``; RNN configs written before the pooling field still load."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import ConfigError
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.objectives import Pair, build_objective
from babelzoo.zoo.model_config import ModelConfig
from babelzoo.zoo.factory import model_config
from babelzoo.zoo.layers import pool

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=60, languages={"en": 0, "de": 1})


def infersent(**overrides):
    return babelzoo.create_model("infersent_tiny", vocab_size=60, dropout=0.0, **overrides).eval()


def by_hand_max(hidden, mask):
    return torch.stack([hidden[b, : int(mask[b].sum())].max(0).values for b in range(len(hidden))])


def test_max_pooling_never_lets_padding_win():
    # Real values all negative in feature 0; the padding states are zeros (as an RNN's packed pass
    # leaves them) and would win an unmasked max.
    hidden = torch.tensor([[[-3.0, 1.0], [-1.0, -2.0], [0.0, 0.0]],
                           [[-5.0, -4.0], [0.0, 0.0], [0.0, 0.0]],
                           [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])
    assert pool(hidden, mask, "max").tolist() == [[-1.0, 1.0], [-5.0, -4.0], [0.0, 0.0]]  # empty row: zeros
    assert pool(hidden, None, "max").tolist() == [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]


def test_final_pooling_by_hand():
    hidden = torch.arange(2 * 4 * 4, dtype=torch.float).view(2, 4, 4)  # [b, t, h] = 16b + 4t + h
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    # one direction: the state at the last real token
    assert pool(hidden, mask, "final").tolist() == [[8, 9, 10, 11], [20, 21, 22, 23]]
    # two: the forward half at the last real token, the backward half at the first token
    assert pool(hidden, mask, "final", directions=2).tolist() == [[8, 9, 2, 3], [20, 21, 18, 19]]
    with pytest.raises(ConfigError, match="directions"):
        pool(hidden[..., :3], mask, "final", directions=2)


@pytest.mark.parametrize("name", ["bigru_tiny", "bilstm_tiny"])
def test_final_pooling_is_the_rnn_final_state(name):
    """h_n of the top layer (forward, backward) from torch itself, on a padded batch."""
    model = babelzoo.create_model(name, vocab_size=60, dropout=0.0).eval()
    ids = torch.tensor([[1, 10, 11, 12, 13, 2], [1, 20, 21, 2, 0, 0]])
    mask = ids.ne(0).long()
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
        vectors = model.sentence_embedding(out.last_hidden, out.mask, "final")
        packed = pack_padded_sequence(model.embeddings(ids), mask.sum(1), batch_first=True, enforce_sorted=False)
        _, state = model.encoder.rnn(packed)
        h_n = state[0] if isinstance(state, tuple) else state  # an LSTM's (h_n, c_n)
    torch.testing.assert_close(vectors, torch.cat([h_n[-2], h_n[-1]], dim=-1))


def test_infersent_max_pools_real_tokens_only_and_is_padding_invariant():
    model = infersent()
    assert model.config.text.sentence_pooling == "max" and model.sentence_pooling(None, "cls") == "max"
    ids = torch.tensor([[1, 10, 11, 12, 2, 0, 0, 0], [1, 20, 21, 22, 23, 24, 25, 2]])
    mask = ids.ne(0).long()
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
        vectors = model.sentence_embedding(out.last_hidden, out.mask)
        first = model(ids[:1, :5])
        alone = model.sentence_embedding(first.last_hidden, first.mask)
    torch.testing.assert_close(vectors, by_hand_max(out.last_hidden, mask))
    torch.testing.assert_close(vectors[:1], alone)
    assert (alone < 0).any()  # features whose every real value is negative: the padding zeros lost


@pytest.mark.parametrize("objective", ["xlco", "translation_ranking", "infersent"])
def test_pair_objectives_read_infersent_vectors_by_max_pooling(objective):
    model = infersent()
    obj = build_objective(objective, SPECIALS, model.config)
    batch = obj.prepare([Pair([10, 11, 12], [30, 31], "en", "de"), Pair([13, 14], [32, 33, 34, 35], "en", "de")])
    with torch.no_grad():
        src, tgt = obj.embed(model, batch)
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    expected = by_hand_max(out.last_hidden, batch["attention_mask"])
    torch.testing.assert_close(torch.cat([src, tgt]), expected)
    with pytest.raises(ConfigError, match="fixes its sentence vectors' pooling to 'max'"):
        build_objective(objective, SPECIALS, model.config, pooling="mean").embed(model, batch)


def test_a_transformer_keeps_each_consumers_default_pooling():
    model = babelzoo.create_model("xlmr_tiny", vocab_size=60, dropout=0.0, attention_dropout=0.0).eval()
    obj = build_objective("xlco", SPECIALS)
    batch = obj.prepare([Pair([10, 11], [30], "en", "de"), Pair([13], [32, 33], "en", "de")])
    with torch.no_grad():
        src, tgt = obj.embed(model, batch)
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    torch.testing.assert_close(torch.cat([src, tgt]), out.last_hidden[:, 0])  # cls, as before
    assert BabelEncoder("t", model, None).protocol["pooling"] == "mean"


def test_babel_encoder_max_pools_an_infersent_model():
    model = infersent()
    encoder = BabelEncoder("infersent", model, SimpleNamespace(specials=SPECIALS), batch_size=2)
    assert encoder.protocol["pooling"] == "max"
    rows = [[1, 10, 11, 2], [1, 20, 21, 22, 23, 2], [1, 30, 2]]
    vectors = encoder.encode_ids(rows)
    expected = []
    with torch.no_grad():
        for row in rows:
            out = model(torch.tensor([row]))
            expected.append(out.last_hidden[0].max(0).values)
    expected = torch.nn.functional.normalize(torch.stack(expected), dim=-1).numpy()
    np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_heads_on_infersent_take_its_max_pooling():
    labels = ["a", "b"]
    with pytest.raises(ConfigError, match="HeadConfig.pooling='mean' differs from the pooling 'max'"):
        infersent(head={"kind": "sequence_classification", "labels": labels, "pooling": "mean"})
    model = infersent(head={"kind": "sequence_classification", "labels": labels, "pooling": "max"})
    ids = torch.tensor([[1, 10, 11, 2, 0], [1, 20, 21, 22, 2]])
    with torch.no_grad():
        out = model(ids)
        torch.testing.assert_close(model.head.pooled(out), by_hand_max(out.last_hidden, ids.ne(0)))
    token_head = infersent(head={"kind": "token_classification", "labels": labels})  # no sentence vector
    assert token_head.config.head.pooling == "cls"


def test_rnn_configs_written_before_the_pooling_field_load_unchanged():
    for name in ("bilstm_tiny", "bigru_tiny"):
        config = model_config(name)
        data = config.to_dict()
        assert data["text"].pop("pooling") is None
        assert ModelConfig.from_dict(data) == config
    with pytest.raises(ConfigError, match="pooling"):
        model_config("bilstm_tiny").override(pooling="attention")
