"""ERNIE fusion attached to a BabelModel: shapes, gradients, the fusion formula on one token,
exact equivalence without entities, and the dEA objective."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from babelzoo.datasets.specials import SpecialIds
from babelzoo.errors import InputError
from babelzoo.knowledge import GraphKB, KBError, attach_knowledge
from babelzoo.knowledge.dea import DEAObjective, corrupt_entities
from babelzoo.knowledge.attach import ErnieFeedForward
from babelzoo.knowledge.linker import Mention
from babelzoo.zoo.model_config import ModelConfig
from babelzoo.zoo.families.transformer.config import TransformerConfig
from babelzoo.zoo.model import BabelModel


def _model(**overrides) -> BabelModel:
    text = TransformerConfig(vocab_size=50, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64,
                      max_positions=32, dropout=0.0, attention_dropout=0.0, **overrides)
    return BabelModel(ModelConfig(text=text)).eval()


def _kb() -> GraphKB:
    kb = GraphKB("toy")
    for h, r, t in (("jp", "currency", "jpy"), ("de", "currency", "eur"), ("fr", "currency", "eur"),
                    ("de", "borders", "fr")):
        kb.add_triple(h, r, t)
    return kb  # entities: jp, jpy, de, eur, fr → indices 1..5


def test_attach_keeps_the_model_exact_without_entities():
    model = _model()
    ids = torch.randint(1, 50, (2, 7))
    before = model(ids).last_hidden
    plain = model
    model = attach_knowledge(model, _kb(), entity_embeddings=torch.randn(5, 12), fusion_layers=(1, 2))
    fusion = model.knowledge
    assert plain.config.knowledge is None and plain.knowledge is None  # the caller's model is not rewritten
    assert model.config.knowledge.entity_vocab_size == 6 and model.config.knowledge.entity_dim == 12
    assert model.config.knowledge.fusion_layers == (1, 2)
    assert isinstance(model.encoder.layers[1].ffn, ErnieFeedForward)
    assert not isinstance(model.encoder.layers[0].ffn, ErnieFeedForward)
    keys = set(model.state_dict())
    assert {"encoder.layers.1.ffn.up.weight", "encoder.layers.1.ffn.entity_up.weight",
            "knowledge.entity_embeddings.weight"} <= keys
    assert torch.equal(model(ids).last_hidden, before)
    with fusion.bind(torch.zeros(2, 7, dtype=torch.long)):
        assert torch.allclose(model(ids).last_hidden, before, atol=1e-6)  # no aligned entity: the original block
    assert fusion.entity_index["jp"] == 1 and fusion.stream.states is None


def test_fusion_shapes_and_gradients():
    model = attach_knowledge(_model(), _kb(), entity_embeddings=torch.randn(5, 12), fusion_layers=(1, 2))
    fusion = model.knowledge
    model.train()
    ids = torch.randint(1, 50, (2, 7))
    entities = torch.tensor([[0, 1, 0, 0, 3, 0, 0], [2, 0, 0, 0, 0, 5, 4]])
    with fusion.bind(entities) as stream:
        out = model(ids)
        assert out.last_hidden.shape == (2, 7, 32)
        assert stream.states.shape == (2, 7, 12)
        untouched = fusion.entity_embeddings(entities)
        assert torch.equal(stream.states[0, 0], untouched[0, 0])  # tokens without entity keep their slot
        assert not torch.allclose(stream.states[0, 1], untouched[0, 1])
    out.last_hidden.pow(2).mean().backward()
    ffn = model.encoder.layers[2].ffn
    for p in (ffn.entity_up.weight, ffn.entity_attention.qkv.weight, ffn.up.weight,
              model.encoder.layers[0].attention.qkv.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    assert fusion.entity_embeddings.weight.grad is None  # KG embeddings frozen, as in ERNIE
    assert model.encoder.layers[2].ffn.entity_down.weight.grad is None  # last layer's entity output unused
    assert model.encoder.layers[1].ffn.entity_down.weight.grad.abs().sum() > 0  # feeds layer 2


def test_information_fusion_formula_on_one_entity():
    torch.manual_seed(3)
    model = attach_knowledge(_model(), _kb(), entity_embeddings=torch.randn(5, 8), fusion_layers=(0,))
    fusion = model.knowledge
    ffn = model.encoder.layers[0].ffn
    x = torch.randn(1, 4, 32)
    entities = torch.tensor([[0, 3, 0, 0]])
    with fusion.bind(entities):
        out = ffn(x)
    e = fusion.entity_embeddings.weight[3]
    # one entity in the sentence: its attention weight on itself is 1, so MH-ATT(e) = W_o v(e) + b_o
    v = F.linear(e, ffn.entity_attention.qkv.weight[16:], ffn.entity_attention.qkv.bias[16:])
    e_tilde = ffn.entity_attention_norm(e + ffn.entity_attention.out(v))
    h = F.gelu(ffn.up(x[0, 1]) + ffn.entity_up(e_tilde))  # h = σ(W̃_t w̃ + W̃_e ẽ + b̃)
    assert torch.allclose(out[0, 1], ffn.down(h), atol=1e-5)
    assert torch.allclose(out[0, 0], ffn.down(F.gelu(ffn.up(x[0, 0]))), atol=1e-6)  # h = σ(W̃_t w̃ + b̃)


def test_entity_alignment_and_errors():
    model = attach_knowledge(_model(), _kb())
    fusion = model.knowledge
    assert model.config.knowledge.fusion_layers == (1, 2)  # default: the upper half, ERNIE's K-encoder
    mentions = [[Mention(1, 3, "Japan yen", "jp", ("jp",))], [Mention(0, 1, "Deutschland", "de", ("de",))]]
    assert fusion.entity_ids(mentions, 5).tolist() == [[0, 1, 0, 0, 0], [3, 0, 0, 0, 0]]
    assert fusion.entity_ids(mentions, 5, align="all").tolist() == [[0, 1, 1, 0, 0], [3, 0, 0, 0, 0]]
    with pytest.raises(InputError, match="'xx' is not in the attached knowledge base"):
        fusion.entity_ids([[Mention(0, 1, "x", "xx", ("xx",))]], 3)
    with pytest.raises(ValueError, match="entity index 9 out of range"):
        with fusion.bind(torch.tensor([[9]])):
            pass
    with pytest.raises(KBError, match=r"entity_embeddings has shape \(4, 12\), expected \[5, dim\]"):
        attach_knowledge(_model(), _kb(), entity_embeddings=torch.randn(4, 12))
    with pytest.raises(KBError, match="shares one block"):
        attach_knowledge(_model(share_layers=True), _kb())
    with pytest.raises(KBError, match=r"fusion_layers \[5\] out of range"):
        attach_knowledge(_model(), _kb(), fusion_layers=(5,))


def test_entity_embeddings_from_a_kge_model():
    from babelzoo.knowledge import LinkPredictionData, create_kge

    kb = _kb()
    data = LinkPredictionData.from_kb(kb)
    transe = create_kge("transe", data.num_entities, data.num_relations, 10)
    fusion = attach_knowledge(_model(), kb, entity_embeddings=transe, freeze_entities=False).knowledge
    assert torch.equal(fusion.entity_embeddings.weight[1:], transe.entity.weight.detach())
    assert fusion.entity_embeddings.weight.requires_grad


def test_corruption_rates():
    entities = torch.ones(200, 100, dtype=torch.long) * 7
    inputs, targets = corrupt_entities(entities, vocab_size=1000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(targets, entities)
    dropped = (inputs == 0).float().mean()
    replaced = ((inputs != 0) & (inputs != 7)).float().mean()
    assert abs(float(dropped) - 0.15) < 0.01 and abs(float(replaced) - 0.05 * 998 / 999) < 0.006
    assert corrupt_entities(torch.zeros(3, 4, dtype=torch.long), 10)[0].abs().sum() == 0  # no alignment, no noise


def test_dea_objective_learns():
    torch.manual_seed(0)
    model = attach_knowledge(_model(), _kb(), entity_embeddings=torch.randn(5, 12), fusion_layers=(2,))
    specials = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=50)
    objective = DEAObjective(specials, model.config, drop=0.0, replace=0.0)
    assert objective.entity_vocab_size == 6
    # token i+10 always carries entity i: the mapping is learnable from the token alone
    examples = [{"input_ids": [10 + e if e else 3 for e in row], "entities": row}
                for row in ([1, 0, 2, 0], [3, 4, 0, 5], [0, 5, 1, 0], [2, 0, 0, 3])]
    batch = objective.prepare(examples)
    assert batch["entity_targets"].tolist() == [ex["entities"] for ex in examples]
    params = [p for p in list(model.parameters()) + list(objective.parameters()) if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=3e-3)
    model.train()
    first = objective(model, batch)
    assert first.metrics["dea_predictions"] == 9.0 and torch.isfinite(first.value)
    for _ in range(60):
        loss = objective(model, batch)
        optimizer.zero_grad()
        loss.value.backward()
        optimizer.step()
    assert loss.metrics["dea_accuracy"] == 1.0 and float(loss.value.detach()) < 0.2 * float(first.value.detach())


def test_attaching_again_binds_without_touching_weights():
    kb = _kb()
    model = attach_knowledge(_model(), kb, entity_embeddings=torch.randn(5, 12), fusion_layers=(2,))
    fusion = model.knowledge
    table = fusion.entity_embeddings.weight.clone()
    again = attach_knowledge(model, kb, memory="memory-object")
    assert again is model and again.knowledge is fusion and torch.equal(fusion.entity_embeddings.weight, table)
    assert fusion.memory == "memory-object"
    bigger = _kb()
    bigger.add_triple("it", "currency", "eur")
    with pytest.raises(KBError, match="already has knowledge fusion"):
        attach_knowledge(model, bigger)


def test_knowledge_survives_save_and_load(tmp_path):
    kb = _kb()
    model = attach_knowledge(_model(), kb, entity_embeddings=torch.randn(5, 12), fusion_layers=(1, 2))
    ids = torch.randint(1, 50, (1, 6))
    entities = torch.tensor([[0, 1, 0, 4, 0, 0]])
    expected = model(ids, entities=entities).last_hidden
    model.save_pretrained(tmp_path)
    loaded = BabelModel.from_pretrained(tmp_path).eval()
    assert loaded.config.knowledge == model.config.knowledge
    assert attach_knowledge(loaded, kb) is loaded  # binds the KB; the weights came from the checkpoint
    assert loaded.knowledge.entity_index["jp"] == 1
    assert torch.allclose(loaded(ids, entities=entities).last_hidden, expected, atol=1e-6)



def test_a_zoo_entry_started_from_an_ernie_checkpoint_keeps_its_fusion_weights(tmp_path):
    """A run whose ``init`` names a folder an ERNIE run saved (a warm-up, say) starts from every
    weight there, the fusion layers' and the entity table's too, and attaching the same knowledge
    again changes nothing."""
    import babelzoo

    kb, sizes = _kb(), dict(vocab_size=50, hidden_size=32, num_layers=3, num_heads=4, intermediate_size=64,
                            max_positions=32, dropout=0.0)
    torch.manual_seed(0)
    model = attach_knowledge(babelzoo.create_model("xlmr_tiny", **sizes), kb, entity_embeddings=torch.randn(5, 12),
                             fusion_layers=(1, 2)).eval()
    with torch.no_grad():
        model.encoder.layers[2].ffn.entity_up.weight.mul_(3.0)  # as training left them
    ids, entities = torch.randint(5, 50, (1, 6)), torch.tensor([[0, 1, 0, 4, 0, 0]])
    expected = model(ids, entities=entities).last_hidden
    model.save_pretrained(tmp_path)
    loaded = babelzoo.create_model("xlmr_tiny", pretrained=str(tmp_path), **sizes).eval()
    assert loaded.config.knowledge == model.config.knowledge
    assert attach_knowledge(loaded, kb) is loaded
    assert torch.allclose(loaded(ids, entities=entities).last_hidden, expected, atol=1e-6)
    from babelzoo.errors import CheckpointError

    with pytest.raises(CheckpointError, match=r"knowledge: xlmr_tiny has None, the checkpoint KnowledgeConfig\("):
        babelzoo.create_model("xlmr_tiny", pretrained=str(tmp_path), knowledge=None, **sizes)  # asked for without

def test_model_builds_fusion_from_its_config():
    from babelzoo.zoo.model_config import KnowledgeConfig

    text = TransformerConfig(vocab_size=50, hidden_size=32, num_layers=4, num_heads=4, intermediate_size=64,
                      max_positions=32, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    plain = BabelModel(ModelConfig(text=text)).eval()
    torch.manual_seed(0)
    model = BabelModel(ModelConfig(text=text, knowledge=KnowledgeConfig(entity_vocab_size=6, entity_dim=8))).eval()
    # empty fusion_layers: the upper half, recorded in the config
    assert model.config.knowledge.fusion_layers == (2, 3)
    assert [isinstance(block.ffn, ErnieFeedForward) for block in model.encoder.layers] == [False, False, True, True]
    assert model.knowledge.entity_embeddings.weight.shape == (6, 8)
    # the base weights do not depend on the knowledge part
    base = {k: v for k, v in model.state_dict().items() if "entity" not in k and not k.startswith("knowledge.")}
    assert all(torch.equal(v, plain.state_dict()[k]) for k, v in base.items()) and len(base) == len(plain.state_dict())
    ids = torch.randint(1, 50, (2, 5))
    entities = torch.tensor([[0, 2, 0, 0, 5], [1, 0, 0, 0, 0]])
    fused = model(ids, entities=entities).last_hidden
    with model.knowledge.bind(entities):
        assert torch.equal(model(ids).last_hidden, fused)  # forward(entities=...) is bind() + forward
    assert model.knowledge.stream.states is None
    assert not torch.allclose(fused, model(ids).last_hidden, atol=1e-4)  # the entities change the output
    assert torch.allclose(model(ids).last_hidden, plain(ids).last_hidden, atol=1e-6)  # no entities: the base model
    with pytest.raises(ValueError, match="entity index 6 out of range"):
        model(ids, entities=torch.full((2, 5), 6))
    with pytest.raises(ValueError, match=r"aligned to \(2, 3\) tokens, but the batch has \(2, 5\)"):
        model(ids, entities=entities[:, :3])


def test_model_without_fusion_layers_rejects_entities():
    from babelzoo.zoo.model_config import KnowledgeConfig

    text = TransformerConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)
    ids = torch.randint(1, 50, (1, 4))
    with pytest.raises(ValueError, match="has no knowledge part"):
        BabelModel(ModelConfig(text=text))(ids, entities=torch.zeros(1, 4, dtype=torch.long))
    model = BabelModel(ModelConfig(text=text, knowledge=KnowledgeConfig(fusion="none")))
    assert model.knowledge is None
    with pytest.raises(ValueError, match="has no fusion layers \\(knowledge fusion='none'\\)"):
        model(ids, entities=torch.zeros(1, 4, dtype=torch.long))


def test_nested_bind_restores_the_outer_entities():
    model = attach_knowledge(_model(), _kb(), entity_embeddings=torch.randn(5, 12), fusion_layers=(2,))
    fusion = model.knowledge
    ids = torch.randint(1, 50, (1, 4))
    outer, inner = torch.tensor([[1, 0, 0, 2]]), torch.tensor([[0, 3, 0, 0]])
    with fusion.bind(outer):
        expected = model(ids).last_hidden
        assert torch.equal(model(ids, entities=inner).last_hidden, model(ids, entities=inner).last_hidden)
        assert torch.equal(model(ids).last_hidden, expected)
        assert torch.equal(fusion.stream.mask, outer > 0)
    assert fusion.stream.states is None and fusion.stream.mask is None
