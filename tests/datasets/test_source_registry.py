"""Every registered data source, built on small inputs written here (or, for the sources of the
embedded catalogs, on Django's catalogs read beside them with the standard library), yields
examples of the type it declares it ``provides``, as many as its input holds, and says what
text trains the tokenizer; a source that reads a file names a malformed line by file and line.

A source registered without a case here fails ``test_every_registered_source_has_a_case`` and
its own parametrised case (the parameters are the registry's names, not this file's)."""

from __future__ import annotations

import gettext
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Optional

import pytest
import torch

from babelzoo.datasets.loader import PairExample, TextExample
from babelzoo.datasets.sources import EXAMPLE_TYPES, SOURCES, BuildContext, parse_source
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import BabelzooError
from babelzoo.knowledge.facts import EntityExample
from babelzoo.knowledge.kbert import SentenceTree
from babelzoo.typed import Where

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "f", "japan", "germany", "euro",
         "france", "·", "currency", ",", "query", ":", "passage", "dog", "cat"]


@dataclass
class Case:
    """A source's spec, the texts it must give the tokenizer (None: checked by ``check``), the
    examples its dataset must hold, and a spec that reads a malformed file with the message that
    must name it."""

    spec: dict
    texts: Optional[dict[str, list[str]]]
    count: int
    model: Any = None
    # (a spec reading a malformed file, the message naming it), or why the source reads no file of the user's
    malformed: tuple[dict, str] | str = "its input is data installed with babelzoo"
    check: Optional[Callable[[Any, Any], None]] = None


def write(path: Path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


BAD_UTF8 = b"a b\n\xff c\n"  # line 2 is not UTF-8


# --- files --------------------------------------------------------------------------------------

def text_case(tmp: Path) -> Case:
    path = write(tmp / "de.txt", "a b\n\nc d e\nf\n")
    return Case({"kind": "text", "path": path, "lang": "de"}, {"de": ["a b", "c d e", "f"]}, 3,
                malformed=({"kind": "text", "path": write(tmp / "bad.txt", BAD_UTF8), "lang": "de"}, r"bad.txt:2"))


def parallel_case(tmp: Path) -> Case:
    src, tgt = write(tmp / "en.txt", "a\nb c\nd\n"), write(tmp / "de.txt", "e\nf\nf e\n")
    bad = write(tmp / "bad.txt", BAD_UTF8 + b"d\n")
    return Case({"kind": "parallel", "src": src, "tgt": tgt, "src_lang": "en", "tgt_lang": "de"},
                {"en": ["a", "b c", "d"], "de": ["e", "f", "f e"]}, 3,
                malformed=({"kind": "parallel", "src": src, "tgt": bad, "src_lang": "en", "tgt_lang": "de"},
                           r"bad.txt:2"))


def tsv_case(tmp: Path) -> Case:
    path = write(tmp / "pairs.tsv", "a\te\nb c\tf\n")
    bad = write(tmp / "bad.tsv", "a\te\nb c\n")
    spec = {"kind": "tsv", "src_lang": "en", "tgt_lang": "de", "num_fields": 2}
    return Case({**spec, "path": path}, {"en": ["a", "b c"], "de": ["e", "f"]}, 2,
                malformed=({**spec, "path": bad}, r"bad.tsv:2"))


def documents_case(tmp: Path) -> Case:
    path = write(tmp / "docs.txt", "a b\nc\n\nd\ne f\nf\n\nb\n")  # the last document has one sentence: no pair
    return Case({"kind": "documents", "path": path, "lang": "en"}, {"en": ["a b", "c", "d", "e f", "f"]}, 2,
                malformed=({"kind": "documents", "path": write(tmp / "bad.txt", BAD_UTF8), "lang": "en"},
                           r"bad.txt:2"))


def hf_dataset_case(tmp: Path) -> Case:
    pytest.importorskip("datasets")
    rows = [{"en": "a b", "de": "e"}, {"en": "c", "de": "f f"}, {"en": "d", "de": "e f"}]
    path = write(tmp / "pairs.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return Case({"kind": "hf_dataset", "path": "json", "data_files": path, "columns": ["en", "de"],
                 "src_lang": "en", "tgt_lang": "de", "streaming": False},
                {"en": ["a b", "c", "d"], "de": ["e", "f f", "e f"]}, 3,
                malformed="its files are parsed by the datasets library (tests/datasets/test_streaming.py)")


