"""``model.encode(sentences)``: the vectors BabelEncoder gives (one shared path), whatever the
batch size, in input order, equal to pooling each sentence's states by hand; encoder–decoders
keep their tensor ``encode`` beside the sentence one; a model without a tokenizer says how to
attach one."""

import string

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import InputError, InputTypeError
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.zoo.sentences import sorted_batches

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB = SPECIALS + list(string.ascii_lowercase + string.digits + ".,!?'") + ["##" + c for c in string.ascii_lowercase]
SENTENCES = ["Tom left.", "Where is the station?", "I don't know what you mean by that, but I'll ask her tomorrow.",
             "Yes.", "Mary and Tom want to sing with us again next week.", "It is raining", "Go!",
             "Could you tell me how to get to the museum from here, please?", "He is tall.", "We won."]


def with_tokenizer(name: str, **overrides):
    """A tiny model of ``name`` with a character WordPiece tokenizer attached, dropout off."""
    torch.manual_seed(0)
    model = babelzoo.create_model(name, vocab_size=len(VOCAB), pad_token_id=0, dropout=0.0, **overrides)
    model.tokenizer = WordPieceTokenizer(VOCAB)
    return model


@pytest.fixture(scope="module")
def model():
    return with_tokenizer("mbert_tiny")


def by_hand(model, sentence: str, layer: int = -1) -> torch.Tensor:
    """The mean of one sentence's states, run alone (no padding anywhere)."""
    ids = torch.tensor([model.tokenizer.encode(sentence)])
    with torch.no_grad():
        out = model.eval()(ids, output_hidden_states=True)
    return (out.last_hidden if layer == -1 else out.hidden_states[layer])[0].mean(0)


@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_vectors_are_babel_encoders_for_any_batch_size(model, batch_size):
    got = model.encode(SENTENCES, batch_size=batch_size, max_length=24, normalize_embeddings=True)
    reference = BabelEncoder("t", model, model.tokenizer, batch_size=7, max_length=24).encode(SENTENCES)
    assert got.dtype == np.float32 and got.shape == (len(SENTENCES), 128)
    np.testing.assert_allclose(got, reference, atol=1e-6, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-6)


def test_raw_vectors_are_each_sentences_mean_in_input_order(model):
    raw = model.encode(SENTENCES, batch_size=4, normalize_embeddings=False)
    expected = torch.stack([by_hand(model, s) for s in SENTENCES]).numpy()
    np.testing.assert_allclose(raw, expected, atol=1e-5, rtol=1e-5)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)  # not normalised
    np.testing.assert_allclose(model.encode(SENTENCES, normalize_embeddings=True),
                               raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_array_equal(model.encode(SENTENCES[::-1], batch_size=4, normalize_embeddings=False), raw[::-1])


def test_encode_takes_sentence_transformers_names_and_defaults(model):
    import inspect

    ours = inspect.signature(model.encode).parameters
    # sentence-transformers' SentenceTransformer.encode defaults (v2–v5)
    for name, default in (("prompt", None), ("batch_size", 32), ("show_progress_bar", None), ("convert_to_numpy", True),
                          ("convert_to_tensor", False), ("normalize_embeddings", False)):
        assert ours[name].default == default, name
    raw = model.encode(SENTENCES[:3])
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)  # not normalised unless asked, as there
    tensor = model.encode(SENTENCES[:3], convert_to_tensor=True)
    assert isinstance(tensor, torch.Tensor) and torch.equal(tensor, torch.from_numpy(raw))
    listed = model.encode(SENTENCES[:3], convert_to_numpy=False)
    assert isinstance(listed, list) and len(listed) == 3 and torch.equal(listed[1], torch.from_numpy(raw[1]))
    with pytest.raises(TypeError, match="prefix"):
        model.encode(SENTENCES[:3], prefix="query: ")  # the sentence-transformers name is prompt


