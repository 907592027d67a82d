"""K-BERT sentence trees: the visible matrix and soft positions of the paper's example, built by
hand; the injector on a toy KB; the no-knowledge ablation through the encoder's mask API."""

from __future__ import annotations

import pytest
import torch

from babelzoo.knowledge import GraphKB
from babelzoo.knowledge.kbert import KBertInjector, collate_trees, flatten_tree
from babelzoo.zoo.model_config import ModelConfig
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.model import BabelModel

VOCAB = {"[CLS]": 1, "Tim": 10, "Cook": 11, "is": 12, "visiting": 13, "Beijing": 14, "now": 15,
         "CEO": 20, "Apple": 21, "capital": 22, "China": 23, "is_a": 24, "City": 25}

# "Tim Cook is visiting Beijing now" with branches Tim Cook → CEO Apple, Beijing → capital China
# and Beijing → is_a City (Figure 2 of the K-BERT paper). Flattened order:
#   0 [CLS] 1 Tim 2 Cook 3 CEO 4 Apple 5 is 6 visiting 7 Beijing 8 capital 9 China 10 is_a 11 City 12 now
HAND_VISIBLE = ["1110011100001",   # [CLS]: the sentence
                "1111111100001",   # Tim: the sentence + its branch (CEO Apple)
                "1111111100001",   # Cook
                "0111100000000",   # CEO: its branch + its mention (Tim Cook)
                "0111100000000",   # Apple
                "1110011100001",   # is
                "1110011100001",   # visiting
                "1110011111111",   # Beijing: the sentence + both its branches
                "0000000111000",   # capital: its branch + Beijing (not the sibling branch)
                "0000000111000",   # China
                "0000000100110",   # is_a
                "0000000100110",   # City
                "1110011100001"]   # now
HAND_SOFT = [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 6, 7, 6]


def _hand_visible() -> torch.Tensor:
    return torch.tensor([[c == "1" for c in row] for row in HAND_VISIBLE])


def test_visible_matrix_and_soft_positions_of_the_paper_example():
    trunk = [[1], [10], [11], [12], [13], [14], [15]]
    branches = {(1, 3): [[20, 21]], (5, 6): [[22, 23], [24, 25]]}
    tree = flatten_tree(trunk, branches)
    assert tree.input_ids == [1, 10, 11, 20, 21, 12, 13, 14, 22, 23, 24, 25, 15]
    assert tree.position_ids == HAND_SOFT
    assert torch.equal(tree.visible, _hand_visible())
    assert tree.is_branch == [False, False, False, True, True, False, False, False, True, True, True, True, False]
    short = flatten_tree(trunk, branches, max_length=6)
    assert short.input_ids == tree.input_ids[:6] and torch.equal(short.visible, _hand_visible()[:6, :6])


def _toy_kb() -> GraphKB:
    kb = GraphKB("toy")
    kb.add_label("tim_cook", "en", "Tim Cook", preferred=True)
    kb.add_label("beijing", "en", "Beijing", preferred=True)
    for entity, name in (("apple", "Apple"), ("china", "China"), ("city", "City")):
        kb.add_label(entity, "en", name, preferred=True)
    kb.add_triple("tim_cook", "ceo_of", "apple")
    kb.add_triple("beijing", "capital_of", "china")
    kb.add_triple("beijing", "instance_of", "city")
    kb.add_relation_label("ceo_of", "en", "CEO", preferred=True)
    kb.add_relation_label("capital_of", "en", "capital", preferred=True)
    kb.add_relation_label("instance_of", "en", "is_a", preferred=True)
    return kb


def _tokenize(text: str) -> list[int]:
    return [VOCAB[w] for w in text.split()]


