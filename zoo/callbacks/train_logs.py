"""A model's training-step values (``ZooModule.log_train``) on their way to the loggers without Lightning's
``self.log``.

Each ``self.log`` call moves the logged value's whole record in Lightning's result collection to the value's
device (``_ResultMetric.to``: a walk of ~70 attributes with deep copies of its dataclasses), ~0.5 ms of CPU a call:
five values once an epoch of 19 steps are ~3 % of the 8x8 VAE's step (``benchmarks/overhead.py``). A value logged
in ``training_step`` for that step only (``on_step=True, on_epoch=False``, Lightning's default there) needs none of
the record: ``TrainLogs`` gives it to the trainer's callback and progress-bar metrics at once, as a tensor and a
number as Lightning's would, and to the loggers in the row Lightning writes at the end of that batch
(``_LoggerConnector.log_metrics``: the same step, ``epoch`` column and ``logger.save()``). Where something else
logged a step value at that batch (another ``self.log`` in ``training_step``, a callback), Lightning writes its own
row: the values then go through ``self.log`` there, into that one row.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import torch


def logged_tensor(name: str, value: Any, device: torch.device) -> torch.Tensor:
    """``value`` as Lightning's ``self.log`` keeps a step value: a detached copy of a one-element tensor (a number on
    ``device``), squeezed to a scalar, floating point (not float32 or float64: the default dtype)."""
    dtype = torch.get_default_dtype()
    out = value.detach().clone() if isinstance(value, torch.Tensor) else torch.tensor(value, device=device, dtype=dtype)
    if out.numel() != 1:
        raise ValueError(f"log_train({name!r}: {value}): the tensor must have a single element; log its mean, say")
    out = out.squeeze()
    return out if out.dtype in (torch.float32, torch.float64) else out.to(dtype)


def writes_logs(trainer: L.Trainer) -> bool:
    """Lightning writes the step values of the batch that is ending (``update_train_step_metrics``' test)."""
    if trainer.fit_loop._should_accumulate() and trainer.lightning_module.automatic_optimization:
        return False
    return bool(trainer._logger_connector.should_update_logs or trainer.fast_dev_run)


class TrainLogs(L.Callback):
    """``log_train``'s values of the current batch, written once it ends. Place it after every callback that may
    log a step value in its ``on_train_batch_end`` (``zoo.runner`` puts it last; Lightning runs the checkpoints,
    which read the callback metrics already set, after it)."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[torch.Tensor, bool]] = {}  # name -> (value, shown on the progress bar)

    def add(self, trainer: L.Trainer, metrics: dict[str, Any], prog_bar: tuple, device: torch.device) -> None:
        """``metrics`` (name -> tensor or number) logged at this batch; ``prog_bar``: the names the bar shows."""
        connector = trainer._logger_connector
        for name, value in metrics.items():
            value = logged_tensor(name, value, device)
            shown = name in prog_bar
            connector._callback_metrics[name] = value  # what monitors read (a best checkpoint by train/loss)
            if shown:
                connector._progress_bar_metrics[name] = value.item()
            self.pending[name] = (value, shown)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, {}
        if trainer._logger_connector.metrics["log"]:  # Lightning writes a row of its own at this batch: join it
            for name, (value, shown) in pending.items():
                pl_module.log(name, value, prog_bar=shown)
        elif writes_logs(trainer):
            trainer._logger_connector.log_metrics({name: value for name, (value, _) in pending.items()})


def train_logs(trainer: Any) -> TrainLogs | None:
    """The trainer's ``TrainLogs``, if it has one (a run of ``zoo.train``), else None."""
    for callback in getattr(trainer, "callbacks", ()):
        if isinstance(callback, TrainLogs):
            return callback
    return None
