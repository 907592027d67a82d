"""KB facts as text and the ``entity_mlm`` objective (ERNIE 1.0 entity masking)."""

from __future__ import annotations

import pytest
import torch

import babelzoo
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.knowledge.entity_mlm import EntityMLM, mask_units
from babelzoo.knowledge.facts import FactDataset, is_heldout_entity, kb_facts
from babelzoo.knowledge.graph import GraphKB
from babelzoo.objectives.batching import IGNORE

COUNTRIES = {  # code: (en, fr, currency code, currency en, currency fr)
    "JP": ("Japan", "Japon", "JPY", "Japanese yen", "yen japonais"),
    "CH": ("Switzerland", "Suisse", "CHF", "Swiss franc", "franc suisse"),
    "GB": ("United Kingdom", "Royaume-Uni", "GBP", "British pound", "livre sterling"),
    "IN": ("India", "Inde", "INR", "Indian rupee", "roupie indienne"),
    "BR": ("Brazil", "Brésil", "BRL", "Brazilian real", "réal brésilien"),
    "RU": ("Russia", "Russie", "RUB", "Russian ruble", "rouble russe"),
}


def _kb() -> GraphKB:
    kb = GraphKB("test")
    for code, (en, fr, cur, cur_en, cur_fr) in COUNTRIES.items():
        kb.add_entity(f"territory:{code}", "territory")
        kb.add_entity(f"currency:{cur}", "currency")
        kb.add_label(f"territory:{code}", "en", en)
        kb.add_label(f"territory:{code}", "fr", fr)
        kb.add_label(f"currency:{cur}", "en", cur_en)
        kb.add_label(f"currency:{cur}", "fr", cur_fr)
        kb.add_triple(f"territory:{code}", "uses_currency", f"currency:{cur}")
    kb.add_label("territory:AQ", "en", "Antarctica")  # no French label, no currency
    kb.add_triple("territory:AQ", "located_in", "territory:JP")
    return kb


@pytest.fixture(scope="module")
def tokenizer():
    facts, _ = kb_facts(_kb(), ["en", "fr"])
    texts = [f.text for f in facts]
    return SentencePieceTokenizer.train({"en": texts[::2], "fr": texts[1::2]}, vocab_size=80, alpha=1.0)


def test_facts_are_verbalised_triples_with_exact_spans():
    facts, report = kb_facts(_kb(), {"en": "en", "fr": "fr"})
    assert report.per_language == {"en": 7, "fr": 6} and report.unlabelled == 1 and report.excluded_triples == 0
    fr = next(f for f in facts if f.lang == "fr" and f.head == "territory:CH")
    assert fr.text == "Suisse · uses currency · franc suisse"
    (h0, h1), (t0, t1) = fr.spans
    assert fr.text[h0:h1] == "Suisse" and fr.text[t0:t1] == "franc suisse"


def test_exclude_drops_every_triple_naming_an_excluded_entity():
    held = {"territory:JP"}
    facts, report = kb_facts(_kb(), ["en"], exclude=held.__contains__)
    assert report.excluded_triples == 2  # JP's currency and Antarctica located_in JP
    assert all("territory:JP" not in (f.head, f.tail) for f in facts) and len(facts) == 5
    # The shipped split is a fixed function of the id: about a quarter of many ids.
    share = sum(is_heldout_entity(f"entity:{i}") for i in range(4000)) / 4000
    assert 0.22 < share < 0.28 and is_heldout_entity("territory:JP") == is_heldout_entity("territory:JP")


def test_fact_dataset_spans_cover_the_label_tokens(tokenizer):
    facts, _ = kb_facts(_kb(), ["en", "fr"])
    data = FactDataset(facts, tokenizer)
    for fact, example in zip(facts, data):
        (h0, h1), (t0, t1) = example.spans
        assert example.ids[h0:h1] == tokenizer.encode(fact.head_label, add_special_tokens=False)
        assert example.ids[t0:t1] == tokenizer.encode(fact.tail_label, add_special_tokens=False)
        assert example.lang == fact.lang and t1 == len(example.ids)


