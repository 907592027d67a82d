"""Entity linking: precision and recall on hand-labelled sentences in several languages (CLDR
knowledge base), plus the matching rules on small alias tables."""

from __future__ import annotations

import pytest

from babelzoo.knowledge import EntityLinker, load_kb
from babelzoo.knowledge.linker import normalize, normalize_alias

# (language, sentence, gold mentions: surface text -> entity). Gold written by hand from the
# meaning of each sentence, not from the linker's output.
LABELLED = [
    ("en", "The yen is the currency of Japan, and Japanese is spoken there.",
     {"yen": "currency:JPY", "Japan": "territory:JP", "Japanese": "language:ja"}),
    ("en", "Ghana and Togo use the West African CFA franc; English and French are official languages.",
     {"Ghana": "territory:GH", "Togo": "territory:TG", "West African CFA franc": "currency:XOF",
      "English": "language:en", "French": "language:fr"}),
    ("en", "She moved from India to Côte d’Ivoire, where she is the only male doctor who speaks Hindi.",
     {"India": "territory:IN", "Côte d’Ivoire": "territory:CI", "Hindi": "language:hi"}),
    ("de", "Deutschland grenzt an Frankreich, Polen und die Schweiz; man zahlt dort mit Euro.",
     {"Deutschland": "territory:DE", "Frankreich": "territory:FR", "Polen": "territory:PL",
      "Schweiz": "territory:CH", "Euro": "currency:EUR"}),
    ("de", "In Österreich spricht man Deutsch, in Japan Japanisch.",
     {"Österreich": "territory:AT", "Deutsch": "language:de", "Japan": "territory:JP", "Japanisch": "language:ja"}),
    ("fr", "Le Japon utilise le yen, et on parle français au Canada et en Belgique.",
     {"Japon": "territory:JP", "yen": "currency:JPY", "français": "language:fr", "Canada": "territory:CA",
      "Belgique": "territory:BE"}),
    ("es", "España y México comparten el idioma español, pero el peso mexicano es la moneda de México.",
     {"España": "territory:ES", "México": "territory:MX", "español": "language:es", "peso mexicano": "currency:MXN"}),
    ("ja", "日本の通貨は円で、公用語は日本語です。",
     {"日本": "territory:JP", "円": "currency:JPY", "日本語": "language:ja"}),
    ("sw", "Kenya na Tanzania ni nchi za Afrika ya Mashariki; Kiswahili kinazungumzwa huko.",
     {"Kenya": "territory:KE", "Tanzania": "territory:TZ", "Afrika ya Mashariki": "territory:014",
      "Kiswahili": "language:sw"}),
    ("ru", "Россия и Украина — соседние страны.", {"Россия": "territory:RU", "Украина": "territory:UA"}),
]


@pytest.fixture(scope="module")
def linker():
    kb = load_kb("cldr")
    return EntityLinker.from_kb(kb, ["en", "de", "fr", "es", "ja", "sw", "ru"])


def test_precision_and_recall_on_hand_labelled_sentences(linker):
    predicted = correct = gold_total = 0
    misses = []
    for lang, sentence, gold in LABELLED:
        mentions = linker.link_text(sentence, lang)
        for m in mentions:
            assert sentence[m.start:m.end] == m.text
        found = {m.text: m.entity for m in mentions}
        predicted += len(found)
        gold_total += len(gold)
        for text, entity in found.items():
            if gold.get(text) == entity:
                correct += 1
            else:
                misses.append((lang, text, entity, gold.get(text)))
    precision, recall = correct / predicted, correct / gold_total
    assert precision >= 0.95, misses
    assert recall >= 0.9, misses


def test_language_restriction_blocks_foreign_homographs(linker):
    # French "or" (gold, XAU) and Catalan/Walloon "Male" (Malta) must not fire in English text
    assert [m.text for m in linker.link_text("Tea or coffee? The male said no.", "en")] == []
    assert [m.entity for m in linker.link_text("Le prix de l'or monte.", "fr")] == ["currency:XAU"]


def test_token_input_gives_token_offsets(linker):
    tokens = ["Ich", "wohne", "in", "der", "Schweiz", "und", "bezahle", "mit", "Schweizer", "Franken", "."]
    mentions = linker.link_tokens(tokens, "de")
    assert [(m.start, m.end, m.entity) for m in mentions] == [(4, 5, "territory:CH"), (8, 10, "currency:CHF")]
    # tokens of a no-space script are joined without spaces before matching
    mentions = linker.link_tokens(["日本", "の", "首都", "は", "東京", "です"], "ja")
    assert [(m.start, m.end, m.entity) for m in mentions][0] == (0, 1, "territory:JP")
    batch = linker([["Kenya", "na", "Tanzania"], "Japan and India"], lang=["sw", "en"])
    assert [[m.entity for m in item] for item in batch] == [["territory:KE", "territory:TZ"],
                                                            ["territory:JP", "territory:IN"]]


def test_longest_match_and_overlaps():
    linker = EntityLinker({"New York": ["ny_state"], "York": ["york"], "New York City": ["nyc"],
                           "City Hall": ["hall"], "Hall": ["hall2"]})
    mentions = linker.link_text("New York City Hall and York.")
    assert [(m.text, m.entity) for m in mentions] == [("New York City", "nyc"), ("Hall", "hall2"), ("York", "york")]


def test_word_boundaries_and_normalisation():
    linker = EntityLinker({"Straße": ["street"], "Côte d'Ivoire": ["ci"], "ＵＳＢ": ["usb"], "東京都": ["tokyo"]})
    assert [m.entity for m in linker.link_text("STRASSE, Cote d’Ivoire")] == ["street"]  # accents are kept
    assert [m.entity for m in linker.link_text("côte d’ivoire and usb")] == ["ci", "usb"]
    assert linker.link_text("Straßenbahn") == []  # no match inside a word of a spaced script
    assert [m.entity for m in linker.link_text("東京都庁")] == ["tokyo"]  # any boundary inside Han text
    stripped = EntityLinker({"Côte d'Ivoire": ["ci"]}, strip_accents=True)
    assert [m.entity for m in stripped.link_text("Cote d'Ivoire")] == ["ci"]
    norm, starts, ends = normalize("ﬁ Straße")
    assert norm == "fi strasse" and starts[:2] == [0, 0] and (starts[-1], ends[-1]) == (7, 8)
    assert normalize_alias("東京 都") == "東京都" and normalize_alias("  New\tYork ") == "new york"


def test_ambiguous_names_keep_ranked_candidates():
    aliases = {"en": {"Georgia": ["us_state", "country"]}, "de": {"Georgien": ["country"]}}
    linker = EntityLinker(aliases, prior={"country": 10.0, "us_state": 1.0})
    (mention,) = linker.link_text("Georgia", "en")
    assert mention.candidates == ("country", "us_state") and mention.entity == "country"
    assert linker.link_text("Georgia", "de") == []
    assert [m.entity for m in linker.link_text("Georgien")] == ["country"]  # lang=None: every language
    assert EntityLinker({"Georgia": ["a", "b"]}).link_text("Georgia")[0].candidates == ("a", "b")
