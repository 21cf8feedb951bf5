"""The ``early_stopping`` callback: Lightning's EarlyStopping, with the model's own metric by default and
a run that ends before its first validation left to finish.

- ``monitor`` / ``mode`` default to the metric the model's best checkpoint is chosen by (``val/loss``,
  min; ``val/bleu4``, max; ...): ``callbacks=[early_stopping]`` said "missing 1 required positional
  argument: 'monitor'".
- A run that ends before its first validation (``trainer.max_steps`` shorter than an epoch, a smoke
  test of a recipe with early stopping) stopped with Lightning's strict "Early stopping conditioned on
  metric `val/loss` which is not available": it now runs, and says at the end that early stopping never
  checked. A metric still missing once validation has run (a typo: ``monitor: val/nope``) stays an error.
  Validation turned off altogether (``trainer.limit_val_batches=0``) is refused with the recipe
  (``zoo.monitoring.check_validation_and_test``).
"""

from __future__ import annotations

import sys
from typing import Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping as LightningEarlyStopping


class EarlyStopping(LightningEarlyStopping):
    def __init__(self, monitor: Optional[str] = None, min_delta: float = 0.0, patience: int = 3,
                 verbose: bool = False, mode: Optional[str] = None, strict: bool = True, check_finite: bool = True,
                 stopping_threshold: Optional[float] = None, divergence_threshold: Optional[float] = None,
                 check_on_train_epoch_end: Optional[bool] = None, log_rank_zero_only: bool = False):
        self.model_default = monitor is None  # monitor (and mode) set from the model in setup
        super().__init__(monitor or "", min_delta=min_delta, patience=patience, verbose=verbose,
                         mode=mode or "min", strict=strict, check_finite=check_finite,
                         stopping_threshold=stopping_threshold, divergence_threshold=divergence_threshold,
                         check_on_train_epoch_end=check_on_train_epoch_end, log_rank_zero_only=log_rank_zero_only)
        self.given_mode = mode
        self.validated = self.checked = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.model_default and not self.monitor:
            self.monitor = pl_module.monitor
            self.mode = self.given_mode or pl_module.monitor_mode
            self.min_delta = abs(self.min_delta) * (1 if self.monitor_op == torch.gt else -1)
            best = torch.inf if self.monitor_op == torch.lt else -torch.inf
            self.best_score = torch.tensor(best)  # cpu: as Lightning's own, moved to the metric's device when compared
        super().setup(trainer, pl_module, stage)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.validated = True
        super().on_validation_end(trainer, pl_module)

    def _run_early_stopping_check(self, trainer: L.Trainer) -> None:
        if self.monitor not in trainer.callback_metrics and not self.validated:
            return  # no validation yet in this run: nothing to judge by (said at the end if it never came)
        self.checked = True
        super()._run_early_stopping_check(trainer)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.checked and not trainer.fast_dev_run and trainer.is_global_zero:
            print(f"note: early stopping never checked {self.monitor}: the run ended (at step {trainer.global_step}) "
                  "before its first validation", file=sys.stderr)
