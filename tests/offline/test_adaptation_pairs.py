"""The adaptation data: English–X pairs from catalogs and CLDR, the rule that picks languages,
the test-sentence filter on the way to the batches, and the model folder a run leaves."""

import dataclasses
import json

import pytest
import yaml

import babelzoo
from babelzoo.datasets.heldout import HeldOutSentences
from babelzoo.offline.adaptation import (
    AdaptationPairs,
    catalog_tag,
    cldr_pairs,
    e5_small_accuracy,
    language_pairs,
    select_languages,
)
from babelzoo.train.run import build_run
from babelzoo.train.cli import pretrain_main
from babelzoo.train.config import load_recipe

pytestmark = pytest.mark.usefixtures("one_thread")

PO_HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
PLANTED = ("I am tired.", "Me zo skuizh.")  # a Tatoeba sentence, planted in a catalog


def write_catalog(root, locale, pairs, name="app"):
    path = root / "locale" / locale / "LC_MESSAGES" / f"{name}.po"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f'msgid "{en}"\nmsgstr "{x}"\n\n' for en, x in pairs)
    path.write_text(PO_HEADER + body, encoding="utf-8")
    return path


BRETON = [("Open the file", "Digeriñ ar restr"), ("Close the window", "Serriñ ar prenestr"),
          ("Save", "Enrollañ"), ("Delete the note", "Dilemel an notenn"), ("Search", "Klask"),
          ("Same", "same"), PLANTED]


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "data" / "tatoeba"
    folder.mkdir(parents=True)
    # the catalog's English side differs from the test sentence in case and spacing only
    (folder / "tatoeba.bre-eng.eng").write_text("i am  TIRED.\nWhere is the station?\n", encoding="utf-8")
    (folder / "tatoeba.bre-eng.bre").write_text("Skuizh on.\nPelec'h emañ ar gar?\n", encoding="utf-8")
    return tmp_path / "data"


def test_tatoeba_codes_map_to_the_tags_catalogs_use():
    assert [catalog_tag(c) for c in ("bre", "lvs", "est", "gle", "gla", "kab", "eus", "uzb", "swh")] == \
        ["br", "lv", "et", "ga", "gd", "kab", "eu", "uz", "sw"]


def test_cldr_pairs_are_english_names_beside_the_languages_own():
    pairs = set(cldr_pairs("br"))
    assert ("January", "Genver") in pairs and ("Monday", "Lun") in pairs and ("France", "Frañs") in pairs
    assert ("yesterday", "dec\u02bch") in pairs  # CLDR writes the modifier letter apostrophe
    assert cldr_pairs("xx-unknown") == []


def test_language_pairs_drop_test_sentences_and_same_text_and_count_by_source(tmp_path, data_dir):
    write_catalog(tmp_path / "cat", "br", BRETON)
    held = HeldOutSentences.from_data_dir(data_dir)
    got = language_pairs("bre", [], cldr=False, heldout=held, paths=[str(tmp_path / "cat")])
    assert sorted(got.pairs) == sorted(BRETON[:5])
    assert (got.tag, got.removed_as_test, got.same_text, got.by_source) == ("br", 1, 1, {"gettext": 5, "cldr": 0})


def test_the_rule_picks_weak_languages_with_enough_pairs(tmp_path):
    scores = e5_small_accuracy()
    assert scores["bre"] < 0.12 and scores["cor"] < 0.12 and scores["deu"] > 0.9
    catalogs = tmp_path / "cat"
    write_catalog(catalogs, "br", [(f"Message number {i}", f"Kemennadenn niverenn {i}") for i in range(30)])
    write_catalog(catalogs, "kw", [(f"Message number {i}", f"Messach niver {i}") for i in range(29)])
    write_catalog(catalogs, "de", [(f"Message number {i}", f"Nachricht Nummer {i}") for i in range(50)])
    chosen, looked = select_languages(0.12, 30, [], False, HeldOutSentences.of(()), [str(catalogs)])
    assert chosen == ["bre"]  # Cornish (cor) is weaker but has 29 pairs; German is not weak
    assert {code: len(p.pairs) for code, p in looked.items() if p.pairs} == {"cor": 29, "bre": 30}
    assert set(looked) == {code for code, acc in scores.items() if acc < 0.12}


