"""Every registered model, the moment it is registered: forward/backward with padding, padding
invariance, save → load identity. Parametrised over the registry."""

import pytest
import torch

import babelzoo
from babelzoo.zoo.factory import build_model, model_config
from babelzoo.zoo.layers import LayerStack

# encoders; the encoder–decoders have their own tests (test_seq2seq.py)
TEXT_TINY = [n for n in babelzoo.list_models("*tiny") if model_config(n).fusion is None
             and model_config(n).text.vocab_size <= 50000 and not model_config(n).text.is_encoder_decoder]


def batch(config, lengths=(13, 9, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    pad = config.text.pad_token_id
    ids = torch.full((len(lengths), max(lengths)), pad)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, config.text.vocab_size, (n,), generator=g)
    return ids, ids.ne(pad).long()


@pytest.mark.parametrize("name", babelzoo.list_models())
def test_every_entry_has_a_card_and_valid_config(name):
    entry = babelzoo.zoo.factory.model_entry(name)
    assert len(entry.doc) > 40, f"{name} needs a model card"
    config = entry.config()
    assert config.architecture == name
    assert babelzoo.ModelConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize("name", TEXT_TINY)
def test_forward_backward_with_padding(name):
    model = babelzoo.create_model(name)
    config = model.config
    ids, mask = batch(config)
    # two segments where the model tells segments apart, so its segment parameters take part
    segments = {"segment_ids": (torch.arange(13) >= 6).long().expand_as(ids)} if config.text.segment_vocab_size >= 2 else {}
    out = model(ids, attention_mask=mask, output_hidden_states=True, **segments)
    assert out.last_hidden.shape == (3, 13, config.text.hidden_size)
    assert torch.isfinite(out.last_hidden).all()
    assert out.pooled is None or out.pooled.shape == (3, config.text.hidden_size)
    if isinstance(model.encoder, LayerStack):  # an RNN returns its input and output only
        assert len(out.hidden_states) == config.text.num_layers + 1
    loss = out.last_hidden[mask.bool()].pow(2).mean()
    if out.pooled is not None:
        loss = loss + out.pooled.sum()
    if model.lm_head is not None:
        loss = loss + model.mlm_logits(out.last_hidden, mask.bool()).logsumexp(-1).mean()
    loss.backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    if config.text.segment_vocab_size == 0:
        no_grad = [n for n in no_grad if "segment" not in n]
    # XLNet's query-stream start w is read by the two-stream pre-training pass only
    no_grad = [n for n in no_grad if n != "encoder.mask_embedding"]
    assert not [n for n in no_grad if "language" not in n], f"parameters without a finite gradient: {no_grad}"


@pytest.mark.parametrize("name", TEXT_TINY)
def test_padding_does_not_change_real_token_outputs(name):
    model = babelzoo.create_model(name).eval()
    ids, mask = batch(model.config, lengths=(11, 6))
    with torch.no_grad():
        padded = model(ids, attention_mask=mask).last_hidden
        alone = model(ids[1:, :6], attention_mask=mask[1:, :6]).last_hidden
    torch.testing.assert_close(padded[1, :6], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", TEXT_TINY)
def test_save_load_gives_identical_outputs(name, tmp_path):
    model = babelzoo.create_model(name).eval()
    ids, mask = batch(model.config)
    model.save_pretrained(tmp_path / name)
    files = {p.name for p in (tmp_path / name).iterdir()}
    weights = {".babelzoo-files.json", "config.json", "model.safetensors"}
    loaded = babelzoo.from_pretrained(tmp_path / name).eval()
    assert files == weights and loaded.tokenizer is None  # a fresh model has no tokenizer until one is attached
    with torch.no_grad():
        a, b = model(ids, attention_mask=mask), loaded(ids, attention_mask=mask)
    assert torch.equal(a.last_hidden, b.last_hidden)
    if model.lm_head is not None:
        assert loaded.lm_head.decoder.weight is loaded.embeddings.word.weight  # still tied
        assert torch.equal(model.mlm_logits(a.last_hidden), loaded.mlm_logits(b.last_hidden))


def test_language_embeddings_change_the_output():
    model = babelzoo.create_model("xlm_tiny").eval()
    ids, mask = batch(model.config)
    with torch.no_grad():
        en = model(ids, attention_mask=mask, language_ids=torch.zeros_like(ids)).last_hidden
        de = model(ids, attention_mask=mask, language_ids=torch.ones_like(ids)).last_hidden
    assert not torch.allclose(en, de)


def test_albert_shares_one_block_and_factorises_embeddings():
    model = babelzoo.create_model("albert_tiny", num_layers=6)
    assert len(model.encoder.layers) == 1
    assert model.embeddings.word.weight.shape == (8000, 64)
    assert model.embeddings.project.weight.shape == (128, 64)
    assert model.lm_head.dense.weight.shape == (64, 128)
    bigger = babelzoo.create_model("albert_tiny", num_layers=12)
    assert bigger.num_parameters() == model.num_parameters()


def test_xlmr_positions_follow_roberta():
    model = babelzoo.create_model("xlmr_tiny")
    ids = torch.tensor([[0, 7, 8, 2, 1, 1]])  # <s> a b </s> <pad> <pad>, pad id 1
    positions = model.embeddings.default_positions(ids, ids.shape, ids.device)
    assert positions.tolist() == [[2, 3, 4, 5, 1, 1]]


def test_explicit_positions_count_from_zero_on_offset_models():
    # TLM and K-BERT give 0-based positions; an XLM-R-style model shifts them past its padding
    # index itself, so 0..L-1 equals its default positions, and a restart at 0 equals a fresh row.
    model = babelzoo.create_model("xlmr_tiny").eval()
    ids = torch.tensor([[0, 7, 8, 2, 0, 9, 2]])
    with torch.no_grad():
        default = model.embeddings(ids)
        explicit = model.embeddings(ids, position_ids=torch.arange(7)[None])
        restart = model.embeddings(ids, position_ids=torch.tensor([[0, 1, 2, 3, 0, 1, 2]]))
        second = model.embeddings(ids[:, 4:])
    torch.testing.assert_close(explicit, default)
    torch.testing.assert_close(restart[:, 4:], second)
    with pytest.raises(ValueError, match="position id 514 is out of range"):
        model.embeddings(ids[:, :1], position_ids=torch.tensor([[514]]))


def test_a_single_segment_embedding_serves_every_segment():
    # XLM-R has one token-type row: TLM's second segment uses it too instead of indexing past it.
    model = babelzoo.create_model("xlmr_tiny").eval()
    assert model.embeddings.segment.num_embeddings == 1
    ids = torch.tensor([[0, 7, 8, 2]])
    with torch.no_grad():
        torch.testing.assert_close(model.embeddings(ids, segment_ids=torch.tensor([[0, 0, 1, 1]])),
                                   model.embeddings(ids))


def test_mlm_logits_at_positions_equal_full_logits():
    model = babelzoo.create_model("mbert_tiny").eval()
    ids, mask = batch(model.config)
    hidden = model(ids, attention_mask=mask).last_hidden
    picked = torch.zeros_like(mask, dtype=torch.bool)
    picked[0, 3] = picked[2, 1] = True
    full = model.mlm_logits(hidden)
    torch.testing.assert_close(model.mlm_logits(hidden, picked), full[picked])


def test_a_text_model_takes_no_images_or_speech():
    # Only a fusion model's forward names them; a text model's refuses them as any unknown keyword.
    model = babelzoo.create_model("xlm_tiny")
    ids = torch.ones(1, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="unexpected keyword argument 'pixel_values'"):
        model(ids, pixel_values=torch.zeros(1, 3, 8, 8))
    with pytest.raises(TypeError, match="unexpected keyword argument 'audio_features'"):
        model(ids, audio_features=torch.zeros(1, 4, 80))


@pytest.mark.parametrize("part", ["vision", "audio"])
def test_a_tower_without_a_fusion_part_is_refused_when_the_model_is_built(part):
    from babelzoo.errors import ConfigError
    from babelzoo.zoo.model import BabelModel

    config = model_config("xlm_tiny", **{part: {}})  # the override itself is allowed: a fusion part may follow
    inputs = {"vision": "pixel_values", "audio": "audio_features"}[part]
    message = (f"ModelConfig.{part}: model 'xlm_tiny' has a {part} part but no fusion part, so nothing would read "
               f"its {inputs}; add a fusion part (e.g. fusion={{'mode': 'single_stream'}}; modes: single_stream, "
               f"cross_attention, dual) or remove {part}")
    for build in (build_model, BabelModel, lambda _: babelzoo.create_model("xlm_tiny", **{part: {}})):
        with pytest.raises(ConfigError) as err:
            build(config)
        assert str(err.value) == message
    fused = build_model(config.override(fusion={"num_layers": 1, "projection_dim": 8}))
    assert type(fused).__name__ == "FusionModel" and getattr(fused.config, part) is not None


def test_build_model_from_plain_config():
    config = babelzoo.ModelConfig(text=babelzoo.TransformerConfig(vocab_size=50, hidden_size=16, num_heads=2,
                                                           num_layers=1, intermediate_size=32))
    model = build_model(config)
    assert model(torch.ones(2, 4, dtype=torch.long)).last_hidden.shape == (2, 4, 16)
