"""Every objective learns: up to 200 optimiser steps on a tiny XLM model (2 layers, width 64;
XLNet's for the permutation LM, which needs two-stream attention; the RNN-era sentence encoders
on the tiny BiGRU or InferSent BiLSTM at width 64) over real parallel text (Django's gettext
catalogs, English → German/French/Spanish) bring its loss on a fixed held batch clearly below
the starting value.

The held batch is prepared once (fixed masks, pairs and negatives) and scored with dropout off
before and after training, so the two numbers are comparable.
"""

from __future__ import annotations

import pytest
import torch
from test_objective_gradients import OWN_MODEL, file_names

from babelzoo.objectives import OBJECTIVES, Sentence, build_objective

# (batch size, optimiser steps, largest allowed end/start loss ratio). Token-level objectives
# start near log|V| ≈ 6.9; the sentence-pair classifiers start at log 2 ≈ 0.69. Each objective
# trains until its held loss is clearly past its bound (steps in multiples of 25; the trailing
# comment is the end/start ratio it reaches); MLM and NSP near theirs slowly and train all 200.
# NSP's held loss varies with the initial weights (0.693 → 0.57–0.61 after 200 steps over init
# seeds 0–4), so its bound asks that it learns at all, not how fast.
SETTINGS = {
    "mlm": (16, 200, 0.85),  # 0.817
    "mmlm": (16, 200, 0.85),  # 0.817
    "tlm": (16, 100, 0.85),  # 0.812
    "clmlm": (8, 75, 0.88),  # 0.814
    "clm": (16, 125, 0.75),  # 0.698
    "clwr": (16, 100, 0.75),  # 0.705
    "rtd": (16, 50, 0.75),  # 0.587
    "nsp": (16, 200, 0.9),  # 0.879
    "sop": (16, 50, 0.5),  # 0.012
    "clpc": (32, 150, 0.9),  # 0.723
    "xlco": (16, 50, 0.5),  # 0.188
    "translation_ranking": (16, 125, 0.92),  # 0.861
    "sbo": (16, 100, 0.85),  # 0.831
    "unilm": (16, 100, 0.85),  # 0.792
    "glm": (16, 50, 0.85),  # 0.714
    "plm": (16, 100, 0.88),  # 0.841
    "skip_thoughts": (8, 100, 0.85),  # 0.779
    "quick_thoughts": (16, 125, 0.5),  # 0.390
    "infersent": (16, 100, 0.6),  # 0.469
}
# The model each objective trains: xlm_tiny unless named here. XLNet's permutation LM needs its
# two-stream attention; the sentence encoders of the RNN era train the recurrent encoders they
# were made for.
MODELS = {"plm": "xlnet_tiny", "skip_thoughts": "bigru_tiny", "quick_thoughts": "bigru_tiny",
          "infersent": "infersent_tiny"}
# The objectives of the tiny encoder (all but test_objective_gradients.OWN_MODEL's) that learn in
# a test of their own, under tests/.
LEARNS_ELSEWHERE = {"segment_mlm": "objectives/test_segments.py", "segment_clm": "objectives/test_segments.py",
                    "entity_mlm": "knowledge/test_entity_mlm.py"}


def test_every_objective_of_the_tiny_encoder_learns_somewhere():
    missing = set(OBJECTIVES) - set(OWN_MODEL) - set(SETTINGS) - set(LEARNS_ELSEWHERE)
    assert not missing, (f"registered objectives with no learning test: {sorted(missing)}; add their settings "
                         "to SETTINGS, or the test file where each learns to LEARNS_ELSEWHERE")
    for name, path in LEARNS_ELSEWHERE.items():
        assert file_names(path, name), f"{name}: LEARNS_ELSEWHERE names tests/{path}, which does not name it"


@pytest.fixture(scope="module")
def data(parallel, catalogs, spm):
    sentences = [Sentence(p.src, p.src_lang) for p in parallel] + [Sentence(p.tgt, p.tgt_lang) for p in parallel]
    # Parallel documents for CLMLM: runs of three consecutive catalog entries with their translations.
    parallel_documents = [parallel[i: i + 3] for i in range(0, len(parallel) - 3, 3)]
    # Documents for NSP/SOP: one string and its translations, always in the order en, de, fr, es
    # (multi-way aligned text); the order of two consecutive segments is visible through the
    # languages they are in.
    common = sorted(set.intersection(*(set(c) for c in catalogs.values())))
    documents = [[Sentence(spm.encode(text), "en")] +
                 [Sentence(spm.encode(catalogs[lang][text]), lang) for lang in ("de", "fr", "es")]
                 for text in common]
    documents = [d for d in documents if sum(len(s.ids) for s in d) <= 120]
    # by example type (an objective's ``consumes``)
    return {"sentence": sentences, "pair": parallel, "document": documents, "parallel_document": parallel_documents}


def held_loss(model, objective, batch) -> float:
    model.eval()
    objective.eval()
    with torch.no_grad():
        torch.manual_seed(1234)  # RTD samples replacements: the same draws before and after
        value = float(objective(model, batch).value)
    model.train()
    objective.train()
    return value


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_objective_learns_on_real_parallel_text(name, data, specials, tiny, one_thread, train_on):
    batch_size, steps, ratio = SETTINGS[name]
    examples = data[OBJECTIVES.get(name).consumes]
    torch.manual_seed(0)
    model = tiny(MODELS.get(name, "xlm_tiny"), hidden_size=64, intermediate_size=128)
    objective = build_objective(name, specials, model.config)
    held = [examples[i] for i in torch.randperm(len(examples))[:64].tolist()]
    held_batch = objective.prepare(held)
    start = held_loss(model, objective, held_batch)
    train_on(model, objective, examples, steps=steps, batch_size=batch_size, lr=1e-3)
    end = held_loss(model, objective, held_batch)
    print(f"{name}: held loss {start:.3f} -> {end:.3f}")
    assert end < ratio * start, f"{name}: held loss {start:.3f} -> {end:.3f} (needed < {ratio * start:.3f})"
