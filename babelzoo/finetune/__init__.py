"""Fine-tuning and zero-shot cross-lingual transfer on the shared trainer.

    babelzoo finetune --config sib200_e5_small --data-dir ../shared/data

A recipe is a :class:`~babelzoo.train.config.TrainConfig` with a ``task`` part
(:class:`~babelzoo.finetune.recipe.TaskSpec`): the head, the source-language train and dev
files, and the test files of every language. :func:`run_finetune` trains with model selection on
the dev set only, then evaluates the best model on each test file.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

# names load on first use, so that a command's --help does not import torch
_API = {
    **dict.fromkeys(["HeadEvaluator", "accuracy", "predict"], "evaluate"),
    **dict.fromkeys(["TaskSpec"], "recipe"),
    **dict.fromkeys(["build_model", "run_finetune"], "run"),
}

__all__ = sorted(_API)

__getattr__ = lazy_getattr(__name__, _API)
