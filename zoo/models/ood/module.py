"""Confidence-calibrated classifier (Lee, Lee, Lee & Shin, ICLR 2018), trained three ways:

- ``ce``: plain cross-entropy, the baseline;
- ``confidence``: CE + beta * KL(U || p(y|x_out)) on an explicit OOD training set (``data.ood_train``);
- ``joint``: the joint confidence loss. Each step: a D step, a G step with beta * KL(U || p(y|G(z)))
  on the D step's batch (as the authors' code), a classifier step with CE + beta * KL(U || p(y|G(z')))
  on fresh noise z' through the updated G (the paper's Algorithm 1 and the authors' code; formulas in
  ``losses.py``). The generator's noise z ~ N(0, I) is drawn by the registry's ``reparam`` estimator
  in ``noise()``;
- ``boundary_gan``: two stages, the paper's GAN loss (its eq. 3) against a *given* classifier: for
  ``classifier_epochs`` epochs the classifier alone, with the confidence loss on ``data.ood_train``;
  then it is frozen (eval mode, no gradients) and only D and G train (D step, G step as in ``joint``).
  G's samples move to the boundary of the data (the paper's 2-D toy figure; ``recipes/ood/ood_toy2d_boundary.yaml``).

Manual optimisation with up to three optimizers (classifier, generator, discriminator), each set
in the recipe. Evaluation (``evaluate.py``): accuracy, ECE before/after temperature scaling, and
for every OOD set and detector TNR@TPR95, AUROC, AUPR-in/out and detection accuracy.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Independent, Normal

from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.models.ood import evaluation as ev
from zoo.models.ood.config import GAN_MODES, OOD_SPEC
from zoo.models.ood.diagnostics import GANDiagnostics
from zoo.models.ood.losses import confidence_loss, discriminator_loss, generator_gan_loss, kl_uniform, r1_penalty
from zoo.models.ood.nets import Classifier, Discriminator, Generator
from zoo.models.ood.predict import OODAPI, predict_cli
from zoo.models.ood.replay import Replay


def _optimizer(params, o: dict) -> torch.optim.Optimizer:
    if o["name"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["beta1"], weight_decay=o["weight_decay"])
    return torch.optim.Adam(params, lr=o["lr"], betas=(o["beta1"], 0.999), weight_decay=o["weight_decay"])


class OODClassifier(OODAPI, ev.OODEvaluation, GANDiagnostics, ZooModule):
    """Confidence-calibrated OOD classifier: cross-entropy, confidence loss, or the joint GAN loss."""

    spec = OOD_SPEC  # its options, monitor (val/acc, max) and node: G's noise in the GAN modes (ood_node)
    ddp_find_unused_parameters = True  # the G and D steps leave the other nets without gradients

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        self.automatic_optimization = False
        c, d = self.cfg, self.data_info
        self._require_keys(d)
        self.input_shape = [int(s) for s in d["input_shape"]]
        self.num_classes = int(d["num_classes"])
        is_image = len(self.input_shape) == 3
        conv_gan = c.mode in GAN_MODES and "dcgan" in (c.generator, c.discriminator)
        if not is_image and (c.classifier != "mlp" or conv_gan):
            raise UserError(f"input of shape {self.input_shape} is not an image: use model.classifier=mlp "
                            "and model.generator=mlp model.discriminator=mlp")
        if c.mode in ("confidence", "boundary_gan") and not d.get("ood_train"):
            raise UserError(f"model.mode={c.mode} needs an explicit OOD training set: set data.ood_train=true "
                            "(ood_images: also data.ood_train_folder=PATH)")
        self.classifier = Classifier(c.classifier, self.input_shape, self.num_classes, c.width,
                                     d["mean"], d["std"], c.dropout)
        if c.mode in GAN_MODES:
            self.generator = Generator(c.generator, self.input_shape, c.noise_dim, c.gan_width,
                                       bounded=bool(d.get("bounded", is_image)))
            self.discriminator = Discriminator(c.discriminator, self.input_shape, c.gan_width, c.spectral_norm)
            self.estimator = self.build_estimator()
            self.init_diagnostics()
        # joint: past samples of G for the classifier's KL term (replay.py), saved in the checkpoint
        self.replay = Replay(c.replay_size, c.replay_fraction) if c.mode == "joint" and c.replay_size else None
        if c.mode == "joint" and c.g_ema > 0:  # joint: an average of G makes the classifier's samples (model.g_ema)
            self.generator_ema = copy.deepcopy(self.generator).requires_grad_(False)
        self.init_evaluation()

    # ---- the data must fit the model --------------------------------------------------------------
    def _check_fits(self, shape: list[int], classes: int, what: str, resuming: bool = False) -> None:
        """A clear error when data of another shape or class count meets this model (or, resuming, a
        checkpoint made for other data), instead of a broadcast or convolution error inside a batch."""
        mine, shape = self.input_shape, [int(s) for s in shape]
        if shape != mine:
            if len(shape) == len(mine) == 3:
                kind = " and ".join(k for k, bad in (("channels", shape[0] != mine[0]), ("size", shape[1:] != mine[1:]))
                                    if bad)
            else:
                kind = "size"
            if resuming:
                raise UserError(f"the checkpoint was trained on inputs of shape {shape}, but the data gives {mine} "
                                f"(wrong {kind}): resume with the data it was trained on")
            raise UserError(f"{what} gives inputs of shape {shape}, but the model takes {mine} "
                            f"(wrong {kind}): use data of the shape the model was trained on")
        if (classes != self.num_classes) if resuming else (classes > self.num_classes):
            built = self.data_info.get("dataset", "its data")
            raise UserError(f"{what} has {classes} classes; the model has {self.num_classes} (built for {built})")

    def check_data(self, info: dict) -> None:
        """An OOD datamodule whose inputs and classes fit the model (called by ``ZooModule.setup``). Its OOD sets
        name the validation and test metrics: a model trained before a set was added is scored on it too."""
        self._require_keys(info)
        self._check_fits(info["input_shape"], info["num_classes"], f"the data ({info.get('dataset', '?')})")
        self.data_info["ood_sets"] = list(info["ood_sets"])

    @staticmethod
    def _require_keys(info: dict) -> None:
        for key in ("input_shape", "num_classes", "mean", "std", "ood_sets"):
            if key not in info:
                raise UserError(f"the ood model needs data_info['{key}'] from an OOD datamodule: use "
                                "data.name=ood_digits, ood_toy2d or ood_images")

    def setup(self, stage: str) -> None:
        super().setup(stage)  # check_data on the datamodule
        epochs = self.trainer.max_epochs if self._trainer is not None else None
        if stage == "fit" and self.cfg.mode == "boundary_gan" and epochs is not None \
                and 0 <= epochs <= self.cfg.classifier_epochs and not self.trainer.fast_dev_run:
            raise UserError(f"model.mode=boundary_gan trains G only after model.classifier_epochs="
                            f"{self.cfg.classifier_epochs}: set trainer.max_epochs above it (got {epochs})")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if self.cfg.mode in GAN_MODES:
            checkpoint["gan_epoch_sums"] = self.diagnostics_state()
        if self.replay is not None:
            checkpoint["replay"] = self.replay.state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # runs before the state dict is loaded: resuming with other data is a clear error, not a size mismatch
        info = checkpoint.get("hyper_parameters", {}).get("data_info") or {}
        if "input_shape" in info:
            self._check_fits(info["input_shape"], int(info.get("num_classes", self.num_classes)),
                             "the checkpoint", resuming=True)
        if self.cfg.mode in GAN_MODES and "gan_epoch_sums" in checkpoint:
            self.load_diagnostics_state(checkpoint["gan_epoch_sums"])
        if self.replay is not None and "replay" in checkpoint:
            self.replay.load(checkpoint["replay"])

    # ---- the stochastic node ----------------------------------------------------------------------
    def noise(self, n: int) -> Tensor:
        """z ~ N(0, I): (n, Z), drawn by the registry estimator (reparam: a pathwise sample)."""
        zero = torch.zeros(n, self.cfg.noise_dim, device=self.device, dtype=self.dtype)
        s = self.estimator.sample(Independent(Normal(zero, torch.ones_like(zero)), 1), n=1)
        return s.value[0]  # (n, Z)

    def generate(self, n: int) -> Tensor:
        return self.generator(self.noise(n))  # (n, *input_shape)

    # ---- optimisation ------------------------------------------------------------------------------
    def configure_optimizers(self):
        c = self.cfg
        opts = [_optimizer(self.classifier.parameters(), c.classifier_optim)]
        if c.mode in GAN_MODES:
            opts += [_optimizer(self.generator.parameters(), c.generator_optim),
                     _optimizer(self.discriminator.parameters(), c.discriminator_optim)]
        if not c.lr_drop_epochs:
            return opts
        milestones = sorted(int(e) for e in c.lr_drop_epochs)
        return opts, [torch.optim.lr_scheduler.MultiStepLR(o, milestones, gamma=c.lr_drop) for o in opts]

    def on_train_epoch_end(self) -> None:
        # manual optimisation: Lightning leaves the schedulers (model.lr_drop_epochs) to the model
        schedulers = self.lr_schedulers() if self.cfg.lr_drop_epochs else None
        for s in schedulers if isinstance(schedulers, list) else [schedulers] if schedulers else []:
            s.step()

    def _step(self, opt: torch.optim.Optimizer, loss: Tensor) -> None:
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()

    @torch.no_grad()
    def _update_generator_ema(self) -> None:
        """generator_ema's weights <- g_ema * theirs + (1 - g_ema) * G's; its BatchNorm statistics: G's."""
        for avg, p in zip(self.generator_ema.parameters(), self.generator.parameters()):
            avg.lerp_(p, 1.0 - self.cfg.g_ema)
        for avg, b in zip(self.generator_ema.buffers(), self.generator.buffers()):
            avg.copy_(b)

    def judge(self, x: Tensor) -> Tensor:
        """D's logits (B,) on x, through instance noise N(0, sigma^2) per pixel where model.instance_noise > 0."""
        c = self.cfg
        sigma = c.instance_noise
        if c.instance_noise_anneal and self._trainer is not None and self.trainer.max_epochs:
            sigma *= max(0.0, 1.0 - self.current_epoch / self.trainer.max_epochs)
        return self.discriminator(x + sigma * torch.randn_like(x) if sigma > 0 else x)

    def discriminator_loss(self, x: Tensor, fake: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """D's step loss on real x and G's samples fake (B, ...), D's logits on each (B,), and the R1 term
        E||grad_x D(x)||^2 (None with model.r1_gamma=0). With model.replay_d, a share of fake is replayed."""
        c = self.cfg
        if c.replay_d and self.replay is not None:
            fake = self.replay.replace(fake)
        if c.r1_gamma > 0:
            x = x.detach().requires_grad_(True)
        d_real, d_fake = self.judge(x), self.judge(fake)
        loss = discriminator_loss(d_real, d_fake)
        r1 = r1_penalty(d_real, x) if c.r1_gamma > 0 else None
        return (loss if r1 is None else loss + 0.5 * c.r1_gamma * r1), d_real, d_fake, r1

    def generator_loss(self, fake: Tensor) -> tuple[Tensor, Tensor]:
        """The G step's loss GAN term + beta * KL(U || p(y|G(z))) and its KL term, for a batch G(z)."""
        g_kl = kl_uniform(self.classifier(fake)).mean()
        return generator_gan_loss(self.judge(fake), self.cfg.saturating) + self.cfg.beta * g_kl, g_kl

    def _freeze_classifier(self) -> None:
        """boundary_gan's second stage: the classifier of stage 1, fixed. Eval mode (BatchNorm keeps its running
        statistics, dropout is off: G's samples neither train nor perturb it) and no parameter gradients (the
        KL term's gradient still reaches G through its input). Re-asserted every step, since Lightning's
        loops put the module back in train mode (a new epoch, after validation, on resume)."""
        self.classifier.eval()
        self.classifier.requires_grad_(False)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        c = self.cfg
        if isinstance(batch, dict):  # confidence mode: {"in": (x, y), "out": (x_out, -1)}
            (x, y), x_out = batch["in"], batch["out"][0]
        else:
            (x, y), x_out = batch, None
        opts = self.optimizers()
        opts = opts if isinstance(opts, list) else [opts]
        metrics = {}
        gan_stage = c.mode == "joint" or (c.mode == "boundary_gan" and self.current_epoch >= c.classifier_epochs)
        if gan_stage:
            opt_c, opt_g, opt_d = opts
            if c.mode == "boundary_gan":
                self._freeze_classifier()
            fake = self.generate(len(x))
            # (1) D step: max log D(x) + log(1 - D(G(z))) [- r1_gamma / 2 * E||grad_x D(x)||^2]
            d_loss, d_real, d_fake, r1 = self.discriminator_loss(x, fake.detach())
            self._step(opt_d, d_loss)
            # (2) G step: min GAN term + beta * KL(U || p(y|G(z))); D gets gradients here too, but its own
            # step zeroes them before use (joint: the classifier's as well; boundary_gan: it has none, frozen)
            g_loss, g_kl = self.generator_loss(fake)
            self._step(opt_g, g_loss)
            if c.mode == "joint" and c.g_ema > 0:
                self._update_generator_ema()
            metrics.update({"train/d_loss": d_loss.detach(), "train/g_loss": g_loss.detach(),
                            "train/g_kl": g_kl.detach(), "train/d_real": torch.sigmoid(d_real).mean().detach(),
                            "train/d_fake": torch.sigmoid(d_fake).mean().detach()})
            self.add_step({k.split("/")[1]: v for k, v in metrics.items()})
            if r1 is not None:
                metrics["train/r1"] = r1.detach()
            if c.mode == "boundary_gan":
                self.log_train(metrics, batch_size=len(x), prog_bar=("train/g_loss",))
                return
            # (3) joint: the classifier sees a fresh batch of the *updated* G as OOD (the paper's Algorithm 1
            # and its authors' code draw new z after G's step), not the batch G was just trained on
            with torch.no_grad():
                x_out = (self.generator_ema if c.g_ema > 0 else self.generator)(self.noise(len(x)))
                if self.replay is not None:  # a share of the batch from G's past samples (model.replay_size)
                    x_out = self.replay.mix(x_out)
        opt_c = opts[0]
        logits = self.classifier(x)  # (B, K)
        logits_out = self.classifier(x_out) if (x_out is not None and c.mode != "ce") else None
        loss = confidence_loss(logits, y, logits_out, c.beta)
        self._step(opt_c, loss)
        metrics["train/loss"] = loss.detach()
        metrics["train/acc"] = (logits.argmax(-1) == y).float().mean().detach()
        if logits_out is not None:
            metrics["train/kl_out"] = kl_uniform(logits_out).mean().detach()
            if gan_stage:
                self.add_step({"kl_out": metrics["train/kl_out"]})
        self.log_train(metrics, batch_size=len(x), prog_bar=("train/loss",))

    def estimator_loss(self, batch: Any) -> Tensor:
        """A fresh estimate of G's loss (for GradientVarianceCallback): the GAN modes only."""
        if self.cfg.mode not in GAN_MODES:
            raise UserError("the grad_variance callback needs model.mode=joint or boundary_gan (the modes with z)")
        x = batch["in"][0] if isinstance(batch, dict) else batch[0]
        return self.generator_loss(self.generate(len(x)))[0]

    def estimator_parameters(self):
        return list(self.generator.parameters())

    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
