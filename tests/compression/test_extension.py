"""Vocabulary extension: pieces learned from a language's text join a unigram tokenizer so that
Viterbi takes them where they fit and a text holding none of them segments exactly as before;
the model gets one row per piece, the mean of the rows of the pieces it was cut into, while
every old row and every other weight stays; the grown model and tokenizer save, load and export
to Hugging Face with the same ids and vectors."""

from __future__ import annotations

import pytest
import torch

import babelzoo
from babelzoo.compression import NewPiece, add_pieces, extend_vocabulary, learn_pieces
from babelzoo.compression.vocabulary import VOCABULARY_KEYS
from babelzoo.datasets.tokenizer import TokenizerError
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import InputError

N = 26  # pieces of the tiny tokenizer (conftest.py); new ones take ids from here on
TEXTS = ["abracadabra kebab", "kebab, abracadabra!", "a kebab", "abracadabra", "kebabs are a treat"] * 4
# none of them holds ▁abracadabra, ▁kebab or ▁treat (a word-initial piece never matches mid-word)
OTHER = ["bad cab", "a b", "xyz", "\uff41b", "abra cadabra", "kebap", "rakeb", "abracadabr", "retreat",
         "<mask> kebap", "", "tree eat"]


def ids_of(tok, *pieces):
    return tuple(tok.token_to_id(p) for p in pieces)


@pytest.fixture
def model(tiny_unigram):
    torch.manual_seed(0)
    # two rows more than the tokenizer has pieces, as XLM-R pads its vocabulary
    model = babelzoo.create_model("xlmr_tiny", vocab_size=N + 2, mlm_head=True, num_layers=1).eval()
    with torch.no_grad():
        model.lm_head.bias.normal_()  # zeros would hide a wrong bias row
    model.tokenizer = tiny_unigram
    return model


def test_learned_pieces_are_what_the_text_needs_with_scores_that_win_their_span(tiny_unigram):
    tok = tiny_unigram
    learned = learn_pieces(tok, TEXTS, 3, candidates=40, margin=5.0)
    assert [p.piece for p in learned] == ["▁abracadabra", "▁kebab", "▁treat"]
    kebab = learned[1]
    # by hand: ▁k e b ab scores -4 - 5 - 5 - 5.5 = -19.5, above ▁k e b a b (-24) and ▁ k e b ab (-23.5)
    assert kebab.old_ids == ids_of(tok, "▁k", "e", "b", "ab")
    assert tok.best_path("▁kebab") == (list(kebab.old_ids), -19.5)
    assert (kebab.uses, kebab.saved) == (16, 16 * 3)
    # -19.5 + margin is below the lowest score (ra, -6.5): held there, so the unknown penalty stays
    assert kebab.score == -6.5
    # re: r e = -10, + margin 5 = -5, which lies in range and is kept
    re = {p.piece: p for p in learn_pieces(tok, TEXTS, 10, candidates=40, margin=5.0)}["re"]
    assert (re.old_ids, re.score) == (ids_of(tok, "r", "e"), -5.0)


def test_new_pieces_are_used_where_they_fit_and_nothing_else_changes(tiny_unigram):
    tok = tiny_unigram
    learned = learn_pieces(tok, TEXTS, 3, candidates=40)
    grown = tok.with_pieces([p.piece for p in learned], [p.score for p in learned])
    assert grown.vocab[N:] == ["▁abracadabra", "▁kebab", "▁treat"]
    assert grown.tokenize("abracadabra kebab") == ["▁abracadabra", "▁kebab"]
    assert grown.encode("kebabs, treat") == [0, N + 1, grown.token_to_id("s"), grown.token_to_id(","),
                                            N + 2, 2]
    assert tok.tokenize("kebabs") == ["▁k", "e", "b", "ab", "s"] and grown.tokenize("kebabs") == ["▁kebab", "s"]
    for text in OTHER:
        words = grown.normalize(text)
        assert not any(p.piece in words for p in learned), text  # the premise: no new piece's characters
        assert grown.encode(text) == tok.encode(text), text
    assert grown.encode("xyz") == [0, 5, 3, 21, 3, 2]  # ▁ <unk> y <unk>
    assert grown.lowest_score == tok.lowest_score == -6.5  # so the unknown penalty did not move
    batch = grown.batch_encode(OTHER, padding=False, return_tensors=None)["input_ids"]
    assert batch == tok.batch_encode(OTHER, padding=False, return_tensors=None)["input_ids"]


