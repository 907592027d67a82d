"""Vocabulary trimming: a trimmed model and tokenizer give the same pieces and the same vectors
as the full ones on every text whose pieces were kept, save and load as a normal checkpoint,
warn with the share of <unk> on text outside the kept pieces, and refuse inputs that would trim
to nothing or that are one string read character by character."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import babelzoo
from babelzoo.compression import trim_vocabulary, used_pieces
from babelzoo.datasets.bpe import BPETokenizer
from babelzoo.datasets.tokenizer import TokenizerError, TrimmedVocabularyWarning, load_tokenizer
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import InputError
from babelzoo.offline.embedded import embedded_corpus, split_rows


@pytest.fixture(scope="module")
def e5(e5_small):
    return e5_small


@pytest.fixture(scope="module")
def catalog():
    """Training and held-out German and French messages of the embedded Gramps catalogs."""
    corpus = embedded_corpus()
    return {split: {lang: [row[lang] for row in split_rows(corpus, heldout=split == "heldout") if lang in row][:400]
                    for lang in ("de", "fr")} for split in ("train", "heldout")}


def vectors(model, texts):
    batch = model.tokenizer.batch_encode(texts)
    with torch.no_grad():
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    return batch["input_ids"], out.last_hidden, batch["attention_mask"].bool()


def test_trimmed_e5_matches_the_full_model_on_every_text_whose_pieces_it_kept(e5, catalog):
    small = trim_vocabulary(e5, {lang: ["query: " + t for t in texts] for lang, texts in catalog["train"].items()})
    full, trimmed = e5.tokenizer, small.tokenizer
    assert small.config.text.vocab_size == trimmed.vocab_size < 20_000
    # word embeddings are the only vocabulary-sized weight of the encoder
    dropped = (e5.config.text.vocab_size - trimmed.vocab_size) * e5.config.text.hidden_size
    assert small.num_parameters() == e5.num_parameters() - dropped

    seen = ["query: " + t for t in catalog["train"]["de"][:64]]
    ids_full, h_full, mask = vectors(e5, seen)
    ids_small, h_small, _ = vectors(small, seen)
    assert [full.id_to_token(i) for i in ids_full[mask].tolist()] == \
        [trimmed.id_to_token(i) for i in ids_small[mask].tolist()]
    torch.testing.assert_close(h_small[mask], h_full[mask], rtol=0, atol=1e-6)

    # held-out messages: those whose pieces were all kept encode identically; the others do not
    kept = set(trimmed.vocab)
    held = ["query: " + t for texts in catalog["heldout"].values() for t in texts]
    covered = [t for t in held if all(full.id_to_token(i) in kept for i in full.encode(t))]
    assert 0.2 * len(held) < len(covered) < len(held)
    ids_full, h_full, mask = vectors(e5, covered[:64])
    ids_small, h_small, _ = vectors(small, covered[:64])
    assert [full.id_to_token(i) for i in ids_full[mask].tolist()] == \
        [trimmed.id_to_token(i) for i in ids_small[mask].tolist()]
    torch.testing.assert_close(h_small[mask], h_full[mask], rtol=0, atol=1e-6)


def test_a_trimmed_model_saves_and_loads_as_a_normal_checkpoint(e5, tmp_path):
    small = trim_vocabulary(e5, ["query: Das Haus ist rot.", "query: La maison est rouge."])
    small.save_pretrained(tmp_path / "small", tokenizer=small.tokenizer)
    again = babelzoo.from_pretrained(tmp_path / "small").eval()
    assert again.tokenizer.vocab == small.tokenizer.vocab
    texts = ["query: Das Haus ist rot.", "query: rouge"]
    torch.testing.assert_close(vectors(again, texts)[1], vectors(small, texts)[1], rtol=0, atol=0)


def wordpiece_model():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "house", "is", "red", "blue", "un", "##able",
             "##s", "a", "b", "##b", "."]
    tokenizer = WordPieceTokenizer(vocab)
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny", vocab_size=len(vocab), pad_token_id=0, num_layers=1).eval()
    model.tokenizer = tokenizer
    return model


def test_wordpiece_trimming_keeps_greedy_longest_match_segmentation():
    model = wordpiece_model()
    small = trim_vocabulary(model, ["the houses are red", "unable"])
    assert small.tokenizer.vocab == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "house", "red", "un",
                                     "##able", "##s"]
    for text in ["the houses", "unable red", "red red house"]:
        ids_a, h_a, mask = vectors(model, [text])
        ids_b, h_b, _ = vectors(small, [text])
        assert model.tokenizer.tokenize(text) == small.tokenizer.tokenize(text)
        torch.testing.assert_close(h_b[mask], h_a[mask], rtol=0, atol=1e-6)
    # a removed piece is unknown to the trimmed tokenizer (a whole-word [UNK], as WordPiece does)
    assert small.tokenizer.tokenize("blue") == ["[UNK]"]


def test_trimming_refuses_what_would_leave_nothing_or_break_segmentation():
    model = wordpiece_model()
    with pytest.raises(InputError, match="no text given"):
        trim_vocabulary(model, [])
    with pytest.raises(InputError, match="language 'de' has no text"):
        trim_vocabulary(model, {"en": ["the house"], "de": []})
    with pytest.raises(InputError, match="use no ordinary piece"):
        trim_vocabulary(model, ["zzz qqq"])  # unknown words only
    tokenizer = model.tokenizer
    with pytest.raises(TokenizerError, match=r"ids \[4\] must be kept"):
        tokenizer.subset([0, 1, 2, 3, 5])
    with pytest.raises(TokenizerError, match="strictly ascending"):
        tokenizer.subset([0, 1, 2, 4, 3, 5])
    assert used_pieces(tokenizer, ["the house."]) == [0, 1, 2, 3, 4, 5, 6, 16]


def test_unigram_trimming_keeps_the_piece_that_sets_the_unknown_penalty(e5):
    tokenizer = e5.tokenizer
    required = tokenizer.subset_required()
    lowest = min((i for i in range(tokenizer.vocab_size) if i != tokenizer.specials.unk),
                 key=tokenizer.scores.__getitem__)
    assert required == tokenizer.specials.all_special() | {lowest}


def test_one_string_is_refused_not_read_character_by_character(e5):
    with pytest.raises(InputError, match=re.escape("texts is one string ('A dog runs'); pass an iterable of texts, "
                                                   "e.g. ['A dog runs']")):
        trim_vocabulary(e5, "A dog runs")
    with pytest.raises(InputError, match=re.escape("texts['en'] is one string ('A dog runs'); pass an iterable of "
                                                   "texts, e.g. {'en': ['A dog runs']}")):
        trim_vocabulary(e5, {"en": "A dog runs", "de": ["Ein Hund rennt"]})
    with pytest.raises(InputError, match=r"texts\[1\] is bytes, not a text"):
        trim_vocabulary(e5, ["A dog runs", b"A cat"])
    small = trim_vocabulary(e5, ["A dog runs"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the texts trimmed on lose nothing
        assert small.tokenizer.tokenize("A dog runs") == e5.tokenizer.tokenize("A dog runs") == ["▁A", "▁dog", "▁runs"]
        assert small.tokenizer.vocab_size == 9  # 5 special tokens, the lowest-scoring piece and those 3
        torch.testing.assert_close(vectors(small, ["A dog runs"])[1], vectors(e5, ["A dog runs"])[1], rtol=0, atol=1e-6)
    with pytest.warns(TrimmedVocabularyWarning, match=r"^1 of 3 pieces \(33\.3%\) are <unk>: this tokenizer keeps 9 "
                                                      r"of the 250,002 pieces"):
        assert small.tokenizer.encode("A cat runs") == [0, 4, 3, 6, 2]  # <s> ▁A <unk> ▁runs </s>


def test_text_outside_the_kept_pieces_warns_with_the_share_of_unk(tmp_path):
    model = wordpiece_model()
    small = trim_vocabulary(model, ["the houses are red", "unable"])
    tok = small.tokenizer
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tok.encode("the red houses") == [2, 5, 7, 6, 10, 3]  # every piece kept: no warning
        assert model.tokenizer.encode("the blue house") == [2, 5, 9, 6, 3]  # the full tokenizer never warns
    message = (r"1 of 3 pieces \(33\.3%\) are \[UNK\]: this tokenizer keeps 11 of the 17 pieces of the vocabulary "
               r"it was trimmed from, and the text falls outside them; trim with texts that cover it, or encode "
               r"with the full tokenizer")
    with pytest.warns(TrimmedVocabularyWarning, match=message):
        assert tok.encode("the blue house") == [2, 5, 1, 6, 3]
    with pytest.warns(TrimmedVocabularyWarning, match=r"^3 of 6 pieces \(50\.0%\)"):
        tok.batch_encode(["blue blue", "the red house b"])
    with pytest.warns(TrimmedVocabularyWarning, match=r"^1 of 4 pieces \(25\.0%\)"):
        tok.encode_pair("the house", "red blue")
    small.save_pretrained(tmp_path / "small", tokenizer=tok)
    again = load_tokenizer(tmp_path / "small")
    assert again.trimmed_from == 17
    with pytest.warns(TrimmedVocabularyWarning, match=message):
        again.encode("the blue house")


def test_bpe_tokenizers_say_they_cannot_be_trimmed():
    pieces = ["<pad>", "<s>", "</s>", "<unk>", "<mask>", "\u2581a", "a"]
    with pytest.raises(TokenizerError, match="bpe tokenizers cannot be restricted"):
        BPETokenizer.subset(object.__new__(BPETokenizer), list(range(len(pieces))))
