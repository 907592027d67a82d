"""A training run's model selection: the evaluations every ``eval_every`` steps, the best model
written to ``output_dir/best``, early stopping, and what a resumed run completes of them
(:mod:`babelzoo.train.selection` holds the selection state and the ``best/`` folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import torch

from ..errors import CheckpointError
from ..zoo.model_config import ModelConfig
from . import distributed as D
from .selection import BEST_DIR, best_saved, save_best


class RunSelection:
    """The model-selection half of :class:`~babelzoo.train.trainer.Trainer` (a mixin: it reads
    the trainer's evaluator, selection, model, precision and checkpoints)."""

    @property
    def _stopped_early(self) -> bool:
        return self.selection is not None and self.selection.should_stop

    def evaluate(self) -> dict[str, float]:
        """Run the evaluator on the model (eval mode, no autograd, the run's precision), update
        the selection and, on a new best, write the model to ``output_dir/best``. Every rank
        evaluates the same data (so every rank agrees when to stop); rank 0 writes."""
        was_training = self.wrapped.training
        self.model.eval()
        if self.strategy == "fsdp":
            # The evaluator calls the model, not the sharded root: gather the root's own
            # parameters (embeddings, heads); each block gathers its own when it runs.
            self.module.unshard()
        try:
            with torch.no_grad(), self.precision.autocast():
                metrics = {k: float(v) for k, v in self.evaluator(self.model).items()}
        finally:
            if self.strategy == "fsdp":
                self.module.reshard()
            self.wrapped.train(was_training)
        before = self.selection.state_dict()
        if self.selection.update(self.step, metrics):
            try:
                self._save_best()
            except BaseException:
                # The best step recorded is the one best/ holds: after a failed save the selection
                # (and the checkpoint written after the failure) is as before this evaluation, so
                # a resumed run evaluates this step again.
                self.selection.load_state_dict(before)
                raise
        return {**metrics, f"best {self.selection.metric}": self.selection.best}

    def _save_best(self) -> None:
        state = self._full_state()  # a collective under FSDP: every rank takes part
        if not self.info.is_main:
            return
        from ..zoo.checkpoint_io import CONFIG_NAME, WEIGHTS_NAME, save_weights

        model = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.") and k not in self.alias}
        config = getattr(self.model, "config", None)

        def write(directory: Path) -> None:
            save_weights(model, directory / WEIGHTS_NAME)
            if isinstance(config, ModelConfig):
                config.to_json(directory / CONFIG_NAME)
            if self.tokenizer is not None:
                self.tokenizer.save(directory)

        save_best(self.output_dir / BEST_DIR, write)

    def _complete_selection(self) -> Optional[Path]:
        """After resuming: make ``best/`` hold the best step the checkpoint records, and evaluate
        the step resumed at when it was due and not done (the evaluation, or the save of its best
        model, failed before the checkpoint after it). Returns the checkpoint then written, if any."""
        s, cfg = self.selection, self.config
        if s is None:
            return None
        best = self.output_dir / BEST_DIR
        if D.broadcast_object(s.best_step is not None and not best_saved(best) if self.info.is_main else None):
            if s.best_step != self.step:
                raise CheckpointError(
                    f"{best}: holds no saved model, but the checkpoint resumed records step {s.best_step} as the best "
                    f"(its save failed, or the folder was removed); the weights of that step are not kept. To "
                    f"finish the run, train it again: remove {self.checkpoints.root} (or choose a new output_dir)")
            self._save_best()  # the weights resumed are those of the best step
        due = self.step == cfg.max_steps or bool(cfg.eval_every and self.step % cfg.eval_every == 0)
        if not due or any(e.get("step") == self.step for e in s.history):
            return None
        self.evaluate()
        return self.save_checkpoint()

    def _selection_summary(self) -> dict[str, Any]:
        s = self.selection
        if s is None:
            return {}
        return {"selection_metric": s.metric, "best": s.best, "best_step": s.best_step,
                "best_dir": str(self.output_dir / BEST_DIR) if s.best_step is not None else None,
                "stopped_early": s.should_stop, "evaluations": s.history}