def test_injector_builds_the_tree_from_a_knowledge_base():
    injector = KBertInjector(_toy_kb(), _tokenize, lang="en", cls_id=1)
    batch = injector([["Tim", "Cook", "is", "visiting", "Beijing", "now"], ["Beijing", "now"]])
    assert batch["input_ids"][0].tolist() == [1, 10, 11, 20, 21, 12, 13, 14, 22, 23, 24, 25, 15]
    assert batch["position_ids"][0].tolist() == HAND_SOFT
    assert torch.equal(batch["visible"][0], _hand_visible())
    # the second sentence: [CLS] Beijing capital China is_a City now, then padding
    assert batch["input_ids"][1].tolist() == [1, 14, 22, 23, 24, 25, 15] + [0] * 6
    assert batch["position_ids"][1, :7].tolist() == [0, 1, 2, 3, 2, 3, 2]
    assert batch["attention_mask"][1].tolist() == [1] * 7 + [0] * 6
    assert not batch["visible"][1, 7:].any() and not batch["visible"][1, :, 7:].any()
    two = KBertInjector(_toy_kb(), _tokenize, lang="en", max_branches=1)
    assert two([["Beijing"]])["input_ids"][0].tolist() == [14, 22, 23]


def test_no_knowledge_ablation_equals_the_plain_encoder():
    config = ModelConfig(text=TransformerConfig(vocab_size=30, hidden_size=16, num_layers=2, num_heads=2,
                                         intermediate_size=32, max_positions=32, dropout=0.0, attention_dropout=0.0))
    model = BabelModel(config).eval()
    words = [["Tim", "Cook", "is", "visiting", "Beijing", "now"]]
    plain = KBertInjector(_toy_kb(), _tokenize, lang="en", cls_id=1, knowledge=False)(words)
    assert plain["position_ids"][0].tolist() == list(range(7)) and bool(plain["visible"].all())
    reference = model(plain["input_ids"]).last_hidden
    ablated = model(plain["input_ids"], visible=plain["visible"], position_ids=plain["position_ids"]).last_hidden
    assert torch.allclose(ablated, reference, atol=1e-6)
    kbert = KBertInjector(_toy_kb(), _tokenize, lang="en", cls_id=1)(words)
    out = model(kbert["input_ids"], visible=kbert["visible"], position_ids=kbert["position_ids"]).last_hidden
    trunk = ~kbert["is_branch"][0]
    assert out.shape == (1, 13, 16) and torch.isfinite(out).all()
    assert not torch.allclose(out[0, trunk], reference[0], atol=1e-4)  # the knowledge does reach the sentence
    # Equivalent dense computation: branch tokens are invisible to "is", "visiting", "now" in layer 1,
    # so a one-layer model gives those tokens exactly their no-knowledge outputs.
    one = BabelModel(config.override(num_layers=1)).eval()
    ref1 = one(plain["input_ids"]).last_hidden[0]
    out1 = one(kbert["input_ids"], visible=kbert["visible"], position_ids=kbert["position_ids"]).last_hidden[0]
    for plain_index, tree_index in ((3, 5), (4, 6), (6, 12), (0, 0)):
        assert torch.allclose(out1[tree_index], ref1[plain_index], atol=1e-5)