def recipe(tmp_path, data_dir, **changes):
    catalogs = tmp_path / "cat"
    write_catalog(catalogs, "br", BRETON)
    write_catalog(catalogs, "de", [("Open the file", "Datei öffnen"), ("Save", "Speichern"), ("Search", "Suchen")])
    spec = {"model": "xlm_tiny",
            "model_overrides": {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "max_positions": 64},
            "tokenizer": {"vocab_size": 40, "model_type": "unigram"},
            "objectives": {"translation_ranking": {"max_length": 24}},
            "data": {"translation_ranking": [{"kind": "adaptation_pairs", "languages": "auto", "min_pairs": 3,
                                              "threshold": 0.1, "packages": [], "paths": [str(catalogs)],
                                              "cldr": False, "exclude": str(data_dir), "anchors": ["de"],
                                              "anchor_pairs": 2}]},
            "output_dir": str(tmp_path / "run"), "model_dir": "model", "max_steps": 2, "batch_size": 4,
            "checkpoint_every": 2, "progress": False, "tensorboard": False, "measure_mfu": False, **changes}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    return path


def decoded_examples(data, tokenizer):
    """Every example the run's batches are drawn from, as text."""
    parts = getattr(data, "datasets", None) or [data]
    texts = []
    for part in parts:
        for i in range(len(part)):
            example = part[i]
            texts += [tokenizer.decode(example.src), tokenizer.decode(example.tgt)]
    return texts


def test_a_planted_test_sentence_never_reaches_a_batch(tmp_path, data_dir):
    path = recipe(tmp_path, data_dir)
    run = build_run(load_recipe(path), path)
    data, tokenizer = run.data, run.tokenizer
    texts = decoded_examples(data, tokenizer)
    assert len(texts) == 2 * (4 + 2)  # Breton's 4 training pairs and 2 German anchors
    assert not any("tired" in t.lower() or "skuizh" in t.lower() for t in texts)
    assert any("Serriñ ar prenestr" in t for t in texts)
    assert not any("Digeriñ" in t for t in texts)  # "Open the file" is in the held-out tenth


def test_the_heldout_split_is_the_tenth_training_never_reads(tmp_path, data_dir):
    write_catalog(tmp_path / "cat", "br", BRETON)
    options = dict(exclude=str(data_dir), languages=["bre"], packages=[], paths=[str(tmp_path / "cat")], cldr=False)
    train, heldout = AdaptationPairs(**options).read(), AdaptationPairs(**options, split="heldout").read()
    assert heldout[0].pairs == [("Open the file", "Digeriñ ar restr")]
    assert sorted(train[0].pairs) == sorted(BRETON[1:5])


def test_a_run_leaves_a_loadable_model_with_its_record_and_card(tmp_path, data_dir):
    path = recipe(tmp_path, data_dir)
    assert pretrain_main(["--config", str(path)]) == 0
    folder = tmp_path / "run" / "model"
    record = json.loads((folder / "adaptation.json").read_text(encoding="utf-8"))
    assert record["languages"] == ["bre"] and record["tags"] == ["br"]
    assert record["pairs"]["bre"] == {"tag": "br", "sources": {"gettext": 5, "cldr": 0}, "available": 5, "train": 4,
                                      "used": 4, "removed_as_test": 1, "same_text": 1}
    assert record["anchors"]["de"]["used"] == 2 and record["removed_as_test"] == 1
    assert record["run"]["steps"] == 2 and record["run"]["budget"]["max_steps"] == 2
    assert record["rule"].startswith("Tatoeba languages where multilingual-e5-small scores below 0.1")
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "Adapted languages (1, Tatoeba codes): bre." in card and "| bre | br | 5 | 4 | gettext 5, cldr 0 | 1 |" in card
    assert "2 optimizer steps of 4 examples" in card
    model = babelzoo.from_pretrained(folder)
    assert model.tokenizer is not None and model.config.text.hidden_size == 32


