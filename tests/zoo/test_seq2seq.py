"""Every encoder–decoder entry, the moment it is registered (the Transformer ones and CoVe's
LSTM): the forward contract objectives rely on, overrides, padding, save → load identity, cached
decoding equal to the full pass, and the errors for targets past the positions and unknown
language tags."""

import pytest
import torch

import babelzoo
from babelzoo.errors import InputError
from babelzoo.zoo.factory import model_config
from babelzoo.zoo.generation import GenerationSettings, generate
from babelzoo.zoo.families.seq2seq.model import key_mask, shift_right

ALL_TINY = [n for n in babelzoo.list_models("*tiny") if model_config(n).text.is_encoder_decoder]
SEQ2SEQ_TINY = [n for n in ALL_TINY if model_config(n).text.family == "seq2seq"]  # the Transformer ones
SMALL = dict(vocab_size=61, hidden_size=24, num_heads=3, intermediate_size=40, max_positions=32)


def small(name, **extra):
    torch.manual_seed(0)
    model = babelzoo.create_model(name, **{**SMALL, **extra}).eval()
    with torch.no_grad():  # larger weights than the init: outputs that differ from token to token
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
            else:
                p.normal_(0, 0.4)
    return model


def an_end_token(model, src, mask, beams):
    """A token the model generates late for the first source and never in any row's first two
    steps: as the end token, rows then end at different steps."""
    first = model.generate(src, attention_mask=mask, max_new_tokens=8, num_beams=beams, no_repeat_ngram_size=2)
    early = set(first[:, :3].flatten().tolist())
    return next(int(t) for t in first[0, 3:] if int(t) not in early)


def batch(model, lengths=(9, 5, 7), seed=0):
    g = torch.Generator().manual_seed(seed)
    pad = model.config.text.pad_token_id
    ids = torch.full((len(lengths), max(lengths)), pad)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(5, model.config.text.vocab_size, (n,), generator=g)
    return ids, ids.ne(pad).long()


def test_the_encoder_decoder_entries_are_registered():
    assert set(ALL_TINY) == {"bart_tiny", "mbart_tiny", "t5_tiny", "cove_tiny"}
    assert {"bart_base", "mbart_base", "t5_base", "cove_base"} <= set(babelzoo.list_models())


@pytest.mark.parametrize("name", ALL_TINY)
def test_forward_contract_and_backward(name):
    model = babelzoo.create_model(name, vocab_size=97, hidden_size=32, num_layers=1, num_heads=2,
                                  intermediate_size=48, max_positions=40)
    text = model.config.text
    assert text.vocab_size == 97 and text.hidden_size == 32 and text.num_decoder_layers == 1
    src, src_mask = batch(model)
    labels = torch.randint(5, 97, (3, 6))
    labels[1, 4:] = -100
    tgt_in = shift_right(labels, text.decoder_start_token_id, text.pad_token_id)
    out = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt_in,
                decoder_attention_mask=labels.ne(-100).long())
    assert out.logits.shape == (3, 6, 97) and out.logits.dtype == torch.float32
    assert out.encoder_last_hidden.shape == (3, 9, 32)
    loss = torch.nn.functional.cross_entropy(out.logits.transpose(1, 2), labels, ignore_index=-100)
    loss.backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not no_grad, f"parameters without a finite gradient: {no_grad}"


@pytest.mark.parametrize("name", ALL_TINY)
def test_fp16_autocast_on_the_cpu_runs_and_stays_near_float32(name):
    # oneDNN has no fp16 LSTM for an unpacked sequence: CoVe's decoder runs it in float32 there
    torch.manual_seed(0)
    model = babelzoo.create_model(name, vocab_size=97, hidden_size=32, num_layers=1, num_heads=2,
                                  intermediate_size=48, max_positions=40).eval()
    src, src_mask = batch(model)
    tgt_in = torch.randint(5, 97, (3, 6))
    reference = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt_in).logits
    with torch.autocast("cpu", dtype=torch.float16):
        logits = model(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt_in).logits
    assert torch.isfinite(logits).all()
    assert (logits.float() - reference).abs().max() < 2e-2 * reference.abs().max()