def test_new_rows_are_the_mean_of_the_old_pieces_rows_and_old_weights_stay(model, tiny_unigram):
    tok = tiny_unigram
    learned = learn_pieces(tok, TEXTS, 3, candidates=40)
    grown = add_pieces(model, learned)
    n = N
    assert grown.config.text.vocab_size == n + 3 and grown.tokenizer.vocab_size == n + 3
    old, new = model.state_dict(), grown.state_dict()
    assert set(old) == set(new)
    for key, value in old.items():
        if key in VOCABULARY_KEYS:
            assert torch.equal(new[key][:n], value[:n]), key
        else:
            assert torch.equal(new[key], value), key
    assert grown.lm_head.decoder.weight is grown.embeddings.word.weight  # still tied
    e, bias = old["embeddings.word.weight"], old["lm_head.bias"]
    k, e_, b, ab = ids_of(tok, "▁k", "e", "b", "ab")
    kebab = grown.tokenizer.token_to_id("▁kebab")
    torch.testing.assert_close(new["embeddings.word.weight"][kebab], (e[k] + e[e_] + e[b] + e[ab]) / 4,
                               rtol=0, atol=1e-7)
    torch.testing.assert_close(new["lm_head.bias"][kebab], (bias[k] + bias[e_] + bias[b] + bias[ab]) / 4,
                               rtol=0, atol=1e-7)
    # ▁treat = ▁ t r e a t: ``t`` counts twice
    t, r, a, space = ids_of(tok, "t", "r", "a", "▁")
    treat = grown.tokenizer.token_to_id("▁treat")
    torch.testing.assert_close(new["embeddings.word.weight"][treat], (e[space] + 2 * e[t] + e[r] + e[e_] + e[a]) / 6,
                               rtol=0, atol=1e-7)
    # a text without new pieces has the same ids, hence the same vectors
    batch = tok.batch_encode(OTHER)
    with torch.no_grad():
        before = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
        after = grown(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
    torch.testing.assert_close(after, before, rtol=0, atol=0)


def test_an_extended_model_saves_loads_and_exports_with_the_same_ids_and_vectors(model, tiny_unigram, tmp_path):
    grown = add_pieces(model, learn_pieces(tiny_unigram, TEXTS, 3, candidates=40))
    grown.save_pretrained(tmp_path / "grown")
    again = babelzoo.from_pretrained(tmp_path / "grown").eval()
    assert again.tokenizer.vocab == grown.tokenizer.vocab and again.tokenizer.scores == grown.tokenizer.scores
    texts = ["abracadabra kebab", "kebabs are a treat", *OTHER]
    batch = grown.tokenizer.batch_encode(texts)
    assert torch.equal(again.tokenizer.batch_encode(texts)["input_ids"], batch["input_ids"])
    with torch.no_grad():
        ours = grown(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
        theirs = again(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
    torch.testing.assert_close(theirs, ours, rtol=0, atol=0)
    transformers = pytest.importorskip("transformers")
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "grown"))
    assert auto(texts)["input_ids"] == [grown.tokenizer.encode(t) for t in texts]


def test_extend_vocabulary_learns_each_language_and_adds_a_shared_piece_once(model):
    grown = extend_vocabulary(model, {"x": TEXTS, "y": ["a kebab", "kebab a kebab", "bad kebab", "bad"] * 3}, 2,
                              candidates=40)
    # x gives ▁abracadabra and ▁kebab, y ▁kebab and ▁bad
    assert grown.tokenizer.vocab[N:] == ["▁abracadabra", "▁kebab", "▁bad"]
    assert grown.config.text.vocab_size == N + 3 and grown.training is False


def test_what_cannot_be_extended_is_refused(model, tiny_unigram):
    tok = tiny_unigram
    wordpiece = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    with pytest.raises(TokenizerError, match=r"wordpiece tokenizers do not score segmentations \(supported: unigram"):
        learn_pieces(wordpiece, TEXTS)
    with pytest.raises(TokenizerError, match="wordpiece tokenizers cannot take new pieces"):
        wordpiece.with_pieces(["ab"], [-1.0])
    # one language's texts: the fix offers no {language: texts}, which learn_pieces refuses
    with pytest.raises(InputError, match=r"learn_pieces: texts is one string \('kebab'\); pass an iterable of "
                                         r"texts, e\.g\. \['kebab'\]$"):
        learn_pieces(tok, "kebab")
    with pytest.raises(InputError, match="learn_pieces: texts maps 1 language"):
        learn_pieces(tok, {"x": TEXTS})
    with pytest.raises(InputError, match="num_pieces=0 must be an integer of at least 1"):
        learn_pieces(tok, TEXTS, 0)
    with pytest.raises(InputError, match="margin=nan must be a finite number above 0"):
        learn_pieces(tok, TEXTS, margin=float("nan"))
    with pytest.raises(TokenizerError, match="'ab' is already in the vocabulary"):
        tok.with_pieces(["ab"], [-1.0])
    with pytest.raises(TokenizerError, match="'kebab' has score -7.0; a score lies in \\[-6.5000, 0\\]"):
        tok.with_pieces(["kebab"], [-7.0])
    with pytest.raises(TokenizerError, match="'ke bab' is not a piece"):
        tok.with_pieces(["ke bab"], [-1.0])
    with pytest.raises(InputError, match=r"'▁kebab' has old_ids \[99\]; .* must lie in \[0, 26\)"):
        add_pieces(model, [NewPiece("▁kebab", -6.0, (99,), 1, 1)])
    with pytest.raises(InputError, match="add_pieces: no pieces given"):
        add_pieces(model, [])
    model.tokenizer = None
    with pytest.raises(InputError, match="the model carries no tokenizer; pass tokenizer="):
        extend_vocabulary(model, TEXTS)
