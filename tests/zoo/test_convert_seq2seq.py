"""BART, mBART and T5 against transformers' ``*ForConditionalGeneration``: random weights at odd
sizes (d_model 48, 3 heads, 2+3 layers, vocabulary 101), imported and exported with fp32 logits
parity on padded batches, and ``generate`` giving transformers' tokens (greedy and beam 4)."""

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

import babelzoo  # noqa: E402
from babelzoo.zoo.convert import export_hf, import_hf  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402

TOL = 1e-5
BART_SIZES = dict(vocab_size=101, d_model=48, encoder_layers=2, decoder_layers=3, encoder_attention_heads=3,
                  decoder_attention_heads=3, encoder_ffn_dim=40, decoder_ffn_dim=40, max_position_embeddings=40,
                  forced_eos_token_id=None)
T5_SIZES = dict(vocab_size=101, d_model=48, d_kv=16, d_ff=40, num_layers=2, num_decoder_layers=3, num_heads=3,
                relative_attention_num_buckets=8, relative_attention_max_distance=20)


def hf_config(kind: str, **extra):
    if kind == "bart":
        return transformers.BartConfig(**BART_SIZES, activation_function="gelu", **extra)
    if kind == "bart_untied":
        return transformers.BartConfig(**BART_SIZES, tie_word_embeddings=False, **extra)
    if kind == "mbart":
        return transformers.MBartConfig(**BART_SIZES, scale_embedding=True, decoder_start_token_id=2,
                                        activation_function="relu", **extra)
    if kind == "t5_gated":
        return transformers.T5Config(**{**T5_SIZES, **extra}, feed_forward_proj="gated-gelu")
    return transformers.T5Config(**{**T5_SIZES, **extra})


HF_CLASSES = {"bart": "BartForConditionalGeneration", "bart_untied": "BartForConditionalGeneration", "mbart": "MBartForConditionalGeneration",
              "t5": "T5ForConditionalGeneration", "t5_gated": "T5ForConditionalGeneration"}


def hf_model(kind: str, **extra):
    torch.manual_seed(0)
    model = getattr(transformers, HF_CLASSES[kind])(hf_config(kind, **extra)).eval()
    with torch.no_grad():  # every tensor distinct and large enough for varied generations
        for name, p in model.named_parameters():
            p.normal_(1.0 if "norm" in name and name.endswith("weight") else 0.0, 0.1 if "norm" in name else 0.3)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_(0, 0.3)
        if kind == "bart_untied":  # an untied LM head; the stacks still read the shared embedding
            for stack in (model.model.encoder, model.model.decoder):
                stack.embed_tokens.weight.copy_(model.model.shared.weight)
    return model


def inputs(pad: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 101, (3, 9), generator=g)
    mask = torch.ones_like(src)
    mask[1, 6:] = 0
    mask[2, 4:] = 0
    src = src.masked_fill(mask.eq(0), pad)
    return src, mask, torch.randint(3, 101, (3, 7), generator=g)


def logits(model, src, mask, tgt):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits


KINDS = ["bart", "bart_untied", "mbart", "t5", "t5_gated"]


@pytest.mark.parametrize("kind", KINDS)
def test_import_gives_transformers_logits(kind, tmp_path):
    hf = hf_model(kind)
    hf.save_pretrained(tmp_path)
    ours = import_hf(tmp_path).eval()
    assert ours.config.architecture == kind.split("_")[0]
    text = ours.config.text
    assert text.tie_word_embeddings == (kind != "bart_untied")
    assert (ours.lm_head.weight is ours.word.weight) == text.tie_word_embeddings
    assert (text.num_layers, text.num_decoder_layers, text.hidden_size, text.num_heads) == (2, 3, 48, 3)
    src, mask, tgt = inputs(hf.config.pad_token_id)
    torch.testing.assert_close(logits(ours, src, mask, tgt), logits(hf, src, mask, tgt), atol=TOL, rtol=TOL)
    export_hf(ours, tmp_path / "again")  # and back: the same class holds the same logits
    again = getattr(transformers, HF_CLASSES[kind]).from_pretrained(tmp_path / "again").eval()
    torch.testing.assert_close(logits(again, src, mask, tgt), logits(hf, src, mask, tgt), atol=TOL, rtol=TOL)


# The HF class each tiny encoder–decoder exports as; the test below checks this names every tiny
# entry of a family that declares encoder–decoder conversions, and every such conversion.
EXPORTS_AS = {"bart_tiny": "bart", "mbart_tiny": "mbart", "t5_tiny": "t5"}


