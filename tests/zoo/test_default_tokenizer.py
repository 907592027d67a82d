"""A model with fresh weights knows the tokenizer its config implies (its padding id, at most its
vocabulary, trained once a machine from the embedded catalogs, the same each time) and builds it
only when asked (``use_default_tokenizer``): until then it has no tokenizer, nothing is trained
and nothing is written to the cache; a model whose weights were loaded keeps its checkpoint's
tokenizer or none, and a default one is not part of a model's files until it is attached."""

import numpy as np
import pytest

import babelzoo
from babelzoo.errors import InputError
from babelzoo.zoo import _default_tokenizer as D
from babelzoo.zoo.factory import list_models, model_entry
from babelzoo.zoo.build import with_head

# Entries no default tokenizer fits, and why.
NONE = {
    "mbart_base": "its language tags close the vocabulary",
    "mbart_tiny": "its language tags close the vocabulary",
    "t5_base": "</s> is id 1; both layouts have it at 2",
    "t5_tiny": "</s> is id 1; both layouts have it at 2",
    "modernbert_base": "pads with id 50283",
    "xlnet_base": "pads with id 5",
}
SENTENCES = ["Wo ist der Bahnhof?", "Where is the station?", "Où est la gare ?", "駅はどこですか?"]


@pytest.mark.parametrize("name", list_models())
def test_every_entry_has_a_default_that_fits_its_config_or_a_reason_for_none(name):
    text = model_entry(name).config().text
    spec = D.default_tokenizer_for(text)
    if name in NONE:
        assert spec is None, NONE[name]
        return
    assert spec == D.DefaultTokenizer({0: "babelzoo", 1: "fairseq"}[text.pad_token_id], text.vocab_size)


def test_nothing_is_built_or_written_until_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path))

    def no_training(spec):
        raise AssertionError("trained without being asked")

    monkeypatch.setattr(D, "train", no_training)
    model = babelzoo.create_model("mbert_tiny")
    assert model.tokenizer is None and model.default_tokenizer is not None
    with pytest.raises(InputError, match=r"model.use_default_tokenizer\(\)"):
        model.encode(SENTENCES)
    model.save_pretrained(tmp_path / "m")
    assert not (tmp_path / "m" / "babelzoo_tokenizer.json").exists() and not (tmp_path / "tokenizers").exists()
    with pytest.raises(InputError, match="no default tokenizer"):
        babelzoo.create_model("mbert_tiny", vocab_size=1000).use_default_tokenizer()


def test_a_default_is_built_once_and_fits_its_model():
    bert, unicoder = babelzoo.create_model("mbert_tiny"), babelzoo.create_model("unicoder_tiny")
    assert bert.default_tokenizer == unicoder.default_tokenizer and bert.attached_tokenizer is None
    tok = bert.use_default_tokenizer()
    assert tok is bert.tokenizer is unicoder.use_default_tokenizer()  # one tokenizer a spec in a process
    assert (tok.specials.pad, tok.specials.cls, tok.specials.sep) == (0, 1, 2) and tok.vocab_size <= 8000
    assert tok.languages == D.LANGUAGES and tok.specials.language_tags["de"] == 6

    xlmr = babelzoo.create_model("xlmr_tiny").use_default_tokenizer()  # pad 1: fairseq's layout, <mask> last
    assert (xlmr.specials.cls, xlmr.specials.pad, xlmr.specials.sep, xlmr.specials.unk) == (0, 1, 2, 3)
    assert xlmr.specials.mask == xlmr.vocab_size - 1 and xlmr.vocab_size <= 8000
    rows = xlmr.batch_encode(SENTENCES, padding=False, return_tensors=None)["input_ids"]
    assert all(row[0] == 0 and row[-1] == 2 for row in rows) and max(map(max, rows)) < xlmr.specials.mask
    assert [3 in row for row in rows] == [False, False, False, True]  # 駅 is no character of the catalogs
    assert xlmr.decode(rows[0]) == SENTENCES[0]


def test_no_default_for_a_vocabulary_too_small_and_a_saved_default_is_the_folders_tokenizer(tmp_path):
    assert babelzoo.create_model("mbert_tiny", vocab_size=1000).default_tokenizer is None
    fresh = babelzoo.create_model("mbert_tiny")
    fresh.use_default_tokenizer()
    fresh.save_pretrained(tmp_path / "m")  # the default, built, is written: the folder reads text as the model did
    assert (tmp_path / "m" / "babelzoo_tokenizer.json").exists()
    loaded = babelzoo.from_pretrained(tmp_path / "m")
    assert loaded.default_tokenizer is None and loaded.tokenizer is not None  # the folder's own, not a default
    rows = fresh.tokenizer.batch_encode(SENTENCES, padding=False, return_tensors=None)["input_ids"]
    assert loaded.tokenizer.batch_encode(SENTENCES, padding=False, return_tensors=None)["input_ids"] == rows
    assert babelzoo.create_model("mbert_tiny", weights=tmp_path / "m").tokenizer is not None
    small = babelzoo.create_model("mbert_tiny", vocab_size=1000)
    small.save_pretrained(tmp_path / "small")  # no default fits: nothing written, nothing attached
    assert babelzoo.from_pretrained(tmp_path / "small").tokenizer is None


def test_an_attached_default_is_saved_and_loaded_back(tmp_path):
    fresh = babelzoo.create_model("xlmr_tiny")
    fresh.use_default_tokenizer()
    fresh.save_pretrained(tmp_path / "m")
    back = babelzoo.from_pretrained(tmp_path / "m")
    assert back.attached_tokenizer is not None and back.default_tokenizer is None
    assert back.tokenizer.encode(SENTENCES[3]) == fresh.tokenizer.encode(SENTENCES[3])
    np.testing.assert_allclose(back.encode(SENTENCES), fresh.encode(SENTENCES), atol=1e-6)


def test_a_head_or_a_text_tower_takes_the_default_along():
    fresh = babelzoo.create_model("mbert_tiny")
    headed = with_head(fresh, {"kind": "sequence_classification", "labels": ["a", "b"]})
    assert headed.default_tokenizer == fresh.default_tokenizer and headed.attached_tokenizer is None
    clip = babelzoo.create_model("vl_dual_tiny", text_tower=fresh)
    assert clip.default_tokenizer == fresh.default_tokenizer


def test_the_default_is_trained_the_same_way_each_time_and_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path))
    spec = D.DefaultTokenizer("babelzoo", 2000, languages=("en", "de"))
    built = spec.build()
    assert spec.folder().parent == tmp_path / "tokenizers" and built.vocab_size == 2000
    assert D.train(spec).pieces_and_scores() == built.pieces_and_scores()  # deterministic

    def no_training(spec):
        raise AssertionError("trained again")

    D._tokenizer.cache_clear()
    monkeypatch.setattr(D, "train", no_training)
    assert spec.build().pieces_and_scores() == built.pieces_and_scores()  # from the disk cache
    assert D.DefaultTokenizer("babelzoo", 2001, languages=("en", "de")).key() != spec.key()
