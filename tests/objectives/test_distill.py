"""Knowledge distillation: distill_mlm (DistilBERT/TinyBERT) and distill_sentence (Reimers &
Gurevych 2020). Losses against hand computation on tiny models, the teacher kept out of the
trained parameters, state dicts, optimizer and checkpoints, frozen through training, clear errors,
and both objectives learning to mimic a fixed teacher on real text."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from test_objectives_learn import held_loss

import babelzoo
from babelzoo.datasets.specials import SpecialIds
from babelzoo.objectives import (
    DistillMLM,
    DistillSentence,
    Pair,
    Sentence,
    build_objective,
    soft_cross_entropy,
    uniform_layer_map,
)
from babelzoo.objectives.batching import IGNORE
from babelzoo.zoo.config import ConfigError

SPECIALS = SpecialIds(pad=0, cls=1, sep=2, unk=3, mask=4, vocab_size=64, languages={})
QUIET = dict(vocab_size=64, pad_token_id=0, dropout=0.0, attention_dropout=0.0, max_positions=128)
SENTENCES = [[10, 11, 12, 13, 14, 15, 16, 17], [20, 21, 22], [30, 31, 32, 33, 34], [40, 41, 42, 43, 44, 45, 46, 47, 48]]


def model(**overrides):
    return babelzoo.create_model("xlmr_tiny", **{**QUIET, **overrides}).eval()


@pytest.fixture
def teacher():
    torch.manual_seed(0)
    return model(num_layers=4, hidden_size=64, num_heads=2, intermediate_size=128)


def real_rows(batch):
    """(row, length) of each padded row: the real tokens are the first ``length``."""
    return [(b, int(n)) for b, n in enumerate(batch["attention_mask"].sum(1))]


def test_uniform_layer_map():
    assert uniform_layer_map(6, 12) == [0, 2, 4, 6, 8, 10, 12]
    assert uniform_layer_map(3, 4) == [0, 1, 2, 4]
    assert uniform_layer_map(2, 2) == [0, 1, 2]


def test_soft_cross_entropy_by_hand():
    # T = 2: softmax(z_t/T) = (1/2, 1/4, 1/4), softmax(z_s/T) = (1/4, 1/2, 1/4);
    # KL = 1/2 ln 2 + 1/4 ln(1/2) + 0 = 1/4 ln 2, times T² = 4: ln 2.
    t = 2.0 * torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.25)]])
    s = 2.0 * torch.tensor([[math.log(0.25), math.log(0.5), math.log(0.25)]]) + 3.0  # a shift changes nothing
    assert float(soft_cross_entropy(s, t, 2.0)) == pytest.approx(math.log(2), rel=1e-6)
    # the mean over rows; KL(p ‖ p) = 0
    both = soft_cross_entropy(torch.cat([s, t]), torch.cat([t, t]), 2.0)
    assert float(both) == pytest.approx(math.log(2) / 2, rel=1e-6)


def test_the_kl_term_is_t_squared_times_the_kl_of_softened_logits_at_the_masked_positions(teacher):
    torch.manual_seed(1)
    student = model(hidden_size=32, num_heads=2, intermediate_size=64)
    objective = DistillMLM(SPECIALS, student.config, teacher=teacher, temperature=3.0, alpha_ce=1.0, alpha_mlm=0.0,
                           alpha_cos=0.0)
    torch.manual_seed(2)
    batch = objective.prepare(SENTENCES)
    loss = objective(student, batch)
    positions = batch["labels"].ne(IGNORE)
    assert int(positions.sum()) >= 2
    expected = []
    with torch.no_grad():
        zs = student.mlm_logits(student(batch["input_ids"], batch["attention_mask"]).last_hidden).double()
        zt = teacher.mlm_logits(teacher(batch["input_ids"], batch["attention_mask"]).last_hidden).double()
    for b, i in positions.nonzero().tolist():
        p = [math.exp(v / 3.0) for v in zt[b, i].tolist()]
        q = [math.exp(v / 3.0) for v in zs[b, i].tolist()]
        p, q = [x / sum(p) for x in p], [x / sum(q) for x in q]
        expected.append(9.0 * sum(pi * math.log(pi / qi) for pi, qi in zip(p, q)))
    assert float(loss.value.detach()) == pytest.approx(sum(expected) / len(expected), rel=1e-4)
    assert float(loss.metrics["ce_loss"]) == pytest.approx(float(loss.value.detach()), rel=1e-6)


def test_the_hidden_term_maps_student_layers_onto_teacher_layers_over_real_tokens(teacher):
    torch.manual_seed(1)
    student = model(hidden_size=32, num_heads=2, intermediate_size=64)  # 2 layers, width 32 vs 4 layers, 64
    objective = DistillMLM(SPECIALS, student.config, teacher=teacher, alpha_ce=0.0, alpha_mlm=0.0, alpha_cos=0.0,
                           alpha_hidden=0.5)
    assert objective.layer_map == [0, 2, 4] and len(objective.projections) == 3
    batch = objective.prepare(SENTENCES)
    loss = objective(student, batch)
    with torch.no_grad():
        hs = student(batch["input_ids"], batch["attention_mask"], output_hidden_states=True).hidden_states
        ht = teacher(batch["input_ids"], batch["attention_mask"], output_hidden_states=True).hidden_states
        total = 0.0
        for m, g in [(0, 0), (1, 2), (2, 4)]:
            w = objective.projections[m]
            squares, count = 0.0, 0
            for b, n in real_rows(batch):  # only the first n tokens of row b are real
                diff = w(hs[m][b, :n]) - ht[g][b, :n]
                squares += float(diff.double().pow(2).sum())
                count += n * 64
            total += squares / count
    assert float(loss.value.detach()) == pytest.approx(0.5 * total, rel=1e-5)
    assert float(loss.metrics["hidden_loss"]) == pytest.approx(total, rel=1e-5)


def test_a_given_layer_map_and_equal_widths_use_no_projection(teacher):
    torch.manual_seed(1)
    student = model(hidden_size=64, num_heads=2, intermediate_size=64)
    objective = DistillMLM(SPECIALS, student.config, teacher=teacher, alpha_ce=0.0, alpha_mlm=0.0, alpha_cos=0.0,
                           alpha_hidden=1.0, layer_map=[0, 1, 4])
    assert objective.projections is None and list(objective.parameters()) == []
    batch = objective.prepare(SENTENCES)
    with torch.no_grad():
        hs = student(batch["input_ids"], batch["attention_mask"], output_hidden_states=True).hidden_states
        ht = teacher(batch["input_ids"], batch["attention_mask"], output_hidden_states=True).hidden_states
    expected = 0.0
    for m, g in [(0, 0), (1, 1), (2, 4)]:
        rows = real_rows(batch)
        expected += sum(float((hs[m][b, :n] - ht[g][b, :n]).double().pow(2).sum()) for b, n in rows) / (
            sum(n for _, n in rows) * 64)
    assert float(objective(student, batch).value.detach()) == pytest.approx(expected, rel=1e-5)


def test_the_cosine_term_and_the_students_own_mlm(teacher):
    torch.manual_seed(1)
    student = model(hidden_size=64, num_heads=2, intermediate_size=64)
    objective = DistillMLM(SPECIALS, student.config, teacher=teacher, alpha_ce=0.0, alpha_mlm=2.0, alpha_cos=1.5)
    batch = objective.prepare(SENTENCES)
    loss = objective(student, batch)
    with torch.no_grad():
        s = student(batch["input_ids"], batch["attention_mask"]).last_hidden
        t = teacher(batch["input_ids"], batch["attention_mask"]).last_hidden
    cosines = [float(F.cosine_similarity(s[b, i], t[b, i], dim=0)) for b, n in real_rows(batch) for i in range(n)]
    cos = sum(1 - c for c in cosines) / len(cosines)
    positions = batch["labels"].ne(IGNORE)
    logits = student.mlm_logits(s)[positions]
    targets = batch["labels"][positions]
    mlm = -sum(float(torch.log_softmax(z.double(), -1)[y]) for z, y in zip(logits, targets)) / len(targets)
    assert float(loss.metrics["cos_loss"]) == pytest.approx(cos, rel=1e-5)
    assert float(loss.metrics["mlm_loss"]) == pytest.approx(mlm, rel=1e-5)
    assert float(loss.value.detach()) == pytest.approx(2.0 * mlm + 1.5 * cos, rel=1e-5)


def vector(m, ids):
    """The mean of the last layer over [CLS] ids [SEP], encoded alone (no padding)."""
    with torch.no_grad():
        return m(torch.tensor([[1, *ids, 2]])).last_hidden[0].double().mean(0)


def test_reimers_gurevych_loss_on_a_padded_pair_batch(teacher):
    torch.manual_seed(1)
    student = model(num_layers=2, hidden_size=64, num_heads=2, intermediate_size=64)
    objective = DistillSentence(SPECIALS, student.config, teacher=teacher)
    pairs = [Pair([10, 11, 12, 13, 14, 15, 16], [20, 21]), Pair([30, 31], [40, 41, 42, 43, 44, 45, 46, 47, 48]),
             Pair([50, 51, 52], [53, 54, 55])]
    batch = objective.prepare(pairs)
    assert batch["attention_mask"].sum(1).tolist() == [9, 4, 5, 4, 11, 5]  # padded to 11
    loss = objective(student, batch)
    on_src = on_tgt = 0.0
    for p in pairs:
        target = vector(teacher, p.src)  # M(s_i)
        on_src += float((target - vector(student, p.src)).pow(2).sum())
        on_tgt += float((target - vector(student, p.tgt)).pow(2).sum())
    assert float(loss.value.detach()) == pytest.approx((on_src + on_tgt) / 3, rel=1e-4)
    assert float(loss.metrics["source_loss"]) == pytest.approx(on_src / 3, rel=1e-4)
    # a student that is the teacher scores 0 on the sources
    same = DistillSentence(SPECIALS, teacher.config, teacher=teacher)
    assert float(same(teacher, batch).metrics["source_loss"]) == pytest.approx(0.0, abs=1e-9)


def test_the_teacher_is_not_a_parameter_a_state_or_a_submodule(teacher):
    student = model(hidden_size=32, num_heads=2, intermediate_size=64)
    mlm = DistillMLM(SPECIALS, student.config, teacher=teacher, alpha_hidden=1.0)
    sentence = DistillSentence(SPECIALS, teacher.config, teacher=teacher)
    assert set(mlm.state_dict()) == {f"projections.{m}.{p}" for m in range(3) for p in ("weight", "bias")}
    assert sentence.state_dict() == {} and list(sentence.parameters()) == []
    teacher_ids = {id(p) for p in teacher.parameters()}
    assert not teacher_ids & {id(p) for p in mlm.parameters()}
    assert all(m is not teacher for m in mlm.modules())
    assert all(not p.requires_grad for p in teacher.parameters()) and not teacher.training
    mlm.train()
    assert not teacher.training  # train() does not reach it
    mlm.double()  # .to()/.double() do: the teacher follows the objective (and the student) on its device
    assert all(p.dtype == torch.float64 for p in teacher.parameters())


def test_the_teacher_stays_out_of_the_optimizer_and_checkpoints_and_does_not_change(teacher, tmp_path):
    from babelzoo.train import CheckpointConfig, LoggingConfig, OptimConfig, TrainConfig, Trainer
    from babelzoo.train.checkpoint import read_model, read_part

    torch.manual_seed(1)
    student = model(hidden_size=32, num_heads=2, intermediate_size=64)
    objective = DistillMLM(SPECIALS, student.config, teacher=teacher, alpha_hidden=1.0)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    data = [[10 + (i + k) % 50 for k in range(6 + i % 5)] for i in range(32)]
    config = TrainConfig(output_dir=str(tmp_path), max_steps=3, batch_size=4,
                         optim=OptimConfig(lr=1e-2, optimizer="adamw"), checkpoints=CheckpointConfig(every=3),
                         logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False, every=1))
    trainer = Trainer(student, objective, data, config)
    trainer.fit()
    trained = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert trained == {id(p) for p in [*student.parameters(), *objective.parameters()]}
    assert not trained & {id(p) for p in teacher.parameters()}
    after = teacher.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before) and not teacher.training
    checkpoint = tmp_path / "checkpoints" / "step-00000003"
    assert set(read_part(checkpoint, "objectives")) == set(objective.state_dict())
    assert set(read_model(checkpoint)) <= set(student.state_dict())  # the student's weights only


def test_a_teacher_loads_from_a_checkpoint_directory(teacher, tmp_path):
    teacher.save_pretrained(tmp_path / "teacher")
    objective = DistillSentence(SPECIALS, teacher.config, teacher=str(tmp_path / "teacher"))
    loaded = objective.teacher
    assert loaded is not teacher and all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(),
                                                                           teacher.state_dict().values()))
    with pytest.raises(ConfigError, match="neither a registered model nor a checkpoint directory"):
        DistillSentence(SPECIALS, teacher.config, teacher=str(tmp_path / "nothing"))


def test_mismatched_teachers_are_refused(teacher):
    other = model(vocab_size=80)
    with pytest.raises(ConfigError, match=r"vocab_size=64, the model being trained vocab_size=80.*share the "
                                          r"tokenizer"):
        DistillMLM(SPECIALS, other.config, teacher=teacher)
    with pytest.raises(ConfigError, match="vocab_size"):
        DistillSentence(SPECIALS, other.config, teacher=teacher)
    narrow = model(hidden_size=32, num_heads=2)
    with pytest.raises(ConfigError, match="hidden_size=32 and the teacher 64"):
        DistillSentence(SPECIALS, narrow.config, teacher=teacher)
    with pytest.raises(ConfigError, match="layer_map"):
        DistillMLM(SPECIALS, narrow.config, teacher=teacher, layer_map=[0, 2])
    headless = model(num_layers=4, hidden_size=64, num_heads=2, mlm_head=False)
    with pytest.raises(ConfigError, match="teacher 'xlmr_tiny' has no MLM head"):
        DistillMLM(SPECIALS, narrow.config, teacher=headless)
    DistillMLM(SPECIALS, narrow.config, teacher=headless, alpha_ce=0.0)  # hidden/cos only: fine
    with pytest.raises(ConfigError, match="max_length=200 is longer than the teacher"):
        DistillSentence(SPECIALS, teacher.config, teacher=teacher, max_length=200)
    with pytest.raises(ConfigError, match="at least one positive"):
        DistillMLM(SPECIALS, narrow.config, teacher=teacher, alpha_ce=0, alpha_mlm=0, alpha_cos=0)


# --- learning: a student mimics a fixed teacher on real text -------------------------------------

# (optimiser steps, largest allowed end/start ratio of the held loss); each trains until its held
# loss is clearly past its bound (the ratio reached: distill_mlm 0.724, distill_sentence 0.040)
@pytest.mark.slow
@pytest.mark.parametrize("name, steps, ratio", [("distill_mlm", 100, 0.8), ("distill_sentence", 50, 0.1)])
def test_a_student_learns_its_teacher_on_real_text(name, steps, ratio, parallel, specials, tiny, one_thread):
    torch.manual_seed(0)
    teacher = tiny("xlm_tiny", num_layers=4, hidden_size=64, intermediate_size=128).eval()
    student = tiny("xlm_tiny", num_layers=2, hidden_size=32 if name == "distill_mlm" else 64, intermediate_size=64)
    options = {"alpha_hidden": 1.0} if name == "distill_mlm" else {}
    objective = build_objective(name, specials, student.config, teacher=teacher, **options)
    examples = ([Sentence(p.src, p.src_lang) for p in parallel] + [Sentence(p.tgt, p.tgt_lang) for p in parallel]
                if name == "distill_mlm" else parallel)
    held_batch = objective.prepare([examples[i] for i in torch.randperm(len(examples))[:64].tolist()])
    start = held_loss(student, objective, held_batch)
    optimizer = torch.optim.AdamW([*student.parameters(), *objective.parameters()], lr=2e-3)
    for _ in range(steps):
        picks = torch.randint(len(examples), (16,)).tolist()
        loss = objective(student, objective.prepare([examples[i] for i in picks]))
        optimizer.zero_grad()
        loss.value.backward()
        optimizer.step()
    end = held_loss(student, objective, held_batch)
    print(f"{name}: held loss {start:.4f} -> {end:.4f}")
    assert end < ratio * start, f"{name}: held loss {start:.3f} -> {end:.3f} (needed < {ratio * start:.3f})"
