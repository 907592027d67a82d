"""Fine-tuning and zero-shot cross-lingual transfer on the shared trainer.

    babelzoo finetune --config sib200_e5_small --data-dir ../shared/data

A recipe is a :class:`~babelzoo.train.config.TrainConfig` with a ``task`` part
(:class:`~babelzoo.finetune.recipe.TaskSpec`): the head, the source-language train and dev
files, and the test files of every language. :func:`run_finetune` trains with model selection on
the dev set only, then evaluates the best model on each test file.
"""

from .evaluate import HeadEvaluator, accuracy, predict
from .recipe import TaskSpec
from .run import build_model, run_finetune

__all__ = ["HeadEvaluator", "TaskSpec", "accuracy", "build_model", "predict", "run_finetune"]
