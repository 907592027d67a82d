"""Hugging Face interop: random HF models of each family (with and without MLM head) import with
fp32 parity, export back with parity, and every mismatch is an error naming keys and shapes."""

import json
import warnings
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from babelzoo.zoo.convert import FAMILIES, export_hf, family_for, import_hf  # noqa: E402
from babelzoo.zoo.convert.keymap import to_hf, to_ours  # noqa: E402
from babelzoo.zoo.factory import create_model  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402
from babelzoo.zoo.pretrained import from_pretrained  # noqa: E402
from babelzoo.zoo.checkpoint_io import save_weights  # noqa: E402

TOL = 1e-5
SIZES = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
FAMILY_CLASSES = {  # family: (config class, extra config, base class, MLM class)
    "bert": ("BertConfig", dict(max_position_embeddings=40), "BertModel", "BertForMaskedLM"),
    "xlmr": ("XLMRobertaConfig", dict(max_position_embeddings=42, type_vocab_size=1), "XLMRobertaModel",
             "XLMRobertaForMaskedLM"),
    "albert": ("AlbertConfig", dict(max_position_embeddings=40, embedding_size=16, hidden_act="gelu_new"),
               "AlbertModel", "AlbertForMaskedLM"),
}


def hf_model(family: str, mlm: bool, **overrides):
    config_cls, extra, base, head = FAMILY_CLASSES[family]
    config = getattr(transformers, config_cls)(**{**SIZES, **extra, **overrides})
    model = getattr(transformers, head if mlm else base)(config).eval()
    with torch.no_grad():  # make every tensor distinct, so a swapped weight/bias or q/k/v shows
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return model


def padded_batch(pad: int, vocab: int = SIZES["vocab_size"]):
    ids = torch.randint(3, vocab, (3, 11))
    mask = torch.ones_like(ids)
    for row, length in ((1, 7), (2, 3)):
        ids[row, length:] = pad
        mask[row, length:] = 0
    return ids, mask


def hf_outputs(model, ids, mask):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    return out.hidden_states[-1], getattr(out, "logits", None), getattr(out, "pooler_output", None)


def ours_outputs(model, ids, mask):
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
        logits = model.mlm_logits(out.last_hidden) if model.lm_head is not None else None
    return out.last_hidden, logits, out.pooled


def max_diff(a, b):
    return (a - b).abs().max().item()


# The encoder conversions whose HF configs differ in more than sizes have parity tests of their own.
OWN_FILE = {"modernbert": "test_convert_modernbert.py", "xlnet": "test_convert_xlnet.py"}


def test_every_encoder_conversion_has_a_parity_test():
    declared = {family.name for _, family in FAMILIES.items()}
    assert declared == set(FAMILY_CLASSES) | set(OWN_FILE), "a conversion is neither in FAMILY_CLASSES nor OWN_FILE"
    assert all((Path(__file__).parent / file).is_file() for file in OWN_FILE.values())
    for name, (_, _, base, mlm) in FAMILY_CLASSES.items():  # the classes used here are the ones converted
        assert (family_for(name).base_class, family_for(name).mlm_class) == (base, mlm)


@pytest.mark.parametrize("mlm", [False, True], ids=["Model", "ForMaskedLM"])
@pytest.mark.parametrize("family", list(FAMILY_CLASSES))
def test_import_and_export_parity(family, mlm, tmp_path):
    reference = hf_model(family, mlm)
    reference.save_pretrained(tmp_path / "hf")
    model = import_hf(tmp_path / "hf").eval()
    assert model.config.architecture == family
    assert (model.pooler is not None) == (not mlm)  # BertModel has a pooler; *ForMaskedLM has not
    assert (model.lm_head is not None) == mlm
    assert model.config.text.position_offset == (2 if family == "xlmr" else 0)

    ids, mask = padded_batch(reference.config.pad_token_id)
    want = hf_outputs(reference, ids, mask)
    got = ours_outputs(model, ids, mask)
    assert max_diff(got[0], want[0]) <= TOL
    if mlm:
        assert max_diff(got[1], want[1]) <= TOL
    else:
        assert max_diff(got[2], want[2]) <= TOL

    export_hf(model, tmp_path / "out")
    auto = transformers.AutoModelForMaskedLM if mlm else transformers.AutoModel
    back, info = auto.from_pretrained(tmp_path / "out", output_loading_info=True)
    assert type(back).__name__ == FAMILY_CLASSES[family][3 if mlm else 2]
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    again = hf_outputs(back.eval(), ids, mask)
    assert max_diff(again[0], want[0]) <= TOL
    if mlm:
        assert max_diff(again[1], want[1]) <= TOL
    else:
        assert max_diff(again[2], want[2]) <= TOL