def test_two_objectives_on_one_source_describe_it_once(tmp_path, data_dir):
    # the shipped recipe's shape: two objectives each read the same adaptation pairs
    path = recipe(tmp_path, data_dir)
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec["objectives"] = {"tlm": {"max_length": 24}, "translation_ranking": {"max_length": 24}}
    spec["data"] = {name: spec["data"]["translation_ranking"] for name in spec["objectives"]}
    path.write_text(yaml.safe_dump({**spec, "mixture": "sum"}, allow_unicode=True), encoding="utf-8")
    assert pretrain_main(["--config", str(path)]) == 0
    folder = tmp_path / "run" / "model"
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.count("Adapted languages (1, Tatoeba codes): bre.") == 1
    assert "`tlm`, `translation_ranking`" in card
    record = json.loads((folder / "adaptation.json").read_text(encoding="utf-8"))
    assert record["pairs"]["bre"]["used"] == 4 and record["run"]["objectives"] == ["tlm", "translation_ranking"]


def test_the_runs_languages_replace_the_rule(tmp_path, data_dir):
    path = recipe(tmp_path, data_dir)
    cfg = load_recipe(path, ["languages=[bre]", "data.translation_ranking=" + json.dumps(
        [{**yaml.safe_load(path.read_text(encoding="utf-8"))["data"]["translation_ranking"][0], "threshold": 0.01}])])
    sources = build_run(cfg, path).sources  # 0.01 alone would pick no language
    assert sources[0].record["languages"] == ["bre"] and sources[0].record["rule"] == "given"


def test_unknown_language_codes_are_refused_with_the_known_ones(tmp_path, data_dir):
    path = recipe(tmp_path, data_dir, languages=["br"])
    with pytest.raises(babelzoo.errors.ConfigError, match=r"\['br'\] are not Tatoeba codes \(known: afr, amh"):
        build_run(load_recipe(path), path)


def test_a_source_needs_exclude_stated(tmp_path):
    with pytest.raises(TypeError):
        AdaptationPairs()  # exclude has no default: a recipe says which data dir, or null


# --- a user's own pairs ------------------------------------------------------------------------------

def write_pairs(folder, code, lines):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{code}.tsv"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_a_users_pairs_join_the_adapted_languages_through_the_test_filter(tmp_path, data_dir, caplog):
    mine = tmp_path / "mine"
    # Breton: two new pairs, one the catalog already holds, one a test sentence (case and spacing aside)
    write_pairs(mine, "bre", ["Print the page\tMoullañ ar bajenn", "Rename\tAdenvel", "Save\tEnrollañ",
                              "I AM tired.\tSkuizh on."])
    # Faroese: e5-small's 0.66 is above the recipe's threshold and CLDR is off: only the user's two pairs
    write_pairs(mine, "fao", ["Open the file\tLat fílu upp", "Good evening\tGott kvøld"])
    # Zazaki: no Tatoeba file, no catalog, no e5 score: the user's pairs alone make it a language
    write_pairs(mine, "zza", ["Thank you\tWeş be", "Welcome\tXêr ama", "Good morning\tSıba şıma xeyr bo",
                              "Water\tAw"])
    path = recipe(tmp_path, data_dir, tokenizer={"vocab_size": 60, "model_type": "unigram"})
    with caplog.at_level("WARNING", logger="babelzoo.offline.adaptation"):
        assert pretrain_main(["--config", str(path), "--set", f"pairs_dir={mine}"]) == 0
    assert "fao has 2 pairs after the test-sentence filter, fewer than the rule's min_pairs=3" in caplog.text
    folder = tmp_path / "run" / "model"
    record = json.loads((folder / "adaptation.json").read_text(encoding="utf-8"))
    assert record["languages"] == ["bre", "fao", "zza"]
    # one of the four is in the held-out tenth (chosen by its English side)
    assert record["pairs"]["zza"] == {"tag": "zza", "sources": {"pairs_dir": 4, "gettext": 0, "cldr": 0}, "available": 4,
                                      "train": 3, "used": 3, "removed_as_test": 0, "same_text": 0}
    # the user's pairs come first: the catalog's "Save" is theirs now
    assert record["pairs"]["bre"]["sources"] == {"pairs_dir": 3, "gettext": 4, "cldr": 0}
    assert record["pairs"]["bre"]["removed_as_test"] == 2  # the catalog's planted sentence and the user's
    assert record["pairs"]["fao"] == {"tag": "fo", "sources": {"pairs_dir": 2, "gettext": 0, "cldr": 0}, "available": 2,
                                      "train": 1, "used": 1, "removed_as_test": 0, "same_text": 0}
    assert record["own_pairs"] == {"pairs_dir": {"folder": str(mine), "files": {"bre": 4, "fao": 2, "zza": 4}},
                                   "below_min_pairs": {"fao": 2}}
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert f"Pairs the user brought (pairs read, before the filter): from `{mine}`: bre.tsv (4), fao.tsv (2), zza.tsv (4)." in card
    assert "adapted because given: fao (2)." in card
    run = build_run(load_recipe(path, [f"pairs_dir={mine}"]), path)
    data, tokenizer = run.data, run.tokenizer
    texts = decoded_examples(data, tokenizer)
    assert any("Adenvel" in t for t in texts) and any("kvøld" in t for t in texts)
    assert not any("fílu" in t for t in texts)  # "Open the file" is in the held-out tenth
    assert not any("skuizh" in t.lower() for t in texts)


