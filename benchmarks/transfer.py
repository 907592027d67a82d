"""Zero-shot cross-lingual transfer on SIB-200, side by side with transformers, in one run.

    python -m benchmarks run transfer --data-dir ../shared/data

1. **babelzoo**: the shipped recipe (``--recipe``, default ``sib200_e5_small``) through
   :func:`babelzoo.finetune.run_finetune`, the path ``babelzoo finetune`` runs.
2. **transformers** (``--peer-set`` overrides the recipe for this comparison; by default the
   BERT head, ``pooling=pooler``): the same initial weights (e5 + fresh pooler + head, exported
   through babelzoo's HF maps) loaded as transformers' own ``BertForSequenceClassification``
   (SDPA attention, its default and fastest CPU path), trained by a plain PyTorch loop with the
   same batches in the same order, the same AdamW groups (decay exclusions, layer-wise lr
   decay, frozen word embeddings), schedule, clipping and dev-set selection; babelzoo runs the
   same overridden recipe beside it, and the throughput ratio compares those two runs.
3. **Frozen probes**: the ``sib200_probe`` task (mean-pooled vectors, logistic regression, C
   chosen on English dev) for multilingual-e5-small and multilingual USE.

No target-language label is read for training or selection by any arm.
"""

from __future__ import annotations

import argparse
import copy
import platform
import shutil
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import default_out, write_results  # noqa: E402

PEER_SET = ["task.head.pooling=pooler", "model_overrides.pooler=true"]


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


def summarise(name, tests, source, tokens_per_s=None, extra=None):
    targets = [r["accuracy"] for lang, r in tests.items() if lang != source]
    return {"name": name, "mean": mean(r["accuracy"] for r in tests.values()), "mean_zero_shot": mean(targets),
            "source": tests.get(source, {}).get("accuracy"), "train_tokens_per_s": tokens_per_s,
            "per_language": {lang: r["accuracy"] for lang, r in tests.items()}, **(extra or {})}


def babelzoo_arm(recipe, overrides, data_dir, out, base=None):
    from babelzoo.finetune import run_finetune
    from babelzoo.train.config import load_recipe, recipe_path

    cfg = load_recipe(recipe_path(recipe), overrides).replace(output_dir=str(out), checkpoints={"resume": False},
                                                              logging={"progress": False})
    shutil.rmtree(out, ignore_errors=True)  # every run of the benchmark trains afresh
    result = run_finetune(cfg, data_dir=data_dir, base=base, log=lambda m: None)
    return cfg, result


# --- the transformers peer -----------------------------------------------------------------------

def hf_depth(name: str, layers: int) -> int:
    if name.startswith("bert.embeddings."):
        return 0
    if name.startswith("bert.encoder.layer."):
        return int(name.split(".")[3]) + 1
    return layers + 1


def hf_optimizer(model, cfg):
    groups = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        no_decay = param.ndim < 2 or name.endswith("bias") or "LayerNorm" in name
        depth = hf_depth(name, model.config.num_hidden_layers)
        groups.setdefault((depth, no_decay), []).append(param)
    top = model.config.num_hidden_layers + 1
    optim = cfg.optim
    params = [{"params": p, "weight_decay": 0.0 if nd else optim.weight_decay,
               "lr": optim.lr * optim.layer_lr_decay ** (top - depth)} for (depth, nd), p in sorted(groups.items())]
    return torch.optim.AdamW(params, lr=optim.lr, betas=optim.betas, eps=optim.eps, foreach=True)


