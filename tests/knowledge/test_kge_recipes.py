"""KG embedding recipes: YAML files read by the one loader into typed KGERecipes."""

import pytest

from babelzoo.errors import ConfigError
from babelzoo.knowledge.kge_recipes import KGERecipe, kge_recipe, kge_recipes, train_by_recipe
from babelzoo.knowledge.link_prediction import KGETrainConfig


def test_shipped_recipes_hold_the_codex_s_settings():
    assert kge_recipes() == ["complex", "distmult", "rotate", "transe"]
    assert kge_recipe("transe") == KGERecipe("transe", 256, {"reciprocal": True, "p": 2, "gamma": 0.0},
                                             KGETrainConfig(loss="1vsall", lr=0.003, batch_size=512,
                                                            label_smoothing=0.1, epochs=200))
    rotate = kge_recipe("rotate")
    assert (rotate.dim, rotate.options, rotate.train.negatives, rotate.train.epochs) == (128, {"gamma": 6.0}, 64, 400)


@pytest.mark.parametrize("text, message", [
    ("model: transe\ndim: 8\ntrain: {lr: 0.1, epoch: 3}\n", r"r.yaml:3 KGERecipe.train.epoch: unknown KGETrainConfig key "
                                                          r"'epoch'; did you mean 'epochs'\?"),
    ("model: transe\ndim: 8\ntrain:\n  lr: fast\n", r"r.yaml:4 KGERecipe.train.lr='fast' must be a number, got str"),
    ("model: transe\ndims: 8\n", r"r.yaml:2 KGERecipe.dims: unknown KGERecipe key 'dims'; did you mean 'dim'\?"),
    ("model: transe\ndim: 8\noptions: {gamma: big}\n", r"r.yaml:3 KGERecipe.options.gamma='big' must be a number"),
    ("model: transe\ndim: 8\noptions: {gama: 1.0}\n", r"r.yaml:3 KGERecipe.options.gama: unknown transe option key "
                                                      r"'gama'; did you mean 'gamma'\?"),
    ("model: transx\ndim: 8\n", r"r.yaml:1: KGERecipe.model='transx' must be one of"),
])
def test_a_recipe_file_mistake_names_the_file_line_and_key(tmp_path, text, message):
    (tmp_path / "r.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{tmp_path}/{message}"):
        kge_recipe(str(tmp_path / "r.yaml"))


def test_a_recipe_file_path_goes_through_the_expander(monkeypatch, tmp_path):
    (tmp_path / "mine.yaml").write_text("model: distmult\ndim: 4\ntrain: {epochs: 1}\n", encoding="utf-8")
    monkeypatch.delenv("BABELZOO_TEST_KGE", raising=False)
    with pytest.raises(ConfigError, match=r"^KG embedding recipe: '\$\{BABELZOO_TEST_KGE\}/mine.yaml' names "
                                          r"'BABELZOO_TEST_KGE', which is not set$"):
        kge_recipe("${BABELZOO_TEST_KGE}/mine.yaml")
    monkeypatch.setenv("BABELZOO_TEST_KGE", str(tmp_path))
    assert kge_recipe("${BABELZOO_TEST_KGE}/mine.yaml") == KGERecipe("distmult", 4, train=KGETrainConfig(epochs=1))


def test_train_by_recipe_trains_the_recipe_with_the_run_settings(tmp_path):
    import torch

    from babelzoo.knowledge.kge import LinkPredictionData

    (tmp_path / "tiny.yaml").write_text("model: distmult\ndim: 4\ntrain: {epochs: 3, batch_size: 4, loss: 1vsall}\n",
                                        encoding="utf-8")
    triples = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0]])
    data = LinkPredictionData(["a", "b", "c", "d"], ["r"], triples, triples[:2], triples[2:])
    model, summary, config = train_by_recipe(str(tmp_path / "tiny.yaml"), data, epochs=2, eval_every=1)
    assert (model.dim, config.epochs, config.batch_size, config.patience, config.clock) == (4, 2, 4, 4, "cpu")
    assert summary["epochs"] == 2