def test_shift_right_puts_the_start_token_first_and_reads_ignored_labels_as_padding():
    labels = torch.tensor([[7, 8, 9, -100]])
    assert shift_right(labels, 2, 1).tolist() == [[2, 7, 8, 9]]
    assert shift_right(torch.tensor([[7, -100, -100]]), 0, 0).tolist() == [[0, 7, 0]]


@pytest.mark.parametrize("name", ALL_TINY)
def test_source_padding_does_not_change_the_logits(name):
    model = small(name)
    src, mask = batch(model, lengths=(9, 5))
    tgt = torch.randint(5, 61, (2, 4))
    with torch.no_grad():
        padded = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        alone = model(input_ids=src[1:, :5], decoder_input_ids=tgt[1:]).logits
    torch.testing.assert_close(padded[1], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ALL_TINY)
def test_save_load_gives_identical_logits(name, tmp_path):
    model = small(name)
    src, mask = batch(model)
    tgt = torch.randint(5, 61, (3, 5))
    model.save_pretrained(tmp_path / name)
    loaded = babelzoo.from_pretrained(tmp_path / name).eval()
    assert type(loaded) is type(model)
    assert (loaded.lm_head.weight is loaded.word.weight) == model.config.text.tie_word_embeddings
    with torch.no_grad():
        a = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        b = loaded(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
    assert torch.equal(a, b)


@pytest.mark.parametrize("name", SEQ2SEQ_TINY)
def test_cached_steps_give_the_full_pass_logits(name):
    model = small(name)
    src, mask = batch(model)
    tgt = torch.randint(5, 61, (3, 7))
    with torch.no_grad():
        full = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt).logits
        encoded = model.encode(src, mask)
        memory, cache = model.decoder.memory(encoded), model.decoder.new_cache(3, 7, encoded.dtype, encoded.device)
        first = model.logits(model.decoder(model.word(tgt[:, :3]), memory, key_mask(mask), cache=cache))  # 3 at once
        steps = [model.logits(model.decoder(model.word(tgt[:, t:t + 1]), memory, key_mask(mask), cache=cache))
                 for t in range(3, 7)]
    torch.testing.assert_close(torch.cat([first, *steps], dim=1), full, atol=1e-5, rtol=1e-5)


class Uncached:
    """A decoding step that runs the whole target so far through the decoder, no cache."""

    def __init__(self, model, src, mask, beams):
        self.model = model
        self.encoded = model.encode(src, mask).repeat_interleave(beams, dim=0)
        self.mask = mask.repeat_interleave(beams, dim=0)
        self.history = None

    def step(self, tokens):
        self.history = tokens if self.history is None else torch.cat([self.history, tokens], dim=1)
        out = self.model(attention_mask=self.mask, decoder_input_ids=self.history, encoder_last_hidden=self.encoded)
        return out.logits[:, -1]

    def reorder(self, rows):
        self.history = self.history[rows]


@pytest.mark.parametrize("name", ALL_TINY)
@pytest.mark.parametrize("beams", [1, 3])
def test_cached_generation_equals_uncached_generation_token_for_token(name, beams):
    model = small(name)
    src, mask = batch(model)
    text = model.config.text
    with torch.no_grad():
        eos = an_end_token(model, src, mask, beams)
        cached = model.generate(src, attention_mask=mask, max_new_tokens=12, num_beams=beams,
                                no_repeat_ngram_size=2, eos_token_id=eos)
        reference = Uncached(model, src, mask, beams)
        settings = GenerationSettings(max_new_tokens=12, num_beams=beams, no_repeat_ngram_size=2,
                                      decoder_start_token_id=text.decoder_start_token_id,
                                      forced_bos_token_id=text.forced_bos_token_id, eos_token_id=eos,
                                      pad_token_id=text.pad_token_id, vocab_size=text.vocab_size)
        uncached = generate(reference.step, reference.reorder, 3, src.device, settings)
    assert cached.tolist() == uncached.tolist()
    assert cached[:, 0].eq(text.decoder_start_token_id).all() and cached[0].eq(eos).any()
    assert len({tuple(row) for row in cached.tolist()}) > 1  # the sources lead to different targets