def test_every_tiny_encoder_decoder_and_every_conversion_is_tested():
    from babelzoo.zoo.convert.seq2seq import families
    from babelzoo.zoo.family import family_of

    converts = {name for name in babelzoo.list_models("*_tiny")
                if any(c.encoder_decoder for c in family_of(babelzoo.model_config(name).text).hf_conversions())}
    names = {family.name for family in families().values()}
    assert set(EXPORTS_AS) == converts, "EXPORTS_AS must name the tiny entries whose family converts to HF"
    assert set(EXPORTS_AS.values()) == names == {kind.split("_")[0] for kind in KINDS}


@pytest.mark.parametrize("name, kind", EXPORTS_AS.items())
def test_export_gives_the_same_logits_in_transformers(name, kind, tmp_path):
    torch.manual_seed(1)
    ours = babelzoo.create_model(name, vocab_size=101, hidden_size=48, num_heads=3, num_layers=2, decoder_layers=3,
                                 intermediate_size=40, max_positions=40).eval()
    with torch.no_grad():
        for p in ours.parameters():
            p.normal_(0, 0.3)
    export_hf(ours, tmp_path / "hf")
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["architectures"] == [HF_CLASSES[kind]] and written["model_type"] == kind
    hf = getattr(transformers, HF_CLASSES[kind]).from_pretrained(tmp_path / "hf").eval()
    src, mask, tgt = inputs(ours.config.text.pad_token_id)
    torch.testing.assert_close(logits(hf, src, mask, tgt), logits(ours, src, mask, tgt), atol=TOL, rtol=TOL)
    back = import_hf(tmp_path / "hf").eval()
    assert torch.equal(logits(back, src, mask, tgt), logits(ours, src, mask, tgt))


def up_to_end(ids: torch.Tensor, eos: int, pad: int) -> list[list[int]]:
    """Each row up to and including its end token (transformers fills a finished beam with the end
    token where the pad id is 0)."""
    rows = []
    for row in ids.tolist():
        ends = [i for i, t in enumerate(row[1:], 1) if t == eos]
        row = row[:ends[0] + 1] if ends else row
        rows.append([t for t in row])
    return rows


def an_end_token(model, src, mask, **options) -> int:
    """A token the model generates late for the first source (with ``options``, else with
    bigram blocking), never early in any row, and not the pad id: as the end token, rows end
    at different steps."""
    for probe_options in (options, dict(no_repeat_ngram_size=2)):
        probe = model.generate(src, attention_mask=mask, max_new_tokens=8, **probe_options)
        early = set(probe[:, :3].flatten().tolist()) | {model.config.text.pad_token_id}
        late = [int(t) for t in probe[0, 3:] if int(t) not in early]
        if late:
            return late[0]
    raise AssertionError("the model repeats its first tokens: no end token to pick")


GENERATE_CASES = [
    dict(num_beams=1), dict(num_beams=4), dict(num_beams=4, length_penalty=2.0, early_stopping=True),
    dict(num_beams=4, no_repeat_ngram_size=2), dict(num_beams=1, no_repeat_ngram_size=2),
]


@pytest.mark.parametrize("kind", sorted(set(EXPORTS_AS.values())))
@pytest.mark.parametrize("options", GENERATE_CASES, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_generate_gives_transformers_tokens(kind, options, tmp_path):
    # transformers' T5 cache needs as many decoder layers as encoder layers to generate
    hf = hf_model(kind, **({"num_decoder_layers": 2} if kind == "t5" else {}))
    hf.save_pretrained(tmp_path)
    ours = import_hf(tmp_path).eval()
    text = ours.config.text
    src, mask, _ = inputs(text.pad_token_id, seed=3)
    eos = an_end_token(ours, src, mask, **options)
    common = dict(max_new_tokens=10, eos_token_id=eos, pad_token_id=text.pad_token_id,
                  decoder_start_token_id=text.decoder_start_token_id, forced_bos_token_id=None, **options)
    with torch.no_grad():
        theirs = hf.generate(src, attention_mask=mask, do_sample=False, forced_eos_token_id=None, min_length=0,
                             **{"no_repeat_ngram_size": 0, "length_penalty": 1.0, "early_stopping": False, **common})
    ours_ids = ours.generate(src, attention_mask=mask, **common)
    assert up_to_end(ours_ids, eos, text.pad_token_id) == up_to_end(theirs, eos, text.pad_token_id)
    assert ours_ids.shape == theirs.shape


def test_a_checkpoint_with_different_encoder_and_decoder_widths_is_refused(tmp_path):
    hf = transformers.BartForConditionalGeneration(transformers.BartConfig(**{**BART_SIZES, "decoder_ffn_dim": 24}))
    hf.save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="encoder_ffn_dim=40 but decoder_ffn_dim=24"):
        import_hf(tmp_path)


def test_an_untied_lm_head_that_the_config_calls_tied_is_refused(tmp_path):
    hf_model("bart").save_pretrained(tmp_path)
    from safetensors.torch import load_file, save_file

    state = load_file(tmp_path / "model.safetensors")
    state["lm_head.weight"] = torch.randn_like(state["model.shared.weight"])
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="lm_head.weight differs from model.shared.weight"):
        import_hf(tmp_path)


