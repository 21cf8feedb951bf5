"""MAML as a LightningModule: one Lightning batch = one meta-batch of tasks (Finn et al. 2017).

The meta-loss (``meta.py``) is the mean query loss after ``inner_steps`` inner gradient steps;
Lightning's automatic optimisation calls ``backward`` on it (through the inner steps unless
``first_order``) and steps Adam on theta (and on the per-parameter inner learning rates with
``meta_sgd``). Validation and test (``evaluation.py``) adapt on fixed held-out tasks and report the query
loss (and accuracy for classification) after 0, 1, ..., ``eval_inner_steps`` steps, with 95 % intervals.

``inner_steps: 0`` is the paper's "pretrained on all tasks" baseline: theta is trained on the tasks'
data directly (no adaptation in training); evaluation fine-tunes it with the same inner steps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.core.memory import created_bytes
from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.models.maml import meta
from zoo.models.maml.config import MAML_SPEC
from zoo.models.maml.evaluation import MAMLEvaluation, accuracy
from zoo.models.maml.nets import MLP, ConvNet
from zoo.models.maml.predict import MAMLAPI, predict_cli


class MAML(MAMLEvaluation, MAMLAPI, ZooModule):
    """Model-agnostic meta-learning: batched (vmap) second-/first-order meta-gradients, Meta-SGD option."""

    spec = MAML_SPEC  # its options; monitor val/loss, min

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        c, info = self.cfg, self.data_info
        self.check_data(info)
        self.task = info["task"]
        if self.task == "regression":
            self.net = MLP(info.get("in_dim", 1), info.get("out_dim", 1), c.hidden, c.layers)
            if c.init == "paper":
                self.net.paper_init()
            self.loss_fn, self.metric = F.mse_loss, None
        else:
            self.net = ConvNet(info["n_way"], info.get("image_shape", [1, 28, 28])[0], c.filters)
            self.loss_fn, self.metric = F.cross_entropy, accuracy
        # Meta-SGD: one learned step size per parameter entry ('.' is not allowed in module names)
        self.inner_lrs = nn.ParameterDict({
            name.replace(".", "__"): nn.Parameter(torch.full_like(p, c.inner_lr))
            for name, p in self.net.named_parameters()} if c.meta_sgd else {})

    def check_data(self, info: dict) -> None:
        """A few-shot datamodule (batches of tasks: digits' plain batches fail deep in the adaptation
        code), with the task type and sizes the net was built for."""
        task = info.get("task")
        if task not in ("regression", "classification"):
            got = "none" if task is None else f"'{task}'" + (" (model maml_rl's)" if task == "nav2d" else "")
            raise UserError(f"maml needs a few-shot datamodule (data_info['task']: 'regression' or "
                            f"'classification'), and this one's task is {got}: use data.name=sinusoid or omniglot")
        for key in ("task", "n_way", "in_dim", "out_dim"):
            if info.get(key) != self.data_info.get(key):
                raise UserError(f"the data gives {key}={info.get(key)!r}, but the model was built for "
                                f"{key}={self.data_info.get(key)!r}: use data like those it was trained on")

    # ---- the pieces meta.py needs ------------------------------------------------------------
    def params(self) -> dict[str, Tensor]:
        return dict(self.net.named_parameters())

    def alpha(self, evaluation: bool = False) -> float | dict[str, Tensor]:
        if evaluation and self.cfg.eval_inner_lr > 0:
            return self.cfg.eval_inner_lr
        if self.cfg.meta_sgd:
            return {name: self.inner_lrs[name.replace(".", "__")] for name in self.params()}
        return self.cfg.inner_lr

    def path(self) -> str:
        return meta.resolve_path(self.cfg.path, self.task == "classification", self.device, self.cfg.first_order)

    def meta_loss(self, batch: tuple[Tensor, ...], path: str | None = None) -> Tensor:
        fn = meta.META_LOSSES[path or self.path()]
        return fn(self.net, self.params(), self.alpha(), tuple(batch), self.loss_fn, self.cfg.inner_steps,
                  self.cfg.first_order)

    def curve(self, batch: tuple[Tensor, ...], steps: int | None = None) -> tuple[Tensor, Tensor | None]:
        """(T, steps + 1) query losses (and accuracies) after 0..steps fine-tuning steps."""
        steps = self.cfg.eval_inner_steps if steps is None else steps
        return meta.adaptation_curve(self.net, self.params(), self.alpha(evaluation=True), tuple(batch),
                                     self.loss_fn, steps, self.metric)

    def step_bytes(self, datamodule) -> tuple[int, str]:
        """Memory of one meta-training step: that of a meta-batch of 8 tasks (their data, the inner steps'
        graphs and adapted weights) x tasks / 8 (see ``zoo.core.memory.check_step_fits``)."""
        tasks, probe = datamodule.cfg.meta_batch, 8
        small = datamodule.train_set.with_tasks(probe)
        per_task = created_bytes(lambda: self.meta_loss(small[0])) / probe
        return int(per_task * tasks), f"data.meta_batch={tasks} (about {per_task / 1024:.0f} kB a task)"

    # ---- Lightning -----------------------------------------------------------------------------
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.cfg.lr)

    def training_step(self, batch: tuple[Tensor, ...], batch_idx: int) -> Tensor:
        loss = self.meta_loss(batch)
        self.log_train({"train/meta_loss": loss.detach()}, batch_size=len(batch[0]), prog_bar=("train/meta_loss",))
        return loss

    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