def test_xlmr_full_vocabulary_and_position_offset(tmp_path):
    """Real XLM-R sizes its vocabulary at 250,002 pieces and its position table at 512 + 2."""
    reference = hf_model("xlmr", True, vocab_size=250002, hidden_size=16, num_attention_heads=2,
                         intermediate_size=16, num_hidden_layers=1, max_position_embeddings=514)
    reference.save_pretrained(tmp_path)
    model = import_hf(tmp_path).eval()
    assert model.config.text.vocab_size == 250002 and model.config.text.max_positions == 512
    ids, mask = padded_batch(1, vocab=250002)
    want, got = hf_outputs(reference, ids, mask), ours_outputs(model, ids, mask)
    assert max_diff(got[0], want[0]) <= TOL and max_diff(got[1], want[1]) <= TOL


def test_legacy_pickle_checkpoint_with_buffers_aliases_and_nsp_head(tmp_path):
    """An old-style BertForPreTraining ``pytorch_model.bin``: LayerNorm gamma/beta names,
    position_ids/token_type_ids buffers, tied decoder copies and the NSP head."""
    reference = hf_model("bert", True)
    reference.save_pretrained(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    state = {}
    for key, value in reference.state_dict().items():
        key = key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[key] = value.clone()
    state["bert.embeddings.position_ids"] = torch.arange(40)[None]
    state["bert.embeddings.token_type_ids"] = torch.zeros(1, 40, dtype=torch.long)
    state["cls.seq_relationship.weight"] = torch.randn(2, 32)
    state["cls.seq_relationship.bias"] = torch.randn(2)
    assert "cls.predictions.decoder.weight" in state and "cls.predictions.decoder.bias" in state
    torch.save(state, tmp_path / "pytorch_model.bin")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["BertForPreTraining"]}))

    with pytest.warns(UserWarning, match=r"cls\.seq_relationship\.bias, cls\.seq_relationship\.weight"):
        model = import_hf(tmp_path).eval()
    ids, mask = padded_batch(0)
    want, got = hf_outputs(reference, ids, mask), ours_outputs(model, ids, mask)
    assert max_diff(got[0], want[0]) <= TOL and max_diff(got[1], want[1]) <= TOL

    state["cls.predictions.decoder.weight"] = state["cls.predictions.decoder.weight"] + 1
    torch.save(state, tmp_path / "pytorch_model.bin")
    with warnings.catch_warnings(), pytest.raises(CheckpointError, match=r"cls\.predictions\.decoder\.weight differs"):
        warnings.simplefilter("ignore")
        import_hf(tmp_path)


def test_untied_decoder_round_trip(tmp_path):
    reference = hf_model("bert", True, tie_word_embeddings=False)
    decoder = reference.cls.predictions.decoder.weight
    assert decoder.data_ptr() != reference.bert.embeddings.word_embeddings.weight.data_ptr()
    reference.save_pretrained(tmp_path / "hf")
    model = import_hf(tmp_path / "hf").eval()
    assert not model.config.text.tie_word_embeddings
    assert torch.equal(model.lm_head.decoder.weight, decoder)
    export_hf(model, tmp_path / "out")
    back = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    ids, mask = padded_batch(0)
    assert max_diff(hf_outputs(back, ids, mask)[1], hf_outputs(reference, ids, mask)[1]) <= TOL


