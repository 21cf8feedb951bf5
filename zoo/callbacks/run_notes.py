"""What a run tells its user besides its metrics: the run's facts, notes kept for the end, Lightning's
messages held until the run's own are out."""

from __future__ import annotations

import sys
from typing import Any

import lightning as L


class RunInfo(L.Callback):
    """Puts the run's identity into every checkpoint under ``checkpoint["zoo"]``: which model,
    the data options and the full resolved config. `zoo.load` / `zoo.evaluate` read it to rebuild
    the model and its datamodule, and to refuse files that are not zoo checkpoints."""

    def __init__(self, info: dict):
        self.info = info

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # the loggers get the recipe's resolved config (the model keeps its hyperparameters, which
        # may hold a whole vocabulary, out of the loggers: see ZooModule.__init__)
        for logger in trainer.loggers:
            logger.log_hyperparams(self.info["config"])

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        checkpoint["zoo"] = self.info


class Notes(L.Callback):
    """One-line notes about the run's settings (``note: ...`` on stderr), printed once training has started,
    after the checks Lightning makes inside fit (a mistake found there is then the only line), by one process."""

    def __init__(self, notes: list[str]):
        self.notes, self.said = list(notes), False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero and not self.said:
            for note in self.notes:
                print(f"note: {note}", file=sys.stderr)
        self.said = True


class ReleaseHeldMessages(L.Callback):
    """Lets out Lightning's start-up lines held by ``zoo.messages.HeldMessages`` once training (or
    testing) has started, i.e. after the checks Lightning makes inside fit and test."""

    def __init__(self, held: Any):
        self.held = held

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.held.release()

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.held.release()
