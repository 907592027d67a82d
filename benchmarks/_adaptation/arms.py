"""The arms of the adaptation benchmark: their names, their folders in ``--work``, and each
recipe arm as ``--set`` overrides of the shipped ``adapt_e5_small`` recipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

RECIPE = "adapt_e5_small"
OBJECTIVE = "translation_ranking"  # the recipe's objective, whose data entry holds the pairs source
E5 = "multilingual_e5_small"
ARMS = ("e5", "recipe", "+bare", "+own", "st", "+distill", "distill", "steps400", "margin0.3", "+tlm", "+vocab")
RECIPE_ARMS = ("recipe", "+bare", "+own", "+distill", "distill", "steps400", "margin0.3", "+tlm", "+vocab")
# multilingual distillation (the student gives both sides the frozen teacher's vector of the English
# side), which +distill adds to the recipe and distill trains alone, on the recipe's pairs
DISTILL = ("distill_sentence", {"teacher": E5, "max_length": 64, "use_language_ids": False})
# the objective +tlm adds, on the recipe's pairs (both sides of a pair, one sequence)
TLM = ("tlm", {"max_length": 128, "use_language_ids": False})
# steps400: the recipe with the schedule of its first version (400 steps, 40 warm-up)
SHORT = {"max_steps": 400, "optim.warmup_steps": 40}
# margin0.3: the recipe's ranking with LaBSE's additive margin (0.3) taken from each positive's
# similarity, where the recipe ranks with the plain in-batch softmax
LABSE_MARGIN = {f"objectives.{OBJECTIVE}.margin": 0.3}
# the arms that are a few scalar overrides of the recipe
SCALAR_ARMS = {"steps400": SHORT, "margin0.3": LABSE_MARGIN}
# +own: the recipe with a user's own pairs (pairs_dir), made from the SIB-200 train split of the
# --own-pairs languages (Flores-200 sentences, English and X aligned by index_id), in --work/OWN_PAIRS;
# judged on the same languages' SIB-200 dev and test sentences, which no arm trains on
OWN_PAIRS = "own_pairs"
OWN_EXCLUDE = "own_exclude"  # the test-sentence folder of the +own arm (own_exclude)
# a recipe arm's training run, inside its folder (which holds the benchmark's own files beside it:
# babelzoo pretrain writes only into a folder of its own)
RUN_FOLDER = "run"
# the +vocab arm's starting point, in --work, and the file that says it is complete
VOCAB_INIT, VOCAB_MARK = "+vocab-init", "vocab.json"


def base_overrides(output_dir: str | Path, max_steps: Optional[int], langs: Optional[Sequence[str]]) -> list[str]:
    """What every recipe arm sets: its folder and, when asked, the steps and languages."""
    out = [f"output_dir={output_dir}"]
    if max_steps is not None:
        out.append(f"max_steps={max_steps}")
    if langs:
        out.append(f"languages=[{','.join(langs)}]")
    return out


def arm_overrides(arm: str, recipe: Mapping[str, Any], grown: Optional[Path] = None,
                  own: Optional[Path] = None, exclude: Optional[Path] = None) -> list[str]:
    """The ``--set`` overrides that turn the shipped recipe (its raw mapping) into ``arm``.
    Values are JSON, which the recipe loader reads as YAML. ``grown``: for ``+vocab``, the folder
    of e5 with the learned pieces (:func:`grown_e5`); ``own``: for ``+own``, the pairs folder, and
    ``exclude`` the test-sentence folder that holds no SIB-200 training sentences
    (:func:`own_exclude`: the user's pairs are those sentences)."""
    if arm == "recipe":
        return []
    if arm not in RECIPE_ARMS:
        raise ValueError(f"{arm!r} is not trained by the recipe (recipe arms: {', '.join(RECIPE_ARMS)})")
    if arm == "+vocab":
        if grown is None:
            raise ValueError("+vocab starts from e5 with the learned pieces: give its folder")
        rows = json.loads((grown / "config.json").read_text(encoding="utf-8"))["text"]["vocab_size"]
        first = json.loads((grown / VOCAB_MARK).read_text(encoding="utf-8"))["first_new_id"]
        return [f"init={json.dumps({'pretrained': str(grown), 'train_rows_from': first})}",
                f"tokenizer={json.dumps({'path': str(grown)})}", f"model_overrides.vocab_size={rows}"]
    if arm in SCALAR_ARMS:
        return [f"{key}={value}" for key, value in SCALAR_ARMS[arm].items()]
    if arm == "+bare":  # the same pairs a second time without the prefix, sampled as often
        (source,) = recipe["data"][OBJECTIVE]["sources"]
        return [f"data.{OBJECTIVE}.sources={json.dumps([source, {**source, 'prefix': ''}])}"]
    if arm == "+own":
        if own is None:
            raise ValueError("+own trains on a folder of the user's pairs: give it")
        overrides = [f"pairs_dir={json.dumps(str(own))}"]
        if exclude is not None:
            (source,) = recipe["data"][OBJECTIVE]["sources"]
            overrides.append(f"data.{OBJECTIVE}.sources={json.dumps([{**source, 'exclude': str(exclude)}])}")
        return overrides
    if arm == "distill":
        name, options = DISTILL
        return [f"objectives={json.dumps({name: options})}", f"data={json.dumps({name: recipe['data'][OBJECTIVE]})}"]
    (name, options), extra = (DISTILL, []) if arm == "+distill" else (TLM, ["model_overrides.mlm_head=true"])
    return [f"objectives.{name}={json.dumps(options)}", f"data.{name}={json.dumps(recipe['data'][OBJECTIVE])}", *extra]


def read_shipped_recipe() -> dict:
    from babelzoo.train.config import read_recipe, recipe_path

    return read_recipe(recipe_path(RECIPE))[0]