def test_one_whole_mention_is_masked_per_row_80_10_10():
    special = torch.zeros(50, dtype=torch.bool)
    special[:5] = True
    replacements = (~special).nonzero().squeeze(1)
    ids = torch.tensor([[1, 10, 11, 12, 20, 30, 31, 2]])
    spans = [[(1, 4), (5, 7)]]
    g = torch.Generator().manual_seed(0)
    counts = {"mask": 0, "random": 0, "kept": 0}
    chosen = {(1, 4): 0, (5, 7): 0}
    n = 4000
    for _ in range(n):
        masked, labels = mask_units(ids, spans, special, replacements, mask_id=4, entities_only=True, rate=0.15,
                                    generator=g)
        where = labels[0].ne(IGNORE).nonzero().squeeze(1).tolist()
        span = (where[0], where[-1] + 1)
        assert span in chosen and where == list(range(*span))  # exactly one whole mention
        assert torch.equal(labels[0, where], ids[0, where])
        assert torch.equal(masked[0, [i for i in range(8) if i not in where]],
                           ids[0, [i for i in range(8) if i not in where]])
        chosen[span] += 1
        if (masked[0, where] == 4).all():
            counts["mask"] += 1
        elif torch.equal(masked[0, where], ids[0, where]):
            counts["kept"] += 1
        else:
            counts["random"] += 1
            assert not special[masked[0, where]].any()
    assert abs(chosen[(1, 4)] / n - 0.5) < 0.03
    # Random tokens can reproduce the original (prob ~1/45 per token): "kept" is slightly above 10%.
    assert abs(counts["mask"] / n - 0.8) < 0.02 and abs(counts["random"] / n - 0.1) < 0.02
    assert abs(counts["kept"] / n - 0.1) < 0.02


def test_truncated_mentions_are_dropped_and_bad_spans_refused(tokenizer):
    specials = tokenizer.specials
    objective = EntityMLM(specials, max_length=6)
    batch = objective.prepare([([10, 11, 12, 13, 14, 15], [(0, 2), (3, 6)])])
    labelled = batch["labels"][0].ne(IGNORE).nonzero().squeeze(1).tolist()
    assert labelled == [1, 2] and int(batch["truncated"]) == 2  # only the head mention survives the cut
    with pytest.raises(ValueError, match=r"example 0: mention span \(2, 9\) is outside its 3 tokens"):
        objective.prepare([([10, 11, 12], [(2, 9)])])


def test_entity_mlm_learns_the_currency_of_each_country(tokenizer):
    """After training on the facts, the masked tail of ``X · uses currency · [MASK]`` is
    predicted right for most countries in both languages (chance: ~1/80 per token)."""
    torch.manual_seed(0)
    facts, _ = kb_facts(_kb(), ["en", "fr"])
    data = FactDataset(facts, tokenizer, encode_lang=False)
    specials = tokenizer.specials
    model = babelzoo.create_model("xlm_tiny", vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                                  num_languages=0, dropout=0.0, attention_dropout=0.0)
    objective = EntityMLM(specials)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    examples = list(data)
    first = None
    for step in range(150):
        loss = objective(model, objective.prepare(examples))
        first = first if first is not None else loss.value.item()
        optimizer.zero_grad()
        loss.value.backward()
        optimizer.step()
    model.eval()
    right = 0
    tails = [e for f, e in zip(facts, examples) if f.relation == "uses_currency"]
    for example in tails:
        t0, t1 = example.spans[1]
        ids = torch.tensor([[specials.cls, *example.ids[:t0], *[specials.mask] * (t1 - t0), specials.sep]])
        with torch.no_grad():
            logits = model.mlm_logits(model(ids).last_hidden)[0, 1 + t0:1 + t1]
        right += logits.argmax(-1).tolist() == example.ids[t0:t1]
    assert loss.value.item() < 0.3 * first
    assert right >= 0.8 * len(tails), (right, len(tails))


def test_name_pairs_are_a_dictionary_of_the_kept_entities():
    from babelzoo.knowledge.facts import kb_name_pairs

    pairs = kb_name_pairs(_kb(), {"en": "en", "fr": "fr"}, exclude={"territory:JP"}.__contains__)
    assert set(pairs) == {"fr"} and len(pairs["fr"]) == 11  # 6 currencies + 5 territories (Antarctica has no fr)
    assert ("Switzerland", "Suisse") in pairs["fr"] and ("Swiss franc", "franc suisse") in pairs["fr"]
    assert ("Japan", "Japon") not in pairs["fr"]
    only = kb_name_pairs(_kb(), {"en": "en", "fr": "fr"}, types=["currency"])["fr"]
    assert sorted(only)[0] == ("Brazilian real", "réal brésilien") and len(only) == 6


def test_language_ids_only_when_asked_for(tokenizer):
    """A model without language embeddings (multilingual-e5) trains on facts tagged with their
    language when the objective is told not to pass language ids."""
    facts, _ = kb_facts(_kb(), ["en", "fr"])
    examples = FactDataset(facts, tokenizer).examples[:4]
    specials = tokenizer.specials
    assert "language_ids" in EntityMLM(specials).prepare(examples)
    assert "language_ids" not in EntityMLM(specials, use_language_ids=False).prepare(examples)
