"""What MAML measures (a mixin of ``MAML``): validation and test fine-tune the meta-learned weights on
each fixed held-out task's support points and report the query loss (and, for classification, the
accuracy) after 0, 1, ..., ``eval_inner_steps`` steps: ``{val,test}/loss_j`` and ``acc_j``, with 95 %
intervals over the tasks at test (``_ci95``); ``{val,test}/loss`` and ``acc`` are the last step's. The
curve's figure (and on sinusoids the adapted functions) every ``plot_every_n_epochs`` and at the test."""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.models.maml import plots


def accuracy(logits: Tensor, y: Tensor) -> Tensor:
    """The fraction of predictions ``logits`` (..., N) whose argmax is the label ``y`` (...)."""
    return (logits.argmax(-1) == y).float().mean()


class MAMLEvaluation:
    """Validation and test steps: the model supplies ``curve`` (the query losses after each fine-tuning step)."""

    def on_validation_epoch_start(self) -> None:
        self._curves: list[tuple[Tensor, Tensor | None]] = []

    on_test_epoch_start = on_validation_epoch_start

    def validation_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> None:
        self._curves.append(self.curve(batch))

    test_step = validation_step

    def gathered(self) -> tuple[Tensor, Tensor | None]:
        losses = torch.cat([c[0] for c in self._curves])  # (tasks, steps + 1)
        metrics = torch.cat([c[1] for c in self._curves]) if self.metric is not None else None
        if self.world()[0] > 1:
            losses = self.all_gather(losses).flatten(0, 1)
            metrics = self.all_gather(metrics).flatten(0, 1) if metrics is not None else None
        return losses, metrics

    def log_curve(self, split: str) -> tuple[Tensor, Tensor | None]:
        losses, metrics = self.gathered()
        n = len(losses)
        out = {}
        for name, values in (("loss", losses), ("acc", metrics)):
            if values is None:
                continue
            mean, ci = values.mean(0), 1.96 * values.std(0) / max(n, 2) ** 0.5  # (steps + 1,) each
            for j in range(len(mean)):
                out[f"{split}/{name}_{j}"] = mean[j]
                if split == "test":
                    out[f"{split}/{name}_{j}_ci95"] = ci[j]
        last = losses.shape[1] - 1  # after eval_inner_steps fine-tuning steps; the same tensor as
        out[f"{split}/loss"] = out[f"{split}/loss_{last}"]  # its curve point (a second mean differs on CUDA)
        if metrics is not None:
            out[f"{split}/acc"] = out[f"{split}/acc_{last}"]
        self.log_dict(out)
        return losses, metrics

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        losses, metrics = self.log_curve("val")
        every = self.cfg.plot_every_n_epochs
        if every and (self.current_epoch + 1) % every == 0:
            self.plots(losses, metrics)

    def on_test_epoch_end(self) -> None:
        losses, metrics = self.log_curve("test")
        self.plots(losses, metrics)

    def plots(self, losses: Tensor, metrics: Tensor | None) -> None:
        self.save_figure("steps_curve", plots.steps_curve(losses, metrics))
        if self.task == "regression":
            self.save_figure("adaptation", plots.sinusoid_adaptation(self))