def adaptation_pairs_case(tmp: Path) -> Case:
    from babelzoo.offline.embedded import is_heldout

    pairs = [("Save", "Goym"), ("Open the file", "Lat fílu upp"), ("Close", "Lat aftur"), ("Delete", "Strika")]
    write(tmp / "mine" / "fao.tsv", "".join(f"{en}\t{fo}\n" for en, fo in pairs))
    write(tmp / "bad" / "fao.tsv", "Save\tGoym\nClose\tLat\taftur\n")
    kept = [(en, fo) for en, fo in pairs if not is_heldout(en)]  # the training split: the documented rule
    spec = {"kind": "adaptation_pairs", "exclude": None, "languages": ["fao"], "packages": [], "cldr": False,
            "min_pairs": 1}
    return Case({**spec, "pairs_dir": str(tmp / "mine")},
                None, len(kept),
                malformed=({**spec, "pairs_dir": str(tmp / "bad")}, r"fao.tsv:2: expected 2 tab-separated fields, found 3"),
                check=lambda source, data: _same_pairs(source, kept))


def _same_pairs(source, expected) -> None:
    (corpus,) = source.corpora()
    assert sorted(corpus.pairs) == sorted(expected)


def media_manifest_case(tmp: Path) -> Case:
    from PIL import Image

    from babelzoo.zoo.factory import model_config

    for name, colour in (("red", (255, 0, 0)), ("blue", (0, 0, 255))):
        Image.new("RGB", (8, 8), colour).save(tmp / f"{name}.png")
    rows = [{"image": "red.png", "text": "a b", "lang": "en"}, {"image": "blue.png", "text": "c", "lang": "de"}]
    path = write(tmp / "manifest.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    bad = write(tmp / "bad.jsonl", json.dumps(rows[0]) + "\n{\"image\": \"red.png\", \"text\": \n")
    return Case({"kind": "media_manifest", "path": path}, {"en": ["a b"], "de": ["c"]}, 2,
                model=SimpleNamespace(config=model_config("vl_dual_tiny")),
                malformed=({"kind": "media_manifest", "path": bad}, r"bad.jsonl:2: invalid JSON"))


# --- the embedded catalogs ----------------------------------------------------------------------

MESSAGE = "Enter a valid value."  # a Django message, in the training split (its sha1 starts above 10%)


def django_translation(lang: str = "de") -> str:
    django = pytest.importorskip("django")
    locale = Path(django.__file__).parent / "conf" / "locale"
    return gettext.translation("django", localedir=str(locale), languages=[lang]).gettext(MESSAGE)


def catalog_case(kind: str, provides_pairs: bool) -> Callable[[Path], Case]:
    def case(tmp: Path) -> Case:
        from babelzoo.offline.embedded import is_heldout

        assert not is_heldout(MESSAGE)
        german = django_translation()
        assert german != MESSAGE  # the stdlib found the catalog

        def check(source, data) -> None:
            texts = source.texts(None)
            assert set(texts) == ({"en", "de"} if provides_pairs else {"de"})
            assert german in texts["de"]
            if provides_pairs:
                assert MESSAGE in texts["en"] and len(texts["en"]) == len(texts["de"])
            heldout = parse_source({**case_spec, "split": "heldout"}, Where("data.x[0]")).texts(None)
            assert german not in heldout["de"]  # the held-out split never holds a training message

        case_spec = {"kind": kind, "langs": ["de"], "packages": ["django"]}
        return Case(case_spec, None, -1, check=check)

    return case


# --- knowledge bases ----------------------------------------------------------------------------

TRIPLES = "Q17\tcurrency\tQ8146\nQ183\tcurrency\tQ4916\nQ183\tborders\tQ142\nQ142\tcurrency\tQ4916\n"
ENTITIES = ("Q17\ten\tJapan\nQ17\tde\tJapan\nQ8146\ten\tyen\nQ183\ten\tGermany\nQ183\tde\tDeutschland\n"
            "Q4916\ten\teuro\nQ4916\tde\tEuro\nQ142\ten\tFrance\n")


def kb_folder(tmp: Path) -> str:
    write(tmp / "kb" / "triples.tsv", TRIPLES)
    write(tmp / "kb" / "entities.tsv", ENTITIES)
    return str(tmp / "kb")


def bad_kb(tmp: Path) -> str:
    write(tmp / "badkb" / "triples.tsv", "Q17\tcurrency\tQ8146\nQ183\tcurrency\n")
    write(tmp / "badkb" / "entities.tsv", ENTITIES)
    return str(tmp / "badkb")


# en: every triple has both ends named; de: only Germany uses the euro (France has no German name)
EN_FACTS = ["Japan · currency · yen", "Germany · currency · euro", "Germany · borders · France",
            "France · currency · euro"]


def kb_facts_case(tmp: Path) -> Case:
    spec = {"kind": "kb_facts", "langs": ["en", "de"], "exclude_heldout": False}
    return Case({**spec, "kb": kb_folder(tmp)}, {"en": EN_FACTS, "de": ["Deutschland · currency · Euro"]}, 5,
                malformed=({**spec, "kb": bad_kb(tmp)}, r"triples.tsv:2: expected 3 fields"))


ENTITY_INDEX = {"Q17": 1, "Q8146": 2, "Q183": 3, "Q4916": 4, "Q142": 5}


def kb_aligned_facts_case(tmp: Path) -> Case:
    def check(source, data) -> None:
        # each fact's head and tail mark their first token with the entity's index, nothing else
        assert [sorted(i for i in x["entities"] if i) for x in data] == [[1, 2], [3, 4], [3, 5], [4, 5]]

    spec = {"kind": "kb_aligned_facts", "langs": ["en"], "exclude_heldout": False}
    return Case({**spec, "kb": kb_folder(tmp)}, {"en": EN_FACTS}, 4,
                model=SimpleNamespace(knowledge=SimpleNamespace(entity_index=ENTITY_INDEX)), check=check,
                malformed=({**spec, "kb": bad_kb(tmp)}, r"triples.tsv:2: expected 3 fields"))


def kb_names_case(tmp: Path) -> Case:
    spec = {"kind": "kb_names", "langs": ["en", "de"], "exclude_heldout": False}
    return Case({**spec, "kb": kb_folder(tmp)},
                {"en": ["Japan", "Germany", "euro"], "de": ["Japan", "Deutschland", "Euro"]}, 3,
                malformed=({**spec, "kb": bad_kb(tmp)}, r"triples.tsv:2: expected 3 fields"))


def kb_trees_case(tmp: Path) -> Case:
    sentences = write(tmp / "en.txt", "Germany a b\nc d\nFrance e\n")

    def check(source, data) -> None:
        linked = [any(tree.is_branch) for tree, _ in data]
        assert linked == [True, False, True]  # Germany and France have facts; "c d" names nothing

    spec = {"kind": "kb_trees", "sentences": {"kind": "text", "path": sentences, "lang": "en"}}
    return Case({**spec, "kb": kb_folder(tmp)}, {"en": ["Germany a b", "c d", "France e"]}, 3, check=check,
                malformed=({**spec, "kb": bad_kb(tmp)}, r"triples.tsv:2: expected 3 fields"))


def kb_texts_case(tmp: Path) -> Case:
    write(tmp / "kg" / "entity2text.txt", "01\tdog, a canid\n02\tcanine, a mammal\n03\tcat, a feline\n")
    write(tmp / "kg" / "relation2text.txt", "_hypernym\thypernym\n")
    write(tmp / "kg" / "train.tsv", "01\t_hypernym\t02\n")
    write(tmp / "bad" / "entity2text.txt", "01\tdog, a canid\n02\n")
    write(tmp / "bad" / "relation2text.txt", "_hypernym\thypernym\n")
    write(tmp / "bad" / "train.tsv", "01\t_hypernym\t02\n")
    # every entity's text, listed or not in a triple (the cat is in none), in the file's order
    return Case({"kind": "kb_texts", "kb": str(tmp / "kg")}, {"en": ["dog, a canid", "canine, a mammal", "cat, a feline"]},
                3, malformed=({"kind": "kb_texts", "kb": str(tmp / "bad")}, r"entity2text.txt:2: expected 'id<TAB>text'"))


def kg_link_pairs_case(tmp: Path) -> Case:
    def graph(folder: str, train: str) -> str:
        write(tmp / folder / "entity2text.txt", "01\tdog\n02\tcanine\n03\tcat\n")
        write(tmp / folder / "relation2text.txt", "_hypernym\thypernym\n_also_see\talso see\n")
        write(tmp / folder / "train.tsv", train)
        write(tmp / folder / "dev.tsv", "03\t_hypernym\t02\n")
        write(tmp / folder / "test.tsv", "02\t_also_see\t03\n")
        return str(tmp / folder)

    good = graph("kg", "01\t_hypernym\t02\n03\t_also_see\t01\n")
    bad = graph("badkg", "01\t_hypernym\t02\n03\t_also_see\n")
    questions = ["query: dog, hypernym", "query: cat, also see", "query: canine, inverse hypernym",
                 "query: dog, inverse also see"]
    answers = ["passage: canine", "passage: dog", "passage: dog", "passage: cat"]
    return Case({"kind": "kg_link_pairs", "kb": good}, {"en": questions + answers}, 4,
                malformed=({"kind": "kg_link_pairs", "kb": bad}, r"train.tsv:2: expected 3 fields"))


# --- rendered media -----------------------------------------------------------------------------

def emoji_images_case(tmp: Path) -> Case:
    pytest.importorskip("emoji")
    from babelzoo.offline.emoji import emoji_key, emoji_names, heldout_emoji
    from babelzoo.zoo.factory import model_config

    first = sorted(emoji_names(["en"]).items())[:6]  # ``limit`` keeps the first emoji, then the split drops held-out ones
    held = heldout_emoji()
    kept = [names["en"] for char, names in first if emoji_key(char) not in held]
    return Case({"kind": "emoji_images", "langs": ["en"], "size": 16, "limit": 6}, {"en": kept}, len(kept),
                model=SimpleNamespace(config=model_config("vl_dual_tiny")))


def emoji_speech_case(tmp: Path) -> Case:
    pytest.importorskip("emoji")
    pytest.importorskip("espeakng_loader")
    from babelzoo.offline.emoji import emoji_key, emoji_names, heldout_emoji
    from babelzoo.zoo.factory import model_config

    held = heldout_emoji()
    kept = [n["en"] for c, n in sorted(emoji_names(["en"]).items()) if emoji_key(c) not in held][:2]
    return Case({"kind": "emoji_speech", "langs": ["en"], "limit": 2}, {"en": kept}, 2,
                model=SimpleNamespace(config=model_config("speech_dual_tiny")))


CASES: dict[str, Callable[[Path], Case]] = {
    "text": text_case, "parallel": parallel_case, "tsv": tsv_case, "documents": documents_case,
    "hf_dataset": hf_dataset_case, "media_manifest": media_manifest_case, "adaptation_pairs": adaptation_pairs_case,
    "catalog_text": catalog_case("catalog_text", False), "catalog_pairs": catalog_case("catalog_pairs", True),
    "catalog_documents": catalog_case("catalog_documents", False),
    "catalog_parallel_documents": catalog_case("catalog_parallel_documents", True),
    "kb_facts": kb_facts_case, "kb_aligned_facts": kb_aligned_facts_case, "kb_names": kb_names_case,
    "kb_texts": kb_texts_case, "kb_trees": kb_trees_case, "kg_link_pairs": kg_link_pairs_case,
    "emoji_images": emoji_images_case, "emoji_speech": emoji_speech_case,
}


def _ids(ids) -> bool:
    return len(ids) > 0 and all(isinstance(int(i), int) for i in ids)


# what an example of each type is (the type a source declares it provides)
SHAPES: dict[str, Callable[[Any], bool]] = {
    "sentence": lambda x: isinstance(x, TextExample) and _ids(x.ids) and bool(x.lang),
    "pair": lambda x: isinstance(x, PairExample) and _ids(x.src) and _ids(x.tgt) and bool(x.src_lang and x.tgt_lang),
    "document": lambda x: len(x) >= 2 and all(SHAPES["sentence"](s) for s in x),
    "parallel_document": lambda x: len(x) >= 2 and all(SHAPES["pair"](s) for s in x),
    "entity_mentions": lambda x: isinstance(x, EntityExample) and _ids(x.ids) and len(x.spans) == 2
    and all(0 <= a < b <= len(x.ids) for a, b in x.spans),
    "entity_alignment": lambda x: set(x) == {"input_ids", "entities"} and len(x["input_ids"]) == len(x["entities"])
    and sum(1 for e in x["entities"] if e) == 2,
    "sentence_tree": lambda x: isinstance(x[0], SentenceTree) and _ids(x[0].input_ids) and bool(x[1])
    and len(x[0].input_ids) == len(x[0].position_ids) == len(x[0].is_branch) == x[0].visible.shape[0],
    "media_text": lambda x: _ids(x["input_ids"]) and bool(x["lang"])
    and any(isinstance(x.get(k), torch.Tensor) for k in ("pixel_values", "audio_features")),
}


def test_every_registered_source_has_a_case(every_part_tested):
    every_part_tested(SOURCES, CASES)


def test_every_example_type_a_source_provides_has_a_shape():
    provided = {SOURCES.get(kind).provides for kind in SOURCES.list()}
    assert provided <= set(SHAPES) <= set(EXAMPLE_TYPES), sorted(provided - set(SHAPES))


@pytest.mark.parametrize("kind", SOURCES.list())
def test_a_source_yields_the_examples_it_declares(kind, tmp_path):
    assert kind in CASES, f"data source {kind!r} has no case: add one to CASES"
    case = CASES[kind](tmp_path)
    source = parse_source(case.spec, Where("data.x[0]"))
    assert source.kind == kind
    source.load()
    if case.model is not None:
        source.check_model(case.model)
    context = BuildContext(WordPieceTokenizer(WORDS), "t", tmp_path / "cache", model=case.model)
    texts = source.texts(context)
    if case.texts is not None:
        assert texts == case.texts
    data = source.dataset(context)
    if case.count >= 0:
        assert len(data) == case.count
    examples = [data[i] for i in range(len(data))]
    assert examples, f"{kind}: no examples"
    bad = [x for x in examples if not SHAPES[source.provides](x)]
    assert not bad, f"{kind} provides {source.provides!r}; these are not: {bad[:2]}"
    if case.check is not None:
        case.check(source, examples)


@pytest.mark.parametrize("kind", [k for k in SOURCES.list() if k in CASES])
def test_a_malformed_line_is_named_by_file_and_line(kind, tmp_path):
    case = CASES[kind](tmp_path)
    if isinstance(case.malformed, str):
        pytest.skip(f"{kind}: {case.malformed}")
    spec, message = case.malformed
    source = parse_source(spec, Where("data.x[0]"))
    with pytest.raises(BabelzooError, match=message):
        source.load()
        source.texts(BuildContext(None, "t", tmp_path / "cache"))
        source.dataset(BuildContext(WordPieceTokenizer(WORDS), "t", tmp_path / "cache", model=case.model))
