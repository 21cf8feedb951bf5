"""Stop a run that went wrong, with a message: a non-finite loss, a monitored metric the model never logs."""

from __future__ import annotations

import math
import sys

import lightning as L
import torch

from zoo.registry import closest


class NonFiniteLossError(RuntimeError):
    def __init__(self, step: int, epoch: int, value: float | str):
        super().__init__(f"the training loss became {value} at step {step} (epoch {epoch})")
        self.step, self.epoch = step, epoch


def as_divergence(err: Exception, trainer: L.Trainer) -> NonFiniteLossError | None:
    """``err`` raised in fit as a diverged run, or None: the guard's own error, or torch.distributions
    refusing NaN parameters (an update made the weights non-finite; the next forward pass builds a
    distribution from them before any loss exists for the guard to see)."""
    if isinstance(err, NonFiniteLossError):
        return err
    if isinstance(err, ValueError) and "but found invalid values" in str(err):
        return NonFiniteLossError(trainer.global_step, trainer.current_epoch, "non-finite (NaN parameters of a "
                                  "distribution: the previous update broke the weights)")
    return None


class NonFiniteLossGuard(L.Callback):
    """Raise before ``backward`` when the loss is NaN/inf, so no bad update is applied and no
    checkpoint of the broken weights is written."""

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        # a one-number loss through .item(): one read, as bool() of a tensor is (on CUDA, one sync either way),
        # where torch.isfinite(...).all() costs two kernels a step (~40 us on this CPU, a step being ~3 ms)
        finite = math.isfinite(loss.item()) if loss.numel() == 1 else bool(torch.isfinite(loss).all())
        if not finite:
            raise NonFiniteLossError(trainer.global_step, trainer.current_epoch, float(loss.detach().sum()))


class MonitorCheck(L.Callback):
    """Say so when the metric the best checkpoint is chosen by is not logged (a typo in
    ``checkpoint.monitor``): Lightning then saves no best checkpoint and, here, says nothing. A
    warning, not an error: some metrics are logged only every few epochs (the OOD model's ODIN search)."""

    def __init__(self, monitor: str, chooses_best: bool = True):
        self.monitor, self.seen, self.warned = monitor, False, False
        self.chooses_best = chooses_best and monitor.startswith("val/")  # False: validation off, said at the start
        self.validated = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.validated = True
        self.seen = self.seen or self.monitor in trainer.callback_metrics
        if not self.seen and not self.warned:
            self.warned = True
            self._warn(trainer, "is not among the metrics of the first validation")

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.seen and self.warned:
            self._warn(trainer, "was never logged, so no best checkpoint was saved (last.ckpt was)")
        elif self.chooses_best and not self.validated and not trainer.fast_dev_run and trainer.is_global_zero:
            print(f"note: the run ended (at step {trainer.global_step}) before its first validation, so no best "
                  f"checkpoint was chosen by {self.monitor}; last.ckpt was saved", file=sys.stderr)

    def _warn(self, trainer: L.Trainer, what: str) -> None:

        logged = sorted(k for k in trainer.callback_metrics if k.startswith("val/"))
        if trainer.is_global_zero:
            print(f"warning: checkpoint.monitor={self.monitor!r} {what}{closest(self.monitor, logged)}; "
                  f"the model logs {', '.join(logged) or 'no val/ metric'}", file=sys.stderr)
