"""The model a pre-training run leaves for its users: ``output_dir/<model_dir>`` holds the final
weights and tokenizer (loadable by :func:`babelzoo.from_pretrained`), a model card
(``README.md``) and, for every data source that keeps one, its record of what it trained on
(``adaptation_pairs`` writes ``adaptation.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from .config import TrainConfig


def run_facts(cfg: TrainConfig, summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the run did, in the card's and the records' words."""
    return {"steps": summary.get("final_step") or summary.get("steps"), "max_steps": cfg.max_steps,
            "budget": {"max_steps": cfg.max_steps, "max_seconds": cfg.max_seconds, "clock": cfg.budget_clock},
            "seconds": summary.get("wall_time_s"), "tokens": summary.get("tokens"),
            "out_of_time": bool(summary.get("out_of_time")),
            "batch_size": cfg.batch_size * cfg.grad_accum, "lr": cfg.optim.lr, "precision": cfg.precision,
            "objectives": sorted(cfg.objectives), "start": cfg.init or {"model": cfg.model}}


def source_records(sources: Sequence[Any]) -> dict[str, dict]:
    """``{file name: record}`` of the sources that keep a record of what they read."""
    return {source.record_file: source.record for source in sources
            if getattr(source, "record_file", None) and getattr(source, "record", None)}


def card(cfg: TrainConfig, facts: Mapping[str, Any], sources: Sequence[Any]) -> str:
    """The model card: what the model is, how it was trained, on what."""
    start = cfg.parts.init.pretrained if cfg.parts.init is not None else None
    lines = [f"# {Path(cfg.output_dir).name}", "",
             f"A `{cfg.model}` encoder trained by `babelzoo pretrain`"
             + (f", starting from the pretrained `{cfg.model}` weights." if start is True else
                f", starting from `{start}`." if start else ", from random weights."), "",
             "## Training", "",
             f"- Objectives: {', '.join(f'`{o}`' for o in facts['objectives'])}.",
             f"- {facts['steps']} optimizer steps of {facts['batch_size']} examples (budget: "
             f"{facts['max_steps']} steps" + (f" or {facts['budget']['max_seconds']:.0f} s of {cfg.budget_clock} time"
                                             if cfg.max_seconds else "") + "), learning rate "
             f"{facts['lr']:g}, {facts['precision']}"
             + (f", {facts['seconds']:.0f} s" if isinstance(facts.get("seconds"), (int, float)) else "") + ".",
             "", "Load it with:", "", "```python", "import babelzoo", "",
             f"model = babelzoo.from_pretrained(\"{Path(cfg.output_dir) / (cfg.model_dir or 'model')}\")", "```", ""]
    for source in sources:
        section = getattr(source, "card", None)
        if callable(section) and getattr(source, "record", None):
            lines += [section(), ""]
    return "\n".join(lines)


def write_trained_model(model, tokenizer, cfg: TrainConfig, summary: Mapping[str, Any], sources: Sequence[Any]
                        ) -> Path:
    """Write ``output_dir/<model_dir>``: weights, tokenizer, README.md and the sources' records
    (each with the run's facts under ``run``)."""
    from ..zoo.checkpoint_io import save_pretrained

    facts = run_facts(cfg, summary)
    extra = {name: json.dumps({**record, "run": facts}, indent=1, ensure_ascii=False) + "\n"
             for name, record in source_records(sources).items()}
    extra["README.md"] = card(cfg, facts, sources)
    return save_pretrained(model, Path(cfg.output_dir) / cfg.model_dir, tokenizer, extra_files=extra)
