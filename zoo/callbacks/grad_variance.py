"""Measure the gradient variance of a model's estimator during training.

An estimator's variance decides how fast training goes (Xu's lecture notes "Some new and interesting
research using Softmax": REINFORCE "suffers from high variance and is slow to converge"), and it
changes as the model trains, so it is measured on the real model and real batches: every N steps, M
independent estimates of the gradient on the same batch, their per-parameter variance averaged over
parameters.
"""

from __future__ import annotations

import math

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch.nn.parameter import is_lazy


class GradientVarianceCallback(L.Callback):
    """Every ``every_n_steps`` training steps, estimate the gradient ``repeats`` times on the current
    batch and log ``grad_var`` and ``grad_snr``.

    Contract with the LightningModule:
    - ``estimator_loss(batch) -> Tensor``: a fresh stochastic estimate of the training loss on
      ``batch`` (new samples from the model's distributions each call), i.e. the surrogate whose
      gradient the estimator produces. It must not call ``self.log`` or step optimizers.
    - ``estimator_parameters() -> Iterable[Parameter]`` (optional): the parameters whose gradient
      is measured, e.g. the encoder that parameterises the sampled distribution. Default: all
      trainable parameters.

    Logged (on_step): ``{prefix}grad_var`` = mean over parameters of the variance across the
    repeats; ``{prefix}grad_snr`` = |mean gradient| / sqrt(sum of variances) (scale-free; large is
    good). The last values are in ``self.last``, all of them in ``self.history``.

    Training is not disturbed: gradients are taken with ``torch.autograd.grad`` (``.grad`` and the
    optimizer are untouched), module buffers (EMA baselines, BatchNorm statistics) are restored
    afterwards, the RNG state is forked (the run's random stream is unchanged), and the training
    mode is restored.
    """

    def __init__(self, every_n_steps: int = 100, repeats: int = 8, prefix: str = ""):
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        if repeats < 2:
            raise ValueError(f"repeats must be >= 2 to estimate a variance, got {repeats}")
        self.every_n_steps = every_n_steps  # measure every N optimizer steps
        self.repeats = repeats  # M estimates per measurement
        self.prefix = prefix  # metric name prefix, e.g. "train/"
        self.last: dict[str, float] = {}
        self.history: list[dict[str, float]] = []
        self._last_step = -1
        self._warned = False

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step or step % self.every_n_steps != 0:
            return
        self._last_step = step
        if not hasattr(pl_module, "estimator_loss"):
            if not self._warned:
                name = type(pl_module).__name__
                rank_zero_warn(f"GradientVarianceCallback: {name} has no estimator_loss(batch); skipped")
                self._warned = True
            return
        stats = self.measure(pl_module, batch)
        stats["step"] = step
        self.last = stats
        self.history.append(stats)
        metrics = {f"{self.prefix}{key}": stats[key] for key in ("grad_var", "grad_snr")}
        # to the loggers once, at this step: a callback's self.log repeats the value at every logged step
        # until the next measurement
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        device = pl_module.device  # for monitors (early stopping on grad_snr, say)
        trainer.callback_metrics.update({k: torch.tensor(v, device=device) for k, v in metrics.items()})

    def measure(self, pl_module, batch) -> dict[str, float]:
        """M gradient estimates on ``batch``; returns grad_var, grad_snr, grad_norm (of the mean)."""
        if hasattr(pl_module, "estimator_parameters"):
            params = [p for p in pl_module.estimator_parameters() if p.requires_grad]
        else:
            params = [p for p in pl_module.parameters() if p.requires_grad]
        saved = {name: b.detach().clone() for name, b in pl_module.named_buffers() if not is_lazy(b)}
        was_training = pl_module.training
        cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
        devices = [torch.cuda.current_device()] if cuda else []  # fork the RNG streams in use
        mean = [None] * len(params)  # Welford running mean / sum of squared deviations, per tensor
        m2 = [None] * len(params)
        try:
            with torch.random.fork_rng(devices=devices), torch.enable_grad():
                for i in range(self.repeats):
                    loss = pl_module.estimator_loss(batch)
                    grads = torch.autograd.grad(loss, params, allow_unused=True)
                    for j, (p, g) in enumerate(zip(params, grads)):
                        g = torch.zeros_like(p, dtype=torch.float64) if g is None else g.detach().double()
                        if mean[j] is None:
                            mean[j], m2[j] = g.clone(), torch.zeros_like(g)
                        else:
                            delta = g - mean[j]
                            mean[j] += delta / (i + 1)
                            m2[j] += delta * (g - mean[j])
        finally:
            buffers = dict(pl_module.named_buffers())
            with torch.no_grad():
                for name, value in saved.items():
                    buffers[name].copy_(value)
            pl_module.train(was_training)
        numel = sum(p.numel() for p in params)
        var_sum = sum(float(v.sum()) for v in m2) / (self.repeats - 1) if params else 0.0
        mean_sq = sum(float((m**2).sum()) for m in mean) if params else 0.0
        grad_var = var_sum / max(numel, 1)
        snr = math.sqrt(mean_sq) / math.sqrt(var_sum) if var_sum > 0 else float("inf")
        return {"grad_var": grad_var, "grad_snr": snr, "grad_norm": math.sqrt(mean_sq)}
