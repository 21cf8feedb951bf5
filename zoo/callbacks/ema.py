"""EMA of the weights for models that also fit state on validation data (`callbacks: [{name: ema}]`).

Lightning's ``EMAWeightAveraging`` swaps the averaged weights in at ``on_validation_epoch_start``
and back out in its own ``on_validation_epoch_end``, which Lightning calls *before* the model's.
A model that fits something there (the OOD classifier fits a temperature, a max-softmax threshold
and ODIN's (T, eps) on the validation scores) then writes it into the live weights' buffers, and
``use_buffers`` averages those buffers step by step with the rest: the checkpoint ends up with a
temperature drifting between 1 and the fitted values and an ODIN T that is none of the searched ones.

This subclass changes three things and nothing else:
- the decay warms up, min(decay, (1 + n) / (10 + n)) after n updates (as TensorFlow's
  ExponentialMovingAverage with ``num_updates``; ``warmup=false`` for the fixed decay): with a fixed
  0.995 the first weights, near their random start, keep a share 0.995^n of the average (39 % after
  the 190 updates of ten short epochs, where a joint OOD run then scored 68 % accuracy);
- the averaged weights stay swapped in until ``on_validation_end``, after the model's
  ``on_validation_epoch_end``: what the model fits there is fitted on, and stored with, the
  averaged weights (checkpoint callbacks run after every other callback's ``on_validation_end``);
- buffers named in the model's ``fitted_buffers`` are kept out of the averaging: each update
  leaves the averaged model's values as the last validation set them.
For a model without ``fitted_buffers`` it behaves like ``EMAWeightAveraging`` (BatchNorm statistics
are averaged with ``use_buffers=True``, the default).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

import lightning as L
import torch
from lightning.pytorch.callbacks import EMAWeightAveraging


def warmup_ema(decay: float):
    """avg_fn for torch's AveragedModel: EMA with decay min(decay, (1 + n) / (10 + n)), n = updates so far."""

    @torch.no_grad()
    def update(averaged: torch.Tensor, current: torch.Tensor, n_averaged: torch.Tensor) -> torch.Tensor:
        d = torch.clamp((1.0 + n_averaged) / (10.0 + n_averaged), max=decay)  # a tensor: no device sync
        return d * averaged + (1.0 - d) * current

    return update


class EMAWeights(EMAWeightAveraging):
    """``EMAWeightAveraging`` whose validation-fitted buffers are fitted on, and kept with, the average."""

    def __init__(self, decay: float = 0.999, warmup: bool = True, update_every_n_steps: int = 1,
                 update_starting_at_step: Optional[int] = None, update_starting_at_epoch: Optional[int] = None,
                 use_buffers: bool = True, device: Optional[str] = None):
        super().__init__(device=device, use_buffers=use_buffers, decay=decay, update_every_n_steps=update_every_n_steps,
                         update_starting_at_step=update_starting_at_step,
                         update_starting_at_epoch=update_starting_at_epoch)
        if warmup:
            self._kwargs["avg_fn"] = warmup_ema(decay)

    @contextmanager
    def _fitted_kept(self, pl_module: L.LightningModule) -> Iterator[None]:
        names = tuple(getattr(pl_module, "fitted_buffers", ()))
        if self._average_model is None or not names:
            yield
            return
        averaged = dict(self._average_model.module.named_buffers())
        kept = {n: averaged[n].detach().clone() for n in names}
        yield
        for n, value in kept.items():
            averaged[n].data.copy_(value)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        with self._fitted_kept(pl_module):
            super().on_train_batch_end(trainer, pl_module, *args)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        with self._fitted_kept(pl_module):
            super().on_train_epoch_end(trainer, pl_module)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        pass  # the model's own on_validation_epoch_end still runs on the averaged weights

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_epoch_end(trainer, pl_module)  # swaps the live weights back in