def hf_arm(cfg, spec, data_dir, base, log):
    """transformers' BertForSequenceClassification on the same initial weights and batches."""
    import transformers

    from babelzoo.finetune.data import encode_rows
    from babelzoo.finetune.evaluate import accuracy
    from babelzoo.finetune.run import build_model, prepare_splits
    from babelzoo.objectives.classification import SequenceClassification
    from babelzoo.train.data import SINGLE, BatchPlan
    from babelzoo.train.optim import Schedule
    from babelzoo.zoo.convert import export_hf

    train_rows, dev_rows, labels, _ = prepare_splits(cfg, spec)
    model, tokenizer = build_model(cfg, spec, labels, base=base)
    directory = Path(cfg.output_dir) / "hf_init"
    del model.tokenizer
    export_hf(model, directory, family="bert")
    hf = transformers.BertForSequenceClassification.from_pretrained(directory, attn_implementation="sdpa")
    hf.bert.embeddings.word_embeddings.weight.requires_grad_(False)  # spec.freeze: embeddings.word
    assert list(spec.freeze) == ["embeddings.word"], spec.freeze
    objective = SequenceClassification(tokenizer.specials, max_length=spec.max_length)
    scorer = SequenceClassification(tokenizer.specials, max_length=512)
    train = encode_rows(train_rows, tokenizer, labels, spec, spec.max_length)
    dev = encode_rows(dev_rows, tokenizer, labels, spec, 512)
    steps = spec.steps(len(train), cfg.batch_size)
    plan = BatchPlan(SINGLE, len(train), cfg.batch_size, 1, 1, cfg.seed)
    optimizer = hf_optimizer(hf, cfg)
    base_lrs = [g["lr"] for g in optimizer.param_groups]
    schedule = Schedule(cfg.optim.schedule, steps, cfg.optim.warmup_steps, cfg.optim.min_lr_ratio)

    def predict(examples):
        hf.eval()
        out = [None] * len(examples)
        order = sorted(range(len(examples)), key=lambda i: len(examples[i].ids))
        with torch.no_grad():
            for start in range(0, len(order), 64):
                index = order[start:start + 64]
                batch = scorer.prepare([examples[i] for i in index])
                logits = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            token_type_ids=batch["segment_ids"]).logits
                for r, i in enumerate(index):
                    out[i] = int(logits[r].argmax())
        hf.train()
        return out

    torch.manual_seed(cfg.seed)
    hf.train()
    best, best_state, history, tokens, seconds = None, None, [], 0, 0.0
    for step in range(steps):
        for group, lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr * schedule.factor(step)
        start = time.perf_counter()
        batch = objective.prepare([train[i] for i in plan.indices(step, 0, 0)])
        loss = hf(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  token_type_ids=batch["segment_ids"], labels=batch["labels"]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in hf.parameters() if p.requires_grad], cfg.optim.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds += time.perf_counter() - start
        tokens += int(batch["attention_mask"].sum())
        done = step + 1
        if done == steps or (cfg.eval_every and done % cfg.eval_every == 0):
            score = accuracy(predict(dev), dev)["accuracy"]
            history.append({"step": done, "dev/accuracy": score})
            if best is None or score > best:
                best, best_state = score, copy.deepcopy(hf.state_dict())
            log(f"  transformers step {done}/{steps}: dev {score:.4f}")
    hf.load_state_dict(best_state)
    tests = {}
    for lang, path in spec.test_files().items():
        from babelzoo.finetune.data import read_rows

        examples = encode_rows(read_rows(spec, path, labels), tokenizer, labels, spec, 512)
        tests[lang] = accuracy(predict(examples), examples)
    return tests, tokens / seconds, {"dev": best, "evaluations": history, "steps": steps,
                                     "transformers": transformers.__version__}


