"""XLNet against transformers' ``XLNetModel`` / ``XLNetLMHeadModel``: random weights at odd
sizes (hidden 48 with 3 heads, 3 layers, vocabulary 101), imported and exported, with fp32
parity ≤ 1e-5 on padded batches, with segment ids, on the two-stream pass (Hugging Face's
``perm_mask`` + ``target_mapping``) and causally (``attn_type='uni'``)."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

import babelzoo  # noqa: E402
from babelzoo.zoo.convert import export_hf, import_hf  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402
from babelzoo.zoo.families.xlnet.config import XLNetConfig  # noqa: E402

TOL = 1e-5
CONFIGS = {  # name: (HF config fields, LM-head class?)
    "lm_h48_heads3": (dict(vocab_size=101, d_model=48, n_layer=3, n_head=3, d_inner=40, pad_token_id=0), True),
    "lm_untied_clamped_tanh": (dict(vocab_size=83, d_model=36, n_layer=2, n_head=2, d_inner=28, clamp_len=6,
                                    ff_activation="gelu_new", tie_word_embeddings=False, layer_norm_eps=1e-6,
                                    pad_token_id=5), True),
    "base_model": (dict(vocab_size=61, d_model=32, n_layer=3, n_head=4, d_inner=24, pad_token_id=3), False),
}


def hf_model(name: str, **changes):
    fields, lm = CONFIGS[name]
    config = transformers.XLNetConfig(**{**fields, **changes}, mem_len=None)
    model = (transformers.XLNetLMHeadModel if lm else transformers.XLNetModel)(config).eval()
    with torch.no_grad():  # every tensor distinct (norms away from 1), so a swapped weight shows
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model


def batch(pad: int, vocab: int, length: int = 17):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(6, vocab, (3, length), generator=generator)
    mask = torch.ones_like(ids)
    for row, real in ((1, 11), (2, 4)):
        ids[row, real:] = pad
        mask[row, real:] = 0
    segments = torch.zeros_like(ids)
    segments[:, 8:] = 1
    segments[0, 14:] = 2  # XLNet's [CLS] segment: only "same" or "different" counts
    return ids, mask, segments


def permutation(mask: torch.Tensor, predict: int = 3, seed: int = 1):
    """A random order per row and Hugging Face's inputs for it: ``perm_mask`` (1: i may not read
    j, i.e. j is not before i) and ``target_mapping`` on the last ``predict`` real positions."""
    generator = torch.Generator().manual_seed(seed)
    b, length = mask.shape
    rank = torch.stack([torch.randperm(length, generator=generator) for _ in range(b)])
    rank = torch.where(mask.bool(), rank, rank + length)  # padding after every real token
    visible = rank[:, None, :] < rank[:, :, None]
    targets = torch.zeros(b, predict, length)
    for row in range(b):
        last = rank[row].argsort()[: int(mask[row].sum())][-predict:]
        targets[row, torch.arange(predict), last] = 1.0
    return visible, targets


def assert_matches(ours, theirs, ids, mask, segments=None):
    with torch.no_grad():
        out = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments, output_hidden_states=True)
        mine = ours(ids, attention_mask=mask, segment_ids=segments)
    real = mask.bool()
    hidden = out.hidden_states[-1] if hasattr(out, "logits") else out.last_hidden_state
    assert (mine.last_hidden[real] - hidden[real]).abs().max() <= TOL
    if hasattr(out, "logits"):
        assert (ours.mlm_logits(mine.last_hidden)[real] - out.logits[real]).abs().max() <= TOL


def assert_two_stream_matches(ours, theirs, ids, mask, segments):
    visible, targets = permutation(mask)
    with torch.no_grad():
        out = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments, perm_mask=(~visible).float(),
                     target_mapping=targets)
        _, query = ours.encoder.two_stream(ours.embeddings(ids), visible, targets, mask, segments)
    assert (ours.mlm_logits(query) - out.logits).abs().max() <= TOL


@pytest.mark.parametrize("name", list(CONFIGS))
def test_import_matches_transformers_with_padding_and_segments(name, tmp_path):
    theirs = hf_model(name)
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    fields, lm = CONFIGS[name]
    text = ours.config.text
    assert isinstance(text, XLNetConfig)
    assert (text.hidden_size, text.num_heads, text.clamp_len) == (fields["d_model"], fields["n_head"],
                                                                   fields.get("clamp_len", -1))
    assert (ours.lm_head is not None) == lm
    ids, mask, segments = batch(fields["pad_token_id"], fields["vocab_size"])
    assert_matches(ours, theirs, ids, mask)
    assert_matches(ours, theirs, ids, mask, segments)


@pytest.mark.parametrize("name", [n for n, (_, lm) in CONFIGS.items() if lm])
def test_the_two_stream_pass_matches_transformers_perm_mask_and_target_mapping(name, tmp_path):
    theirs = hf_model(name)
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    fields = CONFIGS[name][0]
    assert_two_stream_matches(ours, theirs, *batch(fields["pad_token_id"], fields["vocab_size"]))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_export_round_trips_through_transformers(name, tmp_path):
    theirs = hf_model(name)
    theirs.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    with torch.no_grad():  # move every weight, so the export carries ours and not the originals
        for param in ours.parameters():
            param.mul_(1.1)
    export_hf(ours, tmp_path / "back")
    lm = CONFIGS[name][1]
    reloaded = (transformers.XLNetLMHeadModel if lm else transformers.AutoModel).from_pretrained(tmp_path / "back")
    reloaded.eval()
    assert type(reloaded) is type(theirs)
    fields = CONFIGS[name][0]
    ids, mask, segments = batch(fields["pad_token_id"], fields["vocab_size"])
    assert_matches(ours, reloaded, ids, mask, segments)
    if lm:
        assert_two_stream_matches(ours, reloaded, ids, mask, segments)


def test_causal_attention_is_transformers_unidirectional_xlnet(tmp_path):
    theirs = hf_model("base_model", attn_type="uni")
    bidirectional = hf_model("base_model")
    bidirectional.load_state_dict(theirs.state_dict())
    bidirectional.save_pretrained(tmp_path / "hf")
    ours = import_hf(tmp_path / "hf").eval()
    ids = batch(3, 61)[0][:1]
    with torch.no_grad():
        expected = theirs(ids).last_hidden_state
        assert (ours(ids, causal=True).last_hidden - expected).abs().max() <= TOL
        assert (ours(ids).last_hidden - expected).abs().max() > 1e-3  # bidirectional differs


def test_a_fresh_zoo_model_exports_and_transformers_reads_the_same_function(tmp_path):
    ours = babelzoo.create_model("xlnet_tiny", vocab_size=120, hidden_size=48, num_heads=3, num_layers=3).eval()
    with torch.no_grad():
        for param in ours.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    export_hf(ours, tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (written["architectures"], written["attn_type"], written["d_head"]) == (["XLNetLMHeadModel"], "bi", 16)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(theirs) is transformers.XLNetLMHeadModel
    ids, mask, segments = batch(0, 120, length=23)
    assert_matches(ours, theirs, ids, mask, segments)
    assert_two_stream_matches(ours, theirs, ids, mask, segments)


@pytest.mark.parametrize("field, value, message", [
    ("bi_data", True, "bi_data=True"),
    ("attn_type", "uni", "attn_type='uni'"),
])
def test_a_checkpoint_babelzoo_cannot_run_is_refused_naming_the_field(field, value, message, tmp_path):
    config = transformers.XLNetConfig(**{**CONFIGS["base_model"][0], field: value})
    transformers.XLNetModel(config).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        import_hf(tmp_path)