def test_a_users_pairs_from_a_hugging_face_dataset(tmp_path, data_dir):
    rows = [{"english": "Print the page", "text": "Moullañ ar bajenn"}, {"english": "Rename", "text": "Adenvel"}]
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                          encoding="utf-8")
    source = AdaptationPairs(exclude=str(data_dir), languages=["bre"], packages=[], cldr=False,
                             hf_pairs=[{"path": "json", "data_files": str(tmp_path / "pairs.jsonl"), "streaming": False,
                                        "columns": ["english", "text"], "src_lang": "en", "tgt_lang": "bre"}])
    heldout = dataclasses.replace(source, split="heldout")
    corpora = source.read() + heldout.read()
    assert sorted(p for c in corpora for p in c.pairs) == sorted((r["english"], r["text"]) for r in rows)
    assert source.record["pairs"]["bre"]["sources"] == {"hf_dataset": 2, "gettext": 0, "cldr": 0}
    assert source.record["own_pairs"]["hf_dataset"][0]["language"] == "bre"


@pytest.mark.parametrize("name, content, message", [
    ("bre.tsv", "Save\tEnrollañ\nRename\tAdenvel\textra\n", r"bre.tsv:2: expected 2 tab-separated fields, found 3"),
    ("bre.tsv", "Save\tEnrollañ\n\nRename\tAdenvel\n", r"bre.tsv:2"),
    ("bre.tsv", "Save\t\n", r"bre.tsv:1"),
    ("bre.tsv", b"Save\tEnroll\xe3\n", r"bre.tsv:1: .*UTF-8"),
    ("breton.tsv", "Save\tEnrollañ\n", r"breton.tsv: 'breton' is not a Tatoeba or ISO 639-3 language code"),
    ("bre.tsv", "", r"bre.tsv: no pairs"),
])
def test_a_malformed_pairs_file_is_named_with_its_line(tmp_path, name, content, message):
    from babelzoo.offline.adaptation import read_pairs_dir

    (tmp_path / "mine").mkdir()
    target = tmp_path / "mine" / name
    target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(ValueError, match=message):
        read_pairs_dir(tmp_path / "mine")


def test_pairs_dir_needs_a_folder_of_tsv_files_and_a_source_that_reads_it(tmp_path, data_dir):
    from babelzoo.offline.adaptation import read_pairs_dir

    with pytest.raises(babelzoo.errors.ConfigError, match="no such folder"):
        read_pairs_dir(tmp_path / "none")
    (tmp_path / "empty").mkdir()
    with pytest.raises(babelzoo.errors.ConfigError, match=r"holds no <code>.tsv file"):
        read_pairs_dir(tmp_path / "empty")
    path = recipe(tmp_path, data_dir)
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec["data"] = {"translation_ranking": [{"kind": "tsv", "path": str(tmp_path / "x.tsv"), "src_lang": "en",
                                             "tgt_lang": "br"}]}
    path.write_text(yaml.safe_dump(spec, allow_unicode=True), encoding="utf-8")
    with pytest.raises(babelzoo.errors.ConfigError, match="pairs_dir: no data source of this recipe reads a user's"):
        build_run(load_recipe(path, ["pairs_dir=mine"]), path)
