"""Every fast path gives what the plain computation gives: the MLM head at masked positions only,
the fused QKV projection, SDPA without a mask when nothing is padded, padding removed by
length-sorted batching, and the position check that reads no tensor."""

import string

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from babelzoo.datasets.specials import SpecialIds
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.objectives.mlm import MLM, token_prediction_loss
from babelzoo.zoo.model_config import ModelConfig
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.layers import SelfAttention, build_attention_mask
from babelzoo.zoo.model import BabelModel
from babelzoo.zoo.families.rnn.config import RNNConfig

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = SPECIALS + list(string.ascii_lowercase + string.digits + ".,!?'") + ["##" + c for c in string.ascii_lowercase]
SENTENCES = ["Tom left.", "Where is the station?", "I don't know what you mean by that, but I'll ask her tomorrow.",
             "Yes.", "Mary and Tom want to sing with us again next week.", "It is raining", "Go!",
             "Could you tell me how to get to the museum from here, please?", "He is tall.", "We won."]


def tiny(vocab_size: int = 64, config_class=TransformerConfig, **overrides) -> BabelModel:
    sizes = dict(vocab_size=vocab_size, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
                 max_positions=128, dropout=0.0, attention_dropout=0.0)
    text = config_class(**{**sizes, **overrides})
    model = BabelModel(ModelConfig(text=text))
    with torch.no_grad():  # a non-zero MLM bias and LayerNorm shift, so that every term shows
        model.lm_head.bias.normal_(0, 0.5)
        model.lm_head.norm.bias.normal_(0, 0.5)
    return model


def specials(vocab_size: int = 64) -> SpecialIds:
    return SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=vocab_size, special=frozenset(range(5)))