def test_one_string_gives_one_vector_and_options_reach_the_pooling(model):
    one = model.encode("Go!", normalize_embeddings=False)
    assert one.shape == (128,)
    np.testing.assert_allclose(one, by_hand(model, "Go!").numpy(), atol=1e-5)
    np.testing.assert_allclose(model.encode("Go!", layer=1, normalize_embeddings=False), by_hand(model, "Go!", layer=1).numpy(),
                               atol=1e-5)
    first = torch.tensor([model.tokenizer.encode("Go!")])
    with torch.no_grad():
        cls = model(first).last_hidden[0, 0].numpy()
    np.testing.assert_allclose(model.encode("Go!", pooling="cls", normalize_embeddings=False), cls, atol=1e-5)
    np.testing.assert_array_equal(model.encode("go!", prompt="we "), model.encode("we go!"))
    cut = model.encode(["Where is the station?", "Where is the"], max_length=7)  # [CLS] + 5 pieces + [SEP]
    np.testing.assert_array_equal(cut[0], cut[1])
    assert model.encode([]).shape == (0, 128)


def test_bad_arguments_are_named(model):
    with pytest.raises(InputTypeError, match="sentences must be a str or a list of str, not int"):
        model.encode(3)
    with pytest.raises(InputTypeError, match="list holding other values"):
        model.encode(["a", 3])
    with pytest.raises(InputError, match="batch_size must be a positive integer, got 0"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(InputError, match=r"layer=5: model 'mbert_tiny' has layers 0 \(the embeddings\) to 2"):
        model.encode(["a"], layer=5)


def test_a_model_without_a_tokenizer_says_how_to_attach_one():
    model = babelzoo.create_model("mbert_tiny", vocab_size=64)  # too small for a default tokenizer
    assert model.tokenizer is None
    with pytest.raises(InputError, match=r"model 'mbert_tiny' has no tokenizer .* model\.tokenizer = "
                                         r"babelzoo\.load_tokenizer\(DIR\)"):
        model.encode(["Hello"])


def test_an_xlm_model_reads_the_language_as_babel_encoder_does():
    model = babelzoo.create_model("xlm_tiny", dropout=0.0)
    model.use_default_tokenizer()  # which has language tags
    assert model.tokenizer.specials.languages["de"] == 1
    german = model.encode(SENTENCES, lang="de", normalize_embeddings=True)
    assert not np.allclose(german, model.encode(SENTENCES, normalize_embeddings=True))
    np.testing.assert_allclose(german, BabelEncoder("t", model, model.tokenizer).encode(SENTENCES, lang="de"),
                               atol=1e-6)


@pytest.mark.parametrize("name, directions", [("bart_tiny", 1), ("cove_tiny", 2)])
def test_encoder_decoders_pool_their_encoder_and_keep_the_tensor_encode(name, directions):
    model = with_tokenizer(name).eval()
    rows = model.tokenizer.batch_encode(SENTENCES[:4], padding=False, return_tensors=None)["input_ids"]
    expected = []
    with torch.no_grad():
        for row in rows:
            states = model.encode(torch.tensor([row]))  # the encoder pass, as before
            assert states.shape == (1, len(row), 128)
            expected.append(states[0].mean(0))
    got = model.encode(SENTENCES[:4], batch_size=3, normalize_embeddings=False)
    np.testing.assert_allclose(got, torch.stack(expected).numpy(), atol=1e-5)
    np.testing.assert_allclose(BabelEncoder("t", model, model.tokenizer).encode_ids(rows),
                               got / np.linalg.norm(got, axis=1, keepdims=True), atol=1e-6)
    assert model.encoder_directions == directions
    with pytest.raises(InputError, match="attention_mask goes with input_ids"):
        model.encode(["a"], torch.ones(1, 3))
    with pytest.raises(InputError, match="batch_size: options of encoding sentences"):
        model.encode(torch.tensor([rows[0]]), batch_size=2)
    with pytest.raises(InputError, match=f"layer=1: encoder–decoder '{name}' gives its encoder's last layer only"):
        model.encode(["a"], layer=1)


def test_a_fusion_model_encodes_with_its_text_tower():
    model = with_tokenizer("vl_dual_tiny")
    text = model.text
    text.tokenizer = model.tokenizer
    np.testing.assert_allclose(model.encode(SENTENCES), text.encode(SENTENCES), atol=1e-6)


def test_sorted_batches_pad_each_batch_to_its_own_longest_row():
    rows = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]
    got = [(index, ids.tolist(), mask.tolist()) for index, ids, mask in sorted_batches(rows, 0, 2)]
    assert got == [([1, 2], [[4, 0], [5, 6]], [[1, 0], [1, 1]]),
                   ([0, 3], [[1, 2, 3, 0], [7, 8, 9, 10]], [[1, 1, 1, 0], [1, 1, 1, 1]])]