def test_a_layout_no_transformers_class_holds_is_not_exported(tmp_path):
    model = babelzoo.create_model("bart_tiny", norm="rms")
    with pytest.raises(CheckpointError, match=r"no Hugging Face class holds its layout \(BartForConditionalGeneration "
                                              r"needs \[\"norm='layer' \(is 'rms'\)\"\]"):
        export_hf(model, tmp_path / "out")


def test_the_convert_command_round_trips_an_encoder_decoder(tmp_path, capsys):
    from babelzoo.deploy.convert_cli import convert_main

    model = babelzoo.create_model("t5_tiny", vocab_size=101).eval()
    model.save_pretrained(tmp_path / "ckpt")
    assert convert_main(["--to-hf", str(tmp_path / "hf"), "--from", str(tmp_path / "ckpt")]) == 0
    assert "as T5ForConditionalGeneration" in capsys.readouterr().out
    assert convert_main(["--from-hf", str(tmp_path / "hf"), "--to", str(tmp_path / "back")]) == 0
    back = babelzoo.from_pretrained(tmp_path / "back").eval()
    src, mask, tgt = inputs(0)
    assert torch.equal(logits(back, src, mask, tgt), logits(model, src, mask, tgt))


@pytest.fixture(scope="module")
def tagged_tokenizer():
    from babelzoo.datasets.spm import SentencePieceTokenizer

    text = ["the house is red", "das Haus ist rot", "a small dog runs", "ein kleiner Hund rennt",
            "we read books", "wir lesen Bücher"]
    return SentencePieceTokenizer.train({"en": text[::2] * 3, "de": text[1::2] * 3}, vocab_size=40, seed=0,
                                        languages=["en", "de"])


def test_the_tokenizer_and_language_tags_travel_with_an_encoder_decoder(tagged_tokenizer, tmp_path):
    tok = tagged_tokenizer
    torch.manual_seed(0)
    ours = babelzoo.create_model("mbart_tiny", vocab_size=tok.vocab_size, pad_token_id=tok.specials.pad,
                                 max_positions=40).eval()
    export_hf(ours, tmp_path / "hf", tokenizer=tok)
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["languages"] == ["en_XX", "de_DE", "fr_XX", "ro_RO"]
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    for sentence in ("the dog reads", "ein Haus"):
        assert theirs(sentence)["input_ids"] == tok.encode(sentence)
    hf = transformers.MBartForConditionalGeneration.from_pretrained(tmp_path / "hf")
    hf.save_pretrained(tmp_path / "again")  # transformers keeps the key it does not know
    assert json.loads((tmp_path / "again" / "config.json").read_text())["languages"] == written["languages"]

    back = import_hf(tmp_path / "hf")
    assert back.config.text.languages == ours.config.text.languages
    assert back.tokenizer.specials == tok.specials and back.tokenizer.encode("wir lesen") == tok.encode("wir lesen")
    assert back.language_id("de") == tok.specials.language_tags["de"]  # the tokenizer's tag [de]
    with pytest.raises(babelzoo.errors.InputError, match="unknown language tag 'fr'.*tags it knows: de, en"):
        back.language_id("fr")
    src = torch.tensor([tok.encode("the house", add_special_tokens=False) + [tok.specials.sep,
                                                                              tok.specials.language_tags["en"]]])
    out = back.generate(src, max_new_tokens=3, target_language="de")
    assert out[0, 1] == tok.specials.language_tags["de"]  # forced first token


def test_a_tokenizer_that_does_not_fit_is_not_exported(tagged_tokenizer, tmp_path):
    tok = tagged_tokenizer
    small = babelzoo.create_model("mbart_tiny", vocab_size=tok.vocab_size - 1, pad_token_id=tok.specials.pad)
    with pytest.raises(CheckpointError, match=f"{tok.vocab_size} pieces but the model's embedding table has {tok.vocab_size - 1} rows"):
        export_hf(small, tmp_path / "a", tokenizer=tok)
    other_pad = babelzoo.create_model("mbart_tiny", vocab_size=tok.vocab_size, pad_token_id=tok.specials.pad + 1)
    with pytest.raises(CheckpointError, match="pads with id"):
        export_hf(other_pad, tmp_path / "b", tokenizer=tok)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_original_tokenizer_files_are_left_unread_with_a_warning(tmp_path):
    hf = hf_model("bart")
    hf.save_pretrained(tmp_path / "hf")
    (tmp_path / "hf" / "vocab.json").write_text("{}")
    with pytest.warns(UserWarning, match="imported without its tokenizer"):
        model = import_hf(tmp_path / "hf")
    assert getattr(model, "tokenizer", None) is None