def test_kbert_mlm_masks_the_trunk_only_and_reads_the_tree():
    from babelzoo.datasets.specials import SpecialIds
    from babelzoo.knowledge.kbert_mlm import KBertMLM
    from babelzoo.objectives import ExampleError, build_objective
    from babelzoo.objectives.mlm import token_prediction_loss

    specials = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=30)
    injector = KBertInjector(_toy_kb(), _tokenize, lang="en", cls_id=1, sep_id=2)
    trees = [injector.tree(["Tim", "Cook", "is", "visiting", "Beijing", "now"]), injector.tree(["Beijing", "now"])]
    objective = build_objective("kbert_mlm", specials, masking={"probability": 0.5})
    assert isinstance(objective, KBertMLM)
    torch.manual_seed(0)
    batches = [objective.prepare(trees) for _ in range(200)]
    chosen = torch.stack([b["labels"].ne(-100) for b in batches])
    branch = batches[0]["is_branch"]
    assert not (chosen & branch).any()  # never a knowledge token
    original = collate_trees(trees)["input_ids"]
    trunk = ~branch & batches[0]["attention_mask"].bool() & ~torch.isin(original, torch.tensor([0, 1, 2]))
    rate = chosen.float().mean(0)[trunk]
    assert rate.min() > 0.35 and rate.max() < 0.65  # every sentence token is masked about half the time
    config = ModelConfig(text=TransformerConfig(vocab_size=30, hidden_size=16, num_layers=2, num_heads=2,
                                         intermediate_size=32, max_positions=32, dropout=0.0, attention_dropout=0.0))
    model = BabelModel(config).eval()
    batch = batches[0]
    loss = objective(model, batch)
    hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"], visible=batch["visible"],
                   position_ids=batch["position_ids"]).last_hidden
    expected, _ = token_prediction_loss(model, hidden, batch["labels"])
    torch.testing.assert_close(loss.value, expected)
    assert float(loss.metrics["knowledge_tokens_per_row"]) == float(branch.sum()) / 2
    with pytest.raises(ExampleError, match="expected a SentenceTree"):
        objective.prepare([[5, 6, 7]])


def test_trees_over_a_text_graphs_own_texts_hang_training_facts_after_named_mentions(tmp_path):
    from babelzoo.knowledge import load_kb
    from babelzoo.knowledge.kb_sources import words

    folder = tmp_path / "kg"
    folder.mkdir()
    files = {"entity2text.txt": "01\tdog, a domestic canid; not a cat.\n02\tcanid, a mammal\n03\tcat, a feline\n",
             "relation2text.txt": "_hypernym\thypernym\n", "train.tsv": "01\t_hypernym\t02\n03\t_hypernym\t04\n",
             "dev.tsv": "02\t_hypernym\t03\n", "entities.txt": "01\n02\n03\n04\n"}
    (folder / "entity2text.txt").write_text(files["entity2text.txt"] + "04\tfelid, a mammal\n", encoding="utf-8")
    for name in ("relation2text.txt", "train.tsv", "dev.tsv", "entities.txt"):
        (folder / name).write_text(files[name], encoding="utf-8")
    kb = load_kb(folder)
    kb.graph.remove_edges_from([("02", "03")])  # the training graph only, as kb_trees reads it
    vocab: dict[str, int] = {}

    def tokenize(text: str) -> list[int]:
        return [vocab.setdefault(w, len(vocab) + 10) for w in text.split()]

    assert words("dog, a domestic canid; not a cat.") == ["dog", ",", "a", "domestic", "canid", ";", "not", "a",
                                                          "cat", "."]
    tree = KBertInjector(kb, tokenize, lang="en").tree(words(kb.entity_text("01")))
    ids = {i: w for w, i in vocab.items()}
    flat = [ids[i] for i in tree.input_ids]
    # "dog", "canid" and "cat" are linked by their names, each followed by its training fact, which
    # names its object by name: "hypernym canid", "hypernym felid" (the dev triple is not there)
    assert flat == ["dog", "hypernym", "canid", ",", "a", "domestic", "canid", ";", "not", "a", "cat", "hypernym",
                    "felid", "."]
    assert [w for w, branch in zip(flat, tree.is_branch) if branch] == ["hypernym", "canid", "hypernym", "felid"]


def test_kbert_mlm_leaves_language_ids_out_when_told():
    from babelzoo.datasets.specials import SpecialIds
    from babelzoo.objectives import ExampleError, build_objective

    specials = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=30)  # no language ids
    tree = KBertInjector(_toy_kb(), _tokenize, lang="en", cls_id=1, sep_id=2).tree(["Beijing", "now"])
    with pytest.raises(ExampleError, match="language 'en' has no language id"):
        build_objective("kbert_mlm", specials).prepare([(tree, "en")])
    batch = build_objective("kbert_mlm", specials, use_language_ids=False).prepare([(tree, "en")])
    assert "language_ids" not in batch and batch["input_ids"].shape == (1, 8)  # [CLS] Beijing + 2 facts, now, [SEP]