def test_sharded_checkpoint_and_from_pretrained_on_hf_directory(tmp_path):
    reference = hf_model("albert", True, vocab_size=400)
    reference.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    (tmp_path / "spiece.model").write_bytes(albert_sentencepiece_model())
    model = from_pretrained(tmp_path).eval()  # the generic loader recognises an HF directory
    ids, mask = padded_batch(0, vocab=400)
    assert max_diff(ours_outputs(model, ids, mask)[1], hf_outputs(reference, ids, mask)[1]) <= TOL
    text = ["Return the value of the named attribute.", "A <mask>-less sentence, with punctuation!"]
    hf_tokenizer = transformers.AlbertTokenizer.from_pretrained(str(tmp_path))
    assert [model.tokenizer.encode(t) for t in text] == [hf_tokenizer(t)["input_ids"] for t in text]


def test_registered_model_exports_with_pooler_and_mlm_head(tmp_path):
    model = create_model("mbert_tiny", num_layers=2).eval()
    export_hf(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"] and config["vocab_size"] == 8000
    base = transformers.AutoModel.from_pretrained(tmp_path).eval()  # reads the pooler under bert.
    ids, mask = padded_batch(0, vocab=8000)
    got = ours_outputs(model, ids, mask)
    want = hf_outputs(base, ids, mask)
    assert max_diff(got[0], want[0]) <= TOL and max_diff(got[2], want[2]) <= TOL


def albert_sentencepiece_model(vocab_size: int = 400) -> bytes:
    """A unigram model in ALBERT's layout (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4)."""
    import io
    from pydoc_data.topics import topics

    import sentencepiece as spm

    text = [" ".join(topics[name].split())[:4000].lower() for name in sorted(topics)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", pad_id=0, unk_id=1, bos_id=2, eos_id=3,
                                   bos_piece="[CLS]", eos_piece="[SEP]", user_defined_symbols=["[MASK]"],
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def xlmr_sentencepiece_model(vocab_size: int = 400) -> bytes:
    """A unigram model in XLM-R's layout (<unk>=0, <s>=1, </s>=2, no <pad>), trained on the
    Python language reference that ships with CPython."""
    import io
    from pydoc_data.topics import topics

    import sentencepiece as spm

    text = [" ".join(topics[name].split())[:4000] for name in sorted(topics)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


def test_xlmr_tokenizer_imports_and_exports_with_hf_ids(tmp_path):
    """XLM-R's fairseq ids: <s>=0, <pad>=1, </s>=2, <unk>=3, pieces shifted by one, <mask> last."""
    reference = hf_model("xlmr", True, vocab_size=402)
    reference.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "sentencepiece.bpe.model").write_bytes(xlmr_sentencepiece_model())
    model = import_hf(tmp_path / "hf").eval()
    assert type(model.tokenizer).__name__ == "SentencePieceTokenizer" and model.tokenizer.vocab_size == 402

    sentences = ["The name is rebound if it was already bound.", "Größe <mask> straße: 東京 ÉTÉ!",
                 "  Multiple   spaces\tand a tab.", "x"]
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    want = hf_tokenizer(sentences, padding=True, return_tensors="pt")
    batch = model.tokenizer.batch_encode(sentences)
    assert torch.equal(batch["input_ids"], want["input_ids"])
    assert hf_tokenizer.mask_token_id == model.tokenizer.specials.mask == 401
    got = ours_outputs(model, batch["input_ids"], batch["attention_mask"])
    ref = hf_outputs(reference, want["input_ids"], want["attention_mask"])
    real = want["attention_mask"].bool()
    assert max_diff(got[1][real], ref[1][real]) <= TOL

    export_hf(model, tmp_path / "out")
    assert (tmp_path / "out" / "sentencepiece.bpe.model").read_bytes() == model.tokenizer.model_proto
    again = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")(sentences, padding=True)["input_ids"]
    assert again == want["input_ids"].tolist()


def test_tokenizer_that_does_not_fit_the_model_is_an_error(tmp_path):
    hf_model("xlmr", False, vocab_size=300).save_pretrained(tmp_path)
    (tmp_path / "sentencepiece.bpe.model").write_bytes(xlmr_sentencepiece_model())
    with pytest.raises(CheckpointError, match="tokenizer has 402 pieces but the model's embedding table has 300 rows"):
        import_hf(tmp_path)


# --- strictness ----------------------------------------------------------------------------------

def _edit_config(directory, **changes):
    path = directory / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def test_wrong_vocab_size_names_keys_and_shapes(tmp_path):
    hf_model("bert", True).save_pretrained(tmp_path)
    _edit_config(tmp_path, vocab_size=120)
    with pytest.raises(CheckpointError) as err:
        import_hf(tmp_path)
    message = str(err.value)
    assert "bert.embeddings.word_embeddings.weight: checkpoint (97, 32) vs config (120, 32)" in message
    assert "cls.predictions.bias: checkpoint (97,) vs config (120,)" in message


def test_missing_layer_names_the_missing_keys(tmp_path):
    from safetensors.torch import load_file

    hf_model("xlmr", False).save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    save_weights({k: v for k, v in state.items() if ".layer.1." not in k}, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"missing keys \(16\): encoder\.layer\.1\.attention\.output\.LayerNorm"
                                              r"\.bias \(32,\)"):
        import_hf(tmp_path)


def test_extra_layer_is_unexpected(tmp_path):
    hf_model("bert", False).save_pretrained(tmp_path)
    _edit_config(tmp_path, num_hidden_layers=1)
    with pytest.raises(CheckpointError, match=r"unexpected keys \(16\): encoder\.layer\.1\."):
        import_hf(tmp_path)


@pytest.mark.parametrize("changes, pattern", [
    (dict(model_type="gpt2"),
     r"unknown Hugging Face model_type 'gpt2'.*known: albert, bert, modernbert, xlm-roberta"),
    (dict(model_type="xlm-robert"), r"did you mean 'xlm-roberta'"),
    (dict(architectures=["BertForQuestionAnswering"]), r"architecture 'BertForQuestionAnswering' is "
                                                        r"not supported"),
    (dict(position_embedding_type="relative_key"), r"position_embedding_type='relative_key'"),
    (dict(hidden_act="quick_gelu"), r"hidden_act='quick_gelu' is not supported"),
])
def test_unsupported_configs_are_errors(tmp_path, changes, pattern):
    hf_model("bert", False).save_pretrained(tmp_path)
    _edit_config(tmp_path, **changes)
    with pytest.raises(CheckpointError, match=pattern):
        import_hf(tmp_path)


@pytest.mark.parametrize("name, family, pattern", [
    ("t5rel_prenorm_tiny", "bert", r"norm_position == 'post'"),
    ("xlm_tiny", "bert", r"num_languages == 0"),
    ("albert_tiny", "bert", r"share_layers is False"),
    ("mbert_tiny", "xlmr", r"position_offset == pad_token_id \+ 1"),
    ("nezha_tiny", None, r"no Hugging Face family for architecture 'nezha_tiny'"),
])
def test_export_refuses_what_the_family_cannot_hold(tmp_path, name, family, pattern):
    with pytest.raises(CheckpointError, match=pattern):
        export_hf(create_model(name), tmp_path, family=family)


@pytest.mark.parametrize("family", [f for _, f in FAMILIES.items()], ids=lambda f: f.name)
def test_key_tables_round_trip(family):
    pairs = family.keys.pairs(3, ["base", "pooler", "mlm", "decoder"])
    hf = {k: torch.randn(4, 2) for pair in pairs for k in pair.hf}
    ours = to_ours(hf, pairs)
    assert all(ours[pair.ours].shape == (4 * len(pair.hf), 2) for pair in pairs)  # fused keys concatenated
    # ModernBERT's Wqkv is one tensor; XLNet keeps q, k, v as [H, heads, d] tensors, as babelzoo does
    assert any(len(pair.hf) > 1 for pair in pairs) or family.name in ("modernbert", "xlnet")
    back = to_hf(ours, pairs)
    assert back.keys() == hf.keys() and all(torch.equal(back[k], hf[k]) for k in hf)
    with pytest.raises(CheckpointError, match="no babelzoo counterpart .*: stray"):
        to_ours({**hf, "stray": torch.zeros(1)}, pairs)
