"""A training run's checkpoints: what :class:`~babelzoo.train.trainer.Trainer` saves every
``checkpoints.every`` steps (whole, or sharded under FSDP), how a run resumes from the newest one
after checking it is the same run, and the emergency checkpoint after an unexpected error."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Optional

import torch

from ..zoo.config import ConfigError
from ..zoo.model_config import ModelConfig
from ..zoo.checkpoint_io import slice_names
from .checkpoint import (
    CheckpointManager,
    read_model,
    read_part,
    read_trainer_state,
    rng_state,
    set_rng_state,
    single_process_quiet,
    write_slices,
)
from .config import TrainConfig
from .identity import ResumeMismatch, check_same_run, data_identity, objective_identity, saved_model_config

OPTIMIZER_PREFIX = "optimizer."  # the optimizer's tensors among a sharded checkpoint's slices


def finished_checkpoint(config: TrainConfig) -> Optional[Path]:
    """The newest checkpoint in ``config.output_dir`` when it has already reached
    ``config.max_steps`` (resuming it trains nothing), else None."""
    if not config.checkpoints.resume:
        return None
    path = CheckpointManager(Path(config.output_dir) / "checkpoints", config.checkpoints.keep).latest()
    if path is None:
        return None
    step = read_part(path, "trainer").get("step")
    return path if isinstance(step, int) and step >= config.max_steps else None


class RunCheckpoints:
    """The checkpoint half of :class:`~babelzoo.train.trainer.Trainer` (a mixin: it reads the
    trainer's model, optimizer, data stream, precision and selection state)."""

    def _full_state(self) -> dict[str, torch.Tensor]:
        if self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            return get_model_state_dict(self.module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return self.module.state_dict()

    def _optimizer_state(self) -> Any:
        if self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

            return get_optimizer_state_dict(self.module, self.optimizer,
                                            options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return self.optimizer.state_dict()

    def save_checkpoint(self) -> Path:
        """Checkpoint the current step (every rank calls this; FSDP gathers full tensors)."""
        state = self._full_state()
        model = {k[len("model."):]: v for k, v in state.items() if k.startswith("model.") and k not in self.alias}
        heads = {k[len("objectives."):]: v for k, v in state.items()
                 if k.startswith("objectives.") and k not in self.alias}
        config = getattr(self.model, "config", None)
        config_json = config.to_json() if isinstance(config, ModelConfig) else None
        schedule = self.schedule
        trainer = {
            "step": self.step, "updates": self.step - self.precision.skipped, "world_size": self.info.world_size,
            "data": self.stream.state_dict(),
            "precision": self.precision.state_dict(),
            "schedule": {"kind": schedule.kind, "total_steps": schedule.total, "warmup_steps": schedule.warmup,
                         "min_ratio": schedule.min_ratio, "step": self.step},
            "flops_per_token": self.flops_per_token,
            "peak_flops": self.peak,  # what this run's MFU figures are measured against
            "config": self.config.to_dict(),
            "data_identity": data_identity(self.data),
            "objective_identity": objective_identity(self.objectives),
            "selection": self.selection.state_dict() if self.selection is not None else None,
        }
        extra = self.tokenizer.save if self.tokenizer is not None else None
        if self.config.checkpoints.format == "sharded":
            tensors, values = self._sharded_state()
            shared = {"optimizer": values, "trainer": {**trainer, "checkpoint_format": "sharded"}}
            return self.checkpoints.save(self.step, lambda: shared, {"rng": rng_state()}, lambda: (None, config_json),
                                         extra, every_rank=lambda folder: write_slices(tensors, folder))
        optimizer = self._optimizer_state()
        shared = {"objectives": heads, "optimizer": optimizer, "trainer": trainer}
        return self.checkpoints.save(self.step, lambda: shared, {"rng": rng_state()}, lambda: (model, config_json),
                                     extra)

    def _sharded_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """This rank's tensors of the model, heads and optimizer as torch.distributed.checkpoint
        names them (FSDP2: its slices, as DTensors; tied weights once) and the optimizer's other
        values (learning rates, betas), by flattened name."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        model, optimizer = get_state_dict(self.module, self.optimizer,
                                          options=StateDictOptions(flatten_optimizer_state_dict=True))
        tensors = {k: v for k, v in model.items() if k not in self.alias}
        tensors.update({f"{OPTIMIZER_PREFIX}{k}": v for k, v in optimizer.items() if isinstance(v, torch.Tensor)})
        return tensors, {k: v for k, v in optimizer.items() if not isinstance(v, torch.Tensor)}

    def _load_full(self, path: Path) -> None:
        """Fill the model, heads and optimizer from a full checkpoint (FSDP: each rank keeps
        its slices of the whole tensors)."""
        state = {f"model.{k}": v for k, v in read_model(path).items()}
        state.update({f"objectives.{k}": v for k, v in read_part(path, "objectives").items()})
        for key, source in self.alias.items():
            state[key] = state[source]
        optim_state = read_part(path, "optimizer")
        if self.strategy == "fsdp":
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
                set_optimizer_state_dict,
            )

            set_model_state_dict(self.module, state, options=StateDictOptions(full_state_dict=True))
            # parameters that never received a gradient (an unused pooler) have no optimizer state
            set_optimizer_state_dict(self.module, self.optimizer, optim_state,
                                     options=StateDictOptions(full_state_dict=True, strict=False))
        else:
            self.module.load_state_dict(state, strict=True)
            self.optimizer.load_state_dict(optim_state)

    def _load_sharded(self, path: Path) -> None:
        """Fill the model, heads and optimizer from a sharded checkpoint's slices, each rank
        reading the parts of the slices its own tensors cover (any number of ranks wrote them)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import HuggingFaceStorageReader
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        from ..zoo.checkpoint_io import SHARDED_DIR

        saved = slice_names(path / SHARDED_DIR)
        tensors, _ = self._sharded_state()  # creates optimizer state for every parameter, filled below
        missing = sorted(k for k in tensors if not k.startswith(OPTIMIZER_PREFIX) and k not in saved)
        if missing:
            raise ResumeMismatch(f"checkpoint {path} holds no {', '.join(missing[:5])}: it was written by another model")
        # a parameter that had received no gradient when the checkpoint was taken had no optimizer state
        stateless = {k for k in tensors if k.startswith(OPTIMIZER_PREFIX) and k not in saved}
        wanted = {k: v for k, v in tensors.items() if k not in stateless}
        with single_process_quiet():
            dcp.load(wanted, storage_reader=HuggingFaceStorageReader(str(path / SHARDED_DIR)))
        model = {k: v for k, v in wanted.items() if not k.startswith(OPTIMIZER_PREFIX)}
        for key, source in self.alias.items():
            model[key] = model[source]
        # every parameter's state goes in (the stateless ones' as created, removed again below)
        optimizer = {**read_part(path, "optimizer"),
                     **{k[len(OPTIMIZER_PREFIX):]: v for k, v in tensors.items() if k.startswith(OPTIMIZER_PREFIX)}}
        set_state_dict(self.module, self.optimizer, model_state_dict=model, optim_state_dict=optimizer,
                       options=StateDictOptions(flatten_optimizer_state_dict=True, strict=False))
        names = {id(p): n for n, p in self.module.named_parameters()}
        for param in list(self.optimizer.state):
            if any(k.startswith(f"{OPTIMIZER_PREFIX}state.{names.get(id(param))}.") for k in stateless):
                del self.optimizer.state[param]  # as it was: no state until its first gradient

    def run_identity(self) -> dict[str, Any]:
        """What makes this run the run it is besides its settings: the model's config, the
        objectives' and the data's identity (:mod:`babelzoo.train.identity`)."""
        config = getattr(self.model, "config", None)
        return {"model": config.to_dict() if isinstance(config, ModelConfig) else None,
                "objectives": objective_identity(self.objectives), "data": data_identity(self.data)}

    def _resume(self) -> Optional[Path]:
        path = self.checkpoints.latest()
        if path is None:
            return None
        if not self.config.checkpoints.resume:
            raise ConfigError(f"{self.checkpoints.root} already holds checkpoints (newest {path.name}) and "
                              "checkpoints.resume is off: resume them (checkpoints.resume: true) or choose a new "
                              "output_dir")
        trainer = read_trainer_state(path)
        check_same_run(str(path), {"config": trainer.get("config"), "model": saved_model_config(path),
                                   "objectives": trainer.get("objective_identity"),
                                   "data": trainer.get("data_identity")},
                       {"config": self.config.to_dict(), **self.run_identity()}, int(trainer["step"]),
                       world_sizes=(int(trainer["world_size"]), self.info.world_size))
        if trainer.get("checkpoint_format") == "sharded":
            self._load_sharded(path)
        else:
            self._load_full(path)
        self.step = int(trainer["step"])
        self.flops_per_token = trainer.get("flops_per_token")
        self._resumed_peak = trainer.get("peak_flops")
        if self.selection is not None:
            if trainer.get("selection") is None:
                raise ResumeMismatch(f"checkpoint {path} was written by a run without evaluation; this run selects on "
                                     f"{self.selection.metric!r}: choose a new output_dir")
            self.selection.load_state_dict(trainer["selection"])
        self.precision.load_state_dict(trainer["precision"])
        self.stream.load_state_dict(trainer["data"])
        rng_file = path / f"rng-rank{self.info.rank}.json"
        if rng_file.is_file() and trainer["world_size"] == self.info.world_size:
            set_rng_state(read_part(path, f"rng-rank{self.info.rank}"))
        else:
            warnings.warn(f"checkpoint {path} was written by {trainer['world_size']} ranks, this run has "
                          f"{self.info.world_size}: random states are reseeded, so dropout differs from an "
                          "uninterrupted run", RuntimeWarning)
            self._seed_everything(self.config.seed + self.info.rank + 7919 * self.step)
        return path

    def _emergency_checkpoint(self, err: Exception) -> Optional[Path]:
        """After an unexpected exception, save the last completed step (one process only: the
        other ranks of a group may not reach the collectives of a save) if every parameter is
        finite. Resuming repeats the failed step's batch; its random draws differ."""
        if self.info.world_size != 1 or self.step == 0:
            return None
        if not all(bool(torch.isfinite(p).all()) for p in self.module.parameters()):
            warnings.warn(f"{type(err).__name__} at step {self.step + 1}: parameters are not finite, so no emergency "
                          f"checkpoint was written", RuntimeWarning, stacklevel=3)
            return None
        self.stream.step = self.step  # a batch drawn for the failed step is drawn again on resume
        try:
            path = self.save_checkpoint()
        except Exception as save_err:  # the original error matters more
            warnings.warn(f"emergency checkpoint failed: {type(save_err).__name__}: {save_err}", RuntimeWarning,
                          stacklevel=3)
            return None
        warnings.warn(f"{type(err).__name__} at step {self.step + 1}: emergency checkpoint {path} written; "
                      f"resuming continues from step {self.step}", RuntimeWarning, stacklevel=3)
        return path