@pytest.mark.parametrize("name", ["mbart_tiny", "cove_tiny"])
@pytest.mark.parametrize("beams", [1, 4])
def test_batched_generation_with_padding_equals_one_source_at_a_time(name, beams):
    model = small(name)
    src, mask = batch(model)
    with torch.no_grad():
        options = dict(max_new_tokens=10, num_beams=beams, no_repeat_ngram_size=2,
                       eos_token_id=an_end_token(model, src, mask, beams))
        together = model.generate(src, attention_mask=mask, **options)
        assert together.eq(model.config.text.pad_token_id).any()  # rows of different lengths
        for row in range(3):
            n = int(mask[row].sum())
            alone = model.generate(src[row:row + 1, :n], **options)[0]
            got = together[row, :len(alone)]
            assert got.tolist() == alone.tolist()
            assert together[row, len(alone):].eq(model.config.text.pad_token_id).all()  # padded after its end


def test_a_target_longer_than_the_positions_is_an_error():
    model = babelzoo.create_model("bart_tiny", max_positions=16)
    src = torch.randint(5, 100, (1, 4))
    with pytest.raises(InputError, match=r"target input has 17 positions but the model holds 16 "
                                         r"\(Seq2SeqConfig.max_positions\)"):
        model(input_ids=src, decoder_input_ids=torch.randint(5, 100, (1, 17)))
    with pytest.raises(InputError, match="source input has 17 positions"):
        model(input_ids=torch.randint(5, 100, (1, 17)), decoder_input_ids=src)
    with pytest.raises(InputError, match="max_new_tokens=16 makes targets of 17 positions"):
        model.generate(src, max_new_tokens=16)
    cove = babelzoo.create_model("cove_tiny", max_positions=16)
    with pytest.raises(InputError, match=r"target input has 17 positions .*\(CoVeConfig.max_positions\)"):
        cove(input_ids=src, decoder_input_ids=torch.randint(5, 100, (1, 17)))


def test_mbart_forces_the_target_language_tag_first():
    model = small("mbart_tiny")
    text = model.config.text
    assert text.languages == ("en_XX", "de_DE", "fr_XX", "ro_RO")
    de = text.language_id("de_DE")
    assert de == 61 - 1 - 4 + 1  # the tags come just before <mask>, the last id
    src, mask = batch(model)
    for beams in (1, 2):
        out = model.generate(src, attention_mask=mask, max_new_tokens=5, num_beams=beams, target_language="de_DE")
        assert out[:, 0].eq(text.decoder_start_token_id).all() and out[:, 1].eq(de).all()


def test_an_unknown_language_tag_is_an_error_naming_it():
    model = small("mbart_tiny")
    src, _ = batch(model)
    with pytest.raises(InputError, match=r"unknown language tag 'xx_YY'; the model knows: en_XX, de_DE, fr_XX, ro_RO"):
        model.generate(src, max_new_tokens=3, target_language="xx_YY")
    with pytest.raises(InputError, match=r"unknown language tag 'de_DE'; the model knows: none"):
        small("bart_tiny").generate(src, max_new_tokens=3, target_language="de_DE")


def test_decoder_input_ids_are_required():
    model = babelzoo.create_model("t5_tiny")
    with pytest.raises(InputError, match="needs decoder_input_ids"):
        model(input_ids=torch.ones(1, 3, dtype=torch.long))


def test_t5_has_no_biases_rms_norms_and_one_relative_table_per_stack():
    model = babelzoo.create_model("t5_tiny")
    names = [n for n, _ in model.named_parameters()]
    assert not [n for n in names if n.endswith(".bias")]
    assert sum("relative_bias" in n for n in names) == 2
    assert isinstance(model.encoder.final_norm, torch.nn.RMSNorm)
    assert model.final_logits_bias is None and model.encoder.position is None


def test_language_tags_come_from_the_attached_tokenizer_when_there_is_one():
    from types import SimpleNamespace

    model = small("mbart_tiny")
    vocabulary = {"de_DE": 50, "ja_XX": 51}  # a tokenizer's own tag ids win over the config's layout
    model.tokenizer = SimpleNamespace(token_to_id=lambda token: vocabulary.get(token, 3),
                                      specials=SimpleNamespace(unk=3))
    src, _ = batch(model)
    assert model.generate(src, max_new_tokens=2, target_language="ja_XX")[:, 1].eq(51).all()
    with pytest.raises(InputError, match=r"unknown language tag 'fr_XX': the tokenizer of 'mbart_tiny' has no such "
                                         r"token; tags it knows: de_DE"):
        model.generate(src, max_new_tokens=2, target_language="fr_XX")