def mlm_batch(vocab_size: int = 64):
    rows = [torch.randint(5, vocab_size, (n,)).tolist() for n in (13, 7, 20, 4)]
    return MLM(specials(vocab_size), max_length=32).prepare(rows)


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def test_mlm_head_at_masked_positions_gives_the_full_vocabulary_loss_and_gradients():
    model = tiny()
    batch = mlm_batch()
    assert 0 < int(batch["labels"].ne(-100).sum()) < int(batch["attention_mask"].sum())

    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    fast, _ = token_prediction_loss(model, out.last_hidden, batch["labels"])
    fast.backward()
    fast_grads = grads(model)
    model.zero_grad()

    # the plain way: logits at every position, cross-entropy ignoring unlabelled ones
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = model.mlm_logits(out.last_hidden)
    plain = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch["labels"].reshape(-1), ignore_index=-100)
    plain.backward()
    assert logits.shape[:2] == batch["input_ids"].shape
    torch.testing.assert_close(fast, plain, rtol=1e-6, atol=1e-6)
    for name, grad in grads(model).items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_mlm_loss_equals_transformers_bert_for_masked_lm():
    """The speed benchmark's premise: babelzoo's MLM objective (head at masked positions) and
    transformers' BertForMaskedLM (head everywhere, labels -100 elsewhere) compute one loss."""
    transformers = pytest.importorskip("transformers")
    from babelzoo.zoo.convert import import_hf

    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    hf = transformers.BertForMaskedLM(config)
    with torch.no_grad():
        hf.cls.predictions.bias.normal_(0, 0.5)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = import_hf(tmp)
    batch = mlm_batch()
    theirs = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    mine = MLM(specials(), max_length=32)(ours, batch).value
    torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
    theirs.backward()
    mine.backward()
    torch.testing.assert_close(ours.embeddings.word.weight.grad, hf.bert.embeddings.word_embeddings.weight.grad,
                               rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(ours.encoder.layers[0].ffn.up.weight.grad,
                               hf.bert.encoder.layer[0].intermediate.dense.weight.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("padded", [False, True])
def test_fused_qkv_attention_equals_separate_projections_and_explicit_softmax(padded):
    attn = SelfAttention(32, num_heads=4).eval()
    x = torch.randn(3, 9, 32)
    keys = torch.ones(3, 9, dtype=torch.long)
    if padded:
        keys[1, 6:] = 0
        keys[2, 2:] = 0
    mask = build_attention_mask(keys)
    assert (mask is None) == (not padded)
    got = attn(x, mask)

    wq, wk, wv = attn.qkv.weight.chunk(3)
    bq, bk, bv = attn.qkv.bias.chunk(3)

    def heads(t):
        return t.view(3, 9, 4, 8).transpose(1, 2)

    q, k, v = heads(x @ wq.T + bq), heads(x @ wk.T + bk), heads(x @ wv.T + bv)
    scores = q @ k.transpose(-1, -2) / 8 ** 0.5  # softmax(QKᵀ/√d) V
    scores = scores.masked_fill(~keys.bool()[:, None, None, :], float("-inf"))
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(3, 9, 32)
    torch.testing.assert_close(got, attn.out(context), rtol=1e-5, atol=1e-6)


def test_padding_free_batch_uses_no_mask_and_padded_rows_match_their_unpadded_selves():
    model = tiny().eval()
    rows = [torch.randint(5, 64, (n,)) for n in (11, 5, 8)]
    with torch.no_grad():
        alone = [model(r[None]).last_hidden[0] for r in rows]
        ids = torch.zeros(3, 11, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
        batched = model(ids).last_hidden  # the attention mask comes from the padding id
    for i, r in enumerate(rows):
        torch.testing.assert_close(batched[i, :len(r)], alone[i], rtol=1e-5, atol=1e-5)
    assert build_attention_mask(torch.ones(3, 11)) is None


class Reads(TorchDispatchMode):
    """Records every aten op that is run."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_default_positions_are_checked_from_the_shape_without_reading_a_tensor():
    model = tiny()
    ids = torch.randint(5, 64, (2, 16))
    with Reads() as reads:
        model.embeddings(ids)
    assert not [op for op in reads.ops if "_local_scalar_dense" in op or op.startswith("aten.max")], reads.ops

    with pytest.raises(ValueError, match="position id 128 is out of range.*max_positions=128"):
        model.embeddings(torch.randint(5, 64, (1, 129)))
    with pytest.raises(ValueError, match="position id 7 is out of range"):  # explicit ids are still read
        tiny(max_positions=7).embeddings(ids[:, :3], position_ids=torch.tensor([[0, 1, 7]] * 2))


def test_offset_positions_still_get_the_exact_check_when_the_shape_is_too_long():
    """RoBERTa/XLM-R count real tokens from the offset: a padded row longer than max_positions
    is fine when its real tokens fit, and an error when they do not."""
    model = tiny(max_positions=8, position_offset=2, pad_token_id=0)
    fits = torch.tensor([[7] * 8 + [0] * 2])  # 10 columns, 8 real tokens: positions 2..9 < 10
    assert model.embeddings(fits).shape == (1, 10, 32)
    # The ninth real token is position 8 counted from 0 (row 10 of the offset table).
    with pytest.raises(ValueError, match="position id 8 is out of range: this model has max_positions=8"):
        model.embeddings(torch.tensor([[7] * 9]))


def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer(VOCAB)


class Widths:
    """Wraps a model's forward to record the [B, L] shapes it is called with."""

    def __init__(self, model):
        self.shapes = []
        self.forward = model.forward
        model.forward = self

    def __call__(self, ids, **kwargs):
        self.shapes.append(tuple(ids.shape))
        return self.forward(ids, **kwargs)


@pytest.mark.parametrize("layer", [-1, 1])
def test_sorted_batches_give_each_sentences_own_embedding_in_input_order(layer):
    tok = tokenizer()
    model = tiny(len(VOCAB))
    alone = BabelEncoder("t", model, tok, layer=layer, batch_size=1).encode(SENTENCES)  # no padding at all
    sorted_batches = BabelEncoder("t", model, tok, layer=layer, batch_size=4)
    widths = Widths(model)
    got = sorted_batches.encode(SENTENCES)
    np.testing.assert_allclose(got, alone, rtol=1e-5, atol=1e-6)
    assert model.training  # the encoder restores the mode it found

    lengths = sorted(len(r) for r in tok.batch_encode(SENTENCES, padding=False, return_tensors=None)["input_ids"])
    expected = [(len(lengths[i:i + 4]), lengths[i:i + 4][-1]) for i in range(0, len(lengths), 4)]
    assert widths.shapes == expected  # each batch padded only to its own longest sentence
    in_order = [len(r) for r in tok.batch_encode(SENTENCES, padding=False, return_tensors=None)["input_ids"]]
    padded_in_order = sum(len(in_order[i:i + 4]) * max(in_order[i:i + 4]) for i in range(0, len(in_order), 4))
    assert sum(b * w for b, w in widths.shapes) < padded_in_order


def test_encode_ids_equals_encode_and_truncates_like_it():
    tok = tokenizer()
    model = tiny(len(VOCAB)).eval()
    encoder = BabelEncoder("t", model, tok, batch_size=3, max_length=12)
    rows = tok.batch_encode(SENTENCES, max_length=12, padding=False, return_tensors=None)["input_ids"]
    assert max(len(r) for r in rows) == 12
    np.testing.assert_array_equal(encoder.encode_ids(rows), encoder.encode(SENTENCES))
    np.testing.assert_allclose(np.linalg.norm(encoder.encode_ids(rows), axis=1), 1.0, rtol=1e-6)


LAST_LAYER_CASES = {
    "bert": {},
    "pre_ln": dict(norm_position="pre"),
    "albert_shared": dict(share_layers=True, embedding_size=16),
    "t5_bias": dict(relative_attention="t5", position_embedding="none"),
    "causal": dict(causal=True),
    "nezha_full_layer": dict(relative_attention="nezha", position_embedding="none"),
    "lstm": dict(config_class=RNNConfig, cell="lstm", num_layers=1),
}


@pytest.mark.parametrize("case", list(LAST_LAYER_CASES))
def test_last_layer_at_masked_positions_equals_the_full_pass_values_and_gradients(case):
    model = tiny(**LAST_LAYER_CASES[case])
    batch = mlm_batch()
    ids, mask, positions = batch["input_ids"], batch["attention_mask"], batch["labels"].ne(-100)
    visible = None
    if case == "bert":  # also a K-BERT-style [B, L, L] visibility matrix, gathered by query row
        visible = torch.rand(ids.shape[0], ids.shape[1], ids.shape[1]) < 0.7
    full = model(ids, attention_mask=mask, visible=visible).last_hidden[positions]
    full_loss = F.cross_entropy(model.mlm_logits(full), batch["labels"][positions])
    full_loss.backward()
    want = grads(model)
    model.zero_grad()

    out = model(ids, attention_mask=mask, visible=visible, output_positions=positions)
    assert out.last_hidden.shape == full.shape and out.pooled is None
    torch.testing.assert_close(out.last_hidden, full, rtol=1e-5, atol=1e-5)
    loss = F.cross_entropy(model.mlm_logits(out.last_hidden), batch["labels"][positions])
    torch.testing.assert_close(loss, full_loss, rtol=1e-6, atol=1e-6)
    loss.backward()
    for name, grad in grads(model).items():
        torch.testing.assert_close(grad, want[name], rtol=1e-4, atol=1e-6, msg=name)


def test_last_layer_rows_do_less_work():
    """The pruned pass runs the last block's query, attention, output and feed-forward matmuls
    on the selected rows only: exactly that many FLOPs fewer."""
    from babelzoo.train.flops import count_flops

    model = tiny(num_layers=1, pooler=False).eval()
    ids = torch.randint(5, 64, (4, 32))
    positions = torch.zeros(4, 32, dtype=torch.bool)
    positions[:, ::8] = True  # 4 of 32 per row
    with torch.no_grad():
        full = count_flops(lambda: model(ids))
        pruned = count_flops(lambda: model(ids, output_positions=positions))
    h, inner, tokens, rows = 32, 64, 4 * 32, 4 * 4
    per_token = 2 * (h * h + h * h + 2 * h * inner)  # Q, output and the two feed-forward matmuls
    attention = 2 * 2 * 32 * h  # scores and weighted values, per query
    assert full - pruned == (tokens - rows) * (per_token + attention)


def test_output_positions_rules():
    model = tiny()
    ids = torch.randint(5, 64, (2, 6))
    with pytest.raises(ValueError, match="cannot be combined with output_hidden_states"):
        model(ids, output_positions=ids > 30, output_hidden_states=True)
    none = model(ids, output_positions=torch.zeros(2, 6, dtype=torch.bool))
    assert none.last_hidden.shape == (0, 32)
