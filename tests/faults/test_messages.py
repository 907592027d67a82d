"""Messages that must not mislead: a suggestion that repeats the name asked for, a name called
unknown while it is listed, a path left empty in the message."""

import re

import pytest

from babelzoo.datasets.labelled import LabelError, read_sib200
from babelzoo.datasets.text import CorpusError, tatoeba_pairs
from babelzoo.datasets.tokenizer import TokenizerError, load_tokenizer
from babelzoo.errors import ConfigError
from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder


def test_a_tatoeba_set_without_its_english_side_says_so(tmp_path):
    folder = tmp_path / "tatoeba"
    folder.mkdir()
    (folder / "tatoeba.deu-eng.deu").write_text("Hallo\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=re.escape(f"{folder / 'tatoeba.deu-eng.eng'}: missing (the English side of "
                                                    "the deu Tatoeba test set, whose tatoeba.deu-eng.deu is there)")):
        tatoeba_pairs(tmp_path, "deu")
    (folder / "tatoeba.deu-eng.eng").write_text("Hello\n", encoding="utf-8")
    assert tatoeba_pairs(tmp_path, "deu").pairs == [("Hallo", "Hello")]
    with pytest.raises(CorpusError, match=re.escape(f"no Tatoeba language 'de' in {folder}; did you mean deu? (the "
                                                    "only one available)") + "$"):
        tatoeba_pairs(tmp_path, "de")
    with pytest.raises(CorpusError, match=re.escape(f"no Tatoeba language 'xho' in {folder}; the only one available "
                                                    "is deu") + "$"):
        tatoeba_pairs(tmp_path, "xho")
    (folder / "tatoeba.fra-eng.fra").write_text("Salut\n", encoding="utf-8")
    (folder / "tatoeba.fra-eng.eng").write_text("Hi\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=re.escape(f"no Tatoeba language 'de' in {folder}; did you mean deu? "
                                                    "(available: deu, fra)") + "$"):
        tatoeba_pairs(tmp_path, "de")
    with pytest.raises(CorpusError, match=re.escape(f"no Tatoeba language 'xho' in {folder} (available: deu, fra)")):
        tatoeba_pairs(tmp_path, "xho")


def test_a_sib200_folder_without_test_tsv_names_what_it_lacks(tmp_path):
    lang = tmp_path / "sib200" / "deu_Latn"
    lang.mkdir(parents=True)
    (lang / "train.tsv").write_text("index_id\tcategory\ttext\n1\tscience/technology\tEin Satz.\n", encoding="utf-8")
    assert [row.label for row in read_sib200(tmp_path, "deu_Latn", "train")] == ["science/technology"]
    with pytest.raises(LabelError, match=re.escape(f"{lang} has no test.tsv (it holds: train.tsv)")):
        read_sib200(tmp_path, "deu_Latn", "test")


@pytest.mark.parametrize("tokenizer, message", [
    (None, "model 'scratch': no tokenizer given; set `tokenizer:` to a tokenizer folder or a zoo model name"),
    ("", "model 'scratch': no tokenizer given; set `tokenizer:` to a tokenizer folder or a zoo model name"),
    ("{tmp}/nothing", "model 'scratch': tokenizer: {tmp}/nothing: no such folder (nor a zoo model name)"),
    ("{tmp}", ("model 'scratch': tokenizer: {tmp}: no tokenizer files there (babelzoo_tokenizer.json, vocab.txt, "
               "sentencepiece.bpe.model or spiece.model)")),
])
def test_a_missing_tokenizer_names_the_path_or_says_none_was_given(tmp_path, tokenizer, message):
    fields = {"name": "scratch", "kind": "random", "source": "xlmr_tiny"}
    if tokenizer is not None:
        fields["tokenizer"] = tokenizer.format(tmp=tmp_path)
    with pytest.raises((ConfigError, TokenizerError), match=re.escape(message.format(tmp=tmp_path)) + "$"):
        build_encoder(ModelSpec.from_dict(fields))


def test_an_empty_tokenizer_path_is_not_the_working_directory():
    with pytest.raises(TokenizerError, match=re.escape("no tokenizer folder given (the path is empty)")):
        load_tokenizer("")