def probe_arm(data_dir, log):
    from babelzoo.evaluation.encoders import BabelEncoder
    from babelzoo.evaluation.tasks import TaskContext, load_tasks
    from babelzoo.offline.peers import USEEncoder
    from babelzoo.zoo.factory import create_model

    task = load_tasks().get("sib200_probe")
    context = TaskContext(data_dir=Path(data_dir), log=log)
    e5 = create_model("multilingual_e5_small", pretrained=True)
    out = {}
    for encoder in (BabelEncoder("multilingual_e5_small", e5, e5.tokenizer, prefix="query: ", max_length=512),
                    USEEncoder()):
        rows = task(encoder, context)
        tests = {r.protocol["lang"]: {"accuracy": r.value} for r in rows}
        out[encoder.name] = summarise(f"{encoder.name} frozen probe", tests, "eng_Latn",
                                      extra={"C": rows[0].protocol.get("C")})
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--recipe", default="sib200_e5_small")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="recipe override for every arm")
    parser.add_argument("--peer-set", action="append", default=None,
                        help=f"overrides of the peer comparison (default: {' '.join(PEER_SET)})")
    parser.add_argument("--skip", default="", help="comma-separated arms to skip: peer, probes")
    parser.add_argument("--runs", default="runs/transfer_benchmark")
    parser.add_argument("--out", default=str(default_out("transfer")))
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    peer_set = args.peer_set if args.peer_set is not None else PEER_SET
    from babelzoo.finetune.recipe import TaskSpec
    from babelzoo.zoo.factory import create_model

    runs = Path(args.runs)
    report = {"command": " ".join(["python benchmarks/transfer.py", *(argv or sys.argv[1:])]),
              "machine": {"python": platform.python_version(), "torch": torch.__version__,
                          "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine()},
              "arms": {}}
    start = time.perf_counter()
    cfg, result = babelzoo_arm(args.recipe, args.overrides, args.data_dir, runs / "babelzoo")
    report["protocol"] = result["protocol"]
    report["arms"]["babelzoo"] = summarise("babelzoo fine-tuned (recipe)", result["test"], "eng_Latn",
                                           result["train_tokens_per_s"], {"dev": result["dev"]})
    print(f"babelzoo: mean {report['arms']['babelzoo']['mean']:.4f} ({time.perf_counter() - start:.0f}s)", flush=True)
    if "peer" not in skip:
        overrides = [*args.overrides, *peer_set]
        pcfg = None
        from babelzoo.train.config import load_recipe, recipe_path

        pcfg = load_recipe(recipe_path(args.recipe), overrides)
        torch.manual_seed(pcfg.seed)
        base = create_model(pcfg.model, pretrained=True, **pcfg.model_overrides)
        _, same = babelzoo_arm(args.recipe, overrides, args.data_dir, runs / "babelzoo_bert_head", base=base)
        report["arms"]["babelzoo_bert_head"] = summarise("babelzoo, BERT head (peer setting)", same["test"], "eng_Latn",
                                                         same["train_tokens_per_s"], {"dev": same["dev"],
                                                                                      "overrides": peer_set})
        spec = TaskSpec.from_dict(pcfg.task).resolve(args.data_dir)
        pcfg = pcfg.replace(output_dir=str(runs / "transformers"))
        shutil.rmtree(pcfg.output_dir, ignore_errors=True)
        tests, tps, extra = hf_arm(pcfg, spec, args.data_dir, base, print)
        report["arms"]["transformers"] = summarise("transformers BertForSequenceClassification (peer setting)", tests,
                                                   "eng_Latn", tps, extra)
        report["throughput_ratio"] = same["train_tokens_per_s"] / tps
    if "probes" not in skip:
        report["arms"].update(probe_arm(args.data_dir, lambda m: None))
    report["seconds"] = time.perf_counter() - start
    write_results(args.out, report, markdown, "transfer")
    print(markdown(report))
    return 0


def markdown(report) -> str:
    arms = report["arms"]
    langs = list(next(iter(arms.values()))["per_language"])
    lines = ["# SIB-200 zero-shot transfer (fine-tune on English, select on English dev)", "",
             f"`{report['command']}`", "",
             "| arm | mean (all languages) | mean without English | English | train tokens/s |",
             "|---|---:|---:|---:|---:|"]
    for arm in arms.values():
        tps = f"{arm['train_tokens_per_s']:,.0f}" if arm.get("train_tokens_per_s") else ""
        lines.append(f"| {arm['name']} | {arm['mean']:.4f} | {arm['mean_zero_shot']:.4f} | {arm['source']:.4f} | {tps} |")
    lines.append("")
    if "multilingual_e5_small" in arms:
        probe = arms["multilingual_e5_small"]["mean"]
        got = arms["babelzoo"]["mean"]
        lines.append(f"- target: babelzoo fine-tuned ≥ frozen-e5 probe + 0.03: {got:.4f} vs {probe + 0.03:.4f} → "
                     f"{'yes' if got >= probe + 0.03 else 'no'}")
        if "muse_v3" in arms:
            muse = arms["muse_v3"]["mean"]
            lines.append(f"- target: ≥ multilingual USE probe: {got:.4f} vs {muse:.4f} → {'yes' if got >= muse else 'no'}")
    if "transformers" in arms:
        a, b = arms["babelzoo_bert_head"]["mean"], arms["transformers"]["mean"]
        lines.append(f"- target: babelzoo and transformers within 0.015 on the mean (same BERT head): {a:.4f} vs {b:.4f} "
                     f"→ {'yes' if abs(a - b) <= 0.015 else 'no'}")
        ratio = report["throughput_ratio"]
        lines.append(f"- target: fine-tuning throughput ≥ 1.3× transformers: {ratio:.2f}× → {'yes' if ratio >= 1.3 else 'no'}")
    lines += ["", "| language | " + " | ".join(a["name"].split(" (")[0] for a in arms.values()) + " |",
              "|---|" + "---:|" * len(arms)]
    for lang in langs:
        lines.append(f"| {lang} | " + " | ".join(f"{a['per_language'].get(lang, float('nan')):.3f}" for a in arms.values())
                     + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
