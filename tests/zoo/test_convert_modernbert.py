"""ModernBERT against transformers' ``ModernBertModel`` / ``ModernBertForMaskedLM``: random
weights at odd sizes (head dims 16, 18 and 8, windows shorter than the batch, every global
period), imported and exported with fp32 parity on padded batches."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

import babelzoo  # noqa: E402
from babelzoo.zoo.convert import export_hf, import_hf  # noqa: E402
from babelzoo.zoo.families.modernbert.config import ModernBertConfig  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402

TOL = 1e-5
SPECIALS = dict(bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)
CONFIGS = {  # name: (HF config fields, MLM class?, attention implementation)
    "window8_every3_mlm": (dict(vocab_size=97, hidden_size=48, num_attention_heads=3, num_hidden_layers=4,
                                intermediate_size=40, local_attention=8, global_attn_every_n_layers=3,
                                pad_token_id=0), True, "sdpa"),
    "hd18_every2_untied_tanh": (dict(vocab_size=83, hidden_size=36, num_attention_heads=2, num_hidden_layers=5,
                                     intermediate_size=28, local_attention=6, global_attn_every_n_layers=2,
                                     global_rope_theta=1000.0, local_rope_theta=500.0,
                                     hidden_activation="gelu_pytorch_tanh", classifier_activation="silu",
                                     tie_word_embeddings=False, pad_token_id=0), True, "eager"),
    "all_global_base_model": (dict(vocab_size=61, hidden_size=32, num_attention_heads=4, num_hidden_layers=3,
                                   intermediate_size=24, local_attention=16, global_attn_every_n_layers=1,
                                   norm_eps=1e-6, pad_token_id=3), False, "sdpa"),
}


def hf_model(name: str):
    fields, mlm, attention = CONFIGS[name]
    config = transformers.ModernBertConfig(**{**SPECIALS, **fields})
    config._attn_implementation = attention
    cls = transformers.ModernBertForMaskedLM if mlm else transformers.ModernBertModel
    model = cls(config).eval()
    with torch.no_grad():  # every tensor distinct (norms away from 1), so a swapped weight shows
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model


def batch(pad: int, vocab: int, length: int = 23):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (3, length), generator=generator)
    mask = torch.ones_like(ids)
    for row, real in ((1, 15), (2, 5)):
        ids[row, real:] = pad
        mask[row, real:] = 0
    return ids, mask


def compare(ours, theirs, ids, mask):
    with torch.no_grad():
        out = theirs(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        mine = ours(ids, attention_mask=mask)
    real = mask.bool()
    hidden = out.hidden_states[-1] if hasattr(out, "logits") else out.last_hidden_state
    assert (mine.last_hidden[real] - hidden[real]).abs().max() <= TOL
    if hasattr(out, "logits"):
        logits = ours.mlm_logits(mine.last_hidden)
        assert (logits[real] - out.logits[real]).abs().max() <= TOL
    return hidden


@pytest.mark.parametrize("name", list(CONFIGS))
def test_import_matches_transformers(name, tmp_path):
    theirs = hf_model(name)
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    fields = CONFIGS[name][0]
    text = ours.config.text
    assert isinstance(text, ModernBertConfig)
    assert (text.global_every, text.local_window) == (fields["global_attn_every_n_layers"], fields["local_attention"])
    assert (ours.lm_head is not None) == CONFIGS[name][1]
    ids, mask = batch(fields["pad_token_id"], fields["vocab_size"])
    compare(ours, theirs, ids, mask)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_export_round_trips_through_transformers(name, tmp_path):
    theirs = hf_model(name)
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    with torch.no_grad():  # move every weight, so the export carries ours and not the originals
        for param in ours.parameters():
            param.mul_(1.1)
    export_hf(ours, tmp_path / "back")
    again = transformers.AutoModelForMaskedLM if CONFIGS[name][1] else transformers.AutoModel
    reloaded = again.from_pretrained(tmp_path / "back").eval()
    assert type(reloaded) is type(theirs)
    fields = CONFIGS[name][0]
    compare(ours, reloaded, *batch(fields["pad_token_id"], fields["vocab_size"]))


def test_a_fresh_zoo_model_exports_and_transformers_reads_the_same_function(tmp_path):
    ours = babelzoo.create_model("modernbert_tiny", vocab_size=120, num_layers=4, local_window=10).eval()
    with torch.no_grad():
        for param in ours.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    export_hf(ours, tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf").eval()
    compare(ours, theirs, *batch(0, 120, length=31))


def test_local_layers_see_half_the_window_either_side():
    """A local layer's output at position i changes with token j only if |i − j| <= window/2."""
    model = babelzoo.create_model("modernbert_tiny", vocab_size=50, num_layers=2, global_every=2, local_window=6)
    model.eval()
    ids = torch.randint(4, 50, (1, 20))
    with torch.no_grad():
        state = model.encoder.prepare(None, 20)
        x = model.embeddings(ids)
        base = model.encoder.run(x, state, 1, 2)
        changed = x.clone()
        changed[0, 10] += 1.0
        moved = (model.encoder.run(changed, state, 1, 2) - base).abs().amax(-1)[0]
    assert moved.nonzero().flatten().tolist() == [7, 8, 9, 10, 11, 12, 13]


@pytest.mark.parametrize("field, value, message", [
    ("attention_bias", True, "attention_bias=True"),
    ("decoder_bias", False, "decoder_bias=False"),
])
def test_a_biased_checkpoint_is_refused_naming_the_field(field, value, message, tmp_path):
    config = transformers.ModernBertConfig(**SPECIALS, **{**CONFIGS["window8_every3_mlm"][0], field: value})
    transformers.ModernBertForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        import_hf(tmp_path)


def test_irregular_layer_types_are_refused(tmp_path):
    fields = {**CONFIGS["window8_every3_mlm"][0]}
    fields.pop("global_attn_every_n_layers")
    config = transformers.ModernBertConfig(**SPECIALS, **fields, layer_types=["full_attention", "sliding_attention",
                                                                               "full_attention", "full_attention"])
    transformers.ModernBertModel(config).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="is not a global layer every n layers"):
        import_hf(tmp_path)
