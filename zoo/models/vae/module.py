"""What the Gaussian and the discrete VAE share: decoder likelihoods, the ELBO and its
importance-weighted tightening, logging and pictures; the inference API and `zoo.predict` are predict.py's.

For one image x the loss is the negative ELBO (seed 001, "Auto-Encoder (VAE)"):

    L(x) = -E_{z ~ q(z|x)}[log p(x|z)] + KL(q(z|x) || p(z))   >=   -log p(x)
           `------ reconstruction -----'   `-- closed form --'

The reconstruction expectation is estimated by the registry estimator named in the recipe
(``reparam`` for Gaussians; ``gumbel_softmax``/``reinforce``/``rloo``/... for categoricals); the KL
is computed exactly. The importance-weighted bound (Burda et al. 2016)

    log p(x) >= log (1/k) sum_i p(x|z_i) p(z_i) / q(z_i|x),   z_i ~ q(z|x)

is >= the ELBO and tends to log p(x) as k grows; ``test/iwae_nll`` is its negation with
k = ``iwae_samples``. All numbers are nats per image.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch import Tensor, nn
from torch.distributions import Distribution, Normal

from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.models.vae import plots
from zoo.models.vae.nets import build_nets
from zoo.models.vae.predict import VAEAPI, predict_cli


class LatentVAE(VAEAPI, ZooModule):
    """Base class; subclasses define the latent space (posterior, prior, KL, sampling)."""

    monitor, monitor_mode = "val/loss", "min"

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        c = self.cfg
        self.check_data(self.data_info)
        self.image_shape = [int(s) for s in self.data_info["image_shape"]]  # [C, H, W]
        if c.likelihood == "bernoulli" and self.data_info.get("binarize") == "none":
            raise UserError("model.likelihood=bernoulli needs binary pixels: set data.binarize=static or "
                            "dynamic, or use model.likelihood=gaussian for grey values")
        self.encoder, self.decoder = build_nets(c.arch, self.image_shape, c.hidden, c.channels,
                                                self.encoder_out_dim(), self.latent_numel())
        if c.likelihood == "gaussian" and c.decoder_std <= 0:
            self.raw_std = nn.Parameter(torch.zeros(self.image_shape))  # std = 0.01 + softplus(raw)
        self.estimator = self.build_estimator()  # checked against `stochastic_node` (subclasses)
        self._val_images: Tensor | None = None

    def before_fit(self) -> None:
        """A fresh run's note on a pairing the recipes never use (allowed: a Gaussian fit to 0/1 pixels)."""
        if self.cfg.likelihood == "gaussian" and self.data_info.get("binarize") != "none" and rank_zero_only.rank == 0:
            print(f"note: model.likelihood=gaussian on binarised pixels (data.binarize="
                  f"{self.data_info.get('binarize')}): the Gaussian decoder is meant for grey values, "
                  "data.binarize=none", file=sys.stderr)

    def check_data(self, info: dict) -> None:
        """An image datamodule of the VAEs (omniglot's info also has an image_shape, but its batches
        are few-shot tasks), with the image shape the nets were built for."""
        if not info.get("image_shape") or "binarize" not in info:
            raise UserError("the VAE needs data_info['image_shape'] and ['binarize'] from an image datamodule: "
                            "use data.name=digits or data.name=mnist")
        shape, mine = [int(s) for s in info["image_shape"]], [int(s) for s in self.data_info["image_shape"]]
        if shape != mine:
            raise UserError(f"the data ({info.get('dataset', '?')}) gives images of shape {shape}, but the model "
                            f"takes {mine}: use data of the shape it was trained on")

    # ---- the latent space: subclasses -------------------------------------------------------
    def encoder_out_dim(self) -> int: ...
    def latent_numel(self) -> int: ...
    def posterior(self, x: Tensor) -> Distribution: ...  # q(z|x), batch shape (B,)
    def kl(self, q: Distribution) -> Tensor: ...  # KL(q || p) per image (B,)
    def draw(self, q: Distribution, k: int) -> Tensor: ...  # k exact samples (k, B, *latent)
    def log_ratio(self, q: Distribution, z: Tensor) -> Tensor: ...  # log p(z) - log q(z|x): (k, B)
    def code(self, q: Distribution) -> Tensor: ...  # a point code (B, *latent): mean / mode
    def prior_draw(self, n: int, g: torch.Generator) -> Tensor: ...  # (n, *latent)
    def traversal(self, x: Tensor) -> tuple[Tensor, int]: ...  # images (R * C, ...), C per row

    # ---- decoder and likelihood -------------------------------------------------------------
    def decode(self, z: Tensor) -> Tensor:
        """z (*S, *latent) -> decoder outputs (*S, C, H, W) (Bernoulli logits or Gaussian means)."""
        lead = z.shape[: z.dim() - self.latent_ndim]
        out = self.decoder(z.reshape(-1, self.latent_numel()))
        return out.view(*lead, *self.image_shape)

    def pixel_std(self) -> Tensor:
        if self.cfg.decoder_std > 0:
            return torch.tensor(self.cfg.decoder_std, device=self.device, dtype=self.dtype)
        return 0.01 + F.softplus(self.raw_std)

    def log_lik(self, x: Tensor, out: Tensor) -> Tensor:
        """log p(x|z) summed over pixels: x (B, C, H, W), out (S, B, C, H, W) -> (S, B)."""
        x = x.expand_as(out)
        if self.cfg.likelihood == "bernoulli":
            ll = -F.binary_cross_entropy_with_logits(out, x, reduction="none")
        else:
            ll = Normal(out, self.pixel_std()).log_prob(x)
        return ll.flatten(-3).sum(-1)

    def mean_image(self, out: Tensor) -> Tensor:
        """Decoder outputs -> E[x|z] in [0, 1] (what pictures show)."""
        return torch.sigmoid(out) if self.cfg.likelihood == "bernoulli" else out.clamp(0, 1)

    # ---- objectives ---------------------------------------------------------------------------
    def kl_weight(self) -> float:
        w = self.cfg.kl_warmup_steps
        return self.cfg.beta * (min(1.0, self.global_step / w) if w > 0 else 1.0)

    def losses(self, x: Tensor, kl_weight: float = 1.0) -> tuple[Tensor, Tensor, Tensor]:
        """One stochastic training estimate: (surrogate loss, reconstruction (n, B), KL (B,)); with a
        per-variable estimator (one latent variable) the reconstruction is its estimate of the batch mean, (1, B).

        The surrogate's gradient is the chosen estimator's estimate of grad of the (beta-weighted)
        negative ELBO; its reconstruction uses the estimator's sample (relaxed for gumbel_softmax)."""
        q = self.posterior(x)
        s = self.estimator.sample(q, n=self.cfg.n_samples or None)  # value (n, B, *latent)
        def reconstruction_cost(value: Tensor) -> Tensor:  # (n, B, *latent), hard or relaxed -> (n, B)
            return -self.log_lik(x, self.decode(value))

        rec = reconstruction_cost(s.value)  # (n, B)
        kl = self.kl(q)  # (B,)
        # relax with rebar evaluates the cost at relaxed samples too
        extra = {"cost_fn": reconstruction_cost} if getattr(self.estimator, "wants_cost_fn", False) else {}
        per_variable = getattr(self.estimator, "wants_variable_cost", False)  # the seam allows it for one variable
        cost = rec.unsqueeze(-1) if per_variable else rec  # (n, B, 1): the one latent variable's own cost
        rec_term = self.estimator.loss(s, cost, context=x.flatten(1), **extra)
        if per_variable:  # the n values are every category or n distinct ones, not i.i.d. draws: their plain
            rec = rec_term.detach().expand(1, x.shape[0])  # mean is no estimate; the estimator's own is (1, B)
        return rec_term + kl_weight * kl.mean(), rec, kl

    def estimator_loss(self, batch: Any) -> Tensor:
        """A fresh stochastic estimate of the training loss (for GradientVarianceCallback)."""
        return self.losses(batch[0], self.kl_weight())[0]

    def estimator_parameters(self):
        """The encoder's parameters: the ones whose gradient the estimator is responsible for."""
        return list(self.encoder.parameters())

    def iwae_nll(self, x: Tensor, q: Distribution, k: int, chunk: int = 50) -> Tensor:
        """-log (1/k) sum_i p(x, z_i) / q(z_i|x), z_i ~ q: (B,). Exact draws, never relaxed ones."""
        log_w = []
        for start in range(0, k, chunk):
            z = self.draw(q, min(chunk, k - start))  # (m, B, *latent)
            log_w.append(self.log_lik(x, self.decode(z)) + self.log_ratio(q, z))  # (m, B)
        return -(torch.logsumexp(torch.cat(log_w), 0) - math.log(k))

    def eval_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Distribution]:
        """Exact-sample ELBO terms: (reconstruction (B,), KL (B,), q)."""
        q = self.posterior(x)
        rec = -self.log_lik(x, self.decode(self.draw(q, 1)))[0]
        return rec, self.kl(q), q

    # ---- Lightning ----------------------------------------------------------------------------
    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.cfg.lr)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x = batch[0]
        self.estimator.set_step(self.global_step)
        w = self.kl_weight()
        loss, rec, kl = self.losses(x, w)
        B = x.shape[0]
        rec, kl = rec.mean().detach(), kl.mean().detach()
        metrics = {"train/loss": rec + kl, "train/objective": loss.detach(), "train/rec": rec,
                   "train/kl": kl, "train/kl_weight": w}
        metrics.update({f"train/estimator_{k}": v for k, v in getattr(self.estimator, "stats", {}).items()})
        self.log_train(metrics, batch_size=B, prog_bar=("train/loss",))
        return loss

    def _seeded(self, batch_idx: int, offset: int):
        """Fork the RNG so evaluation draws depend only on (eval_seed, batch): reproducible metrics
        that leave the training RNG untouched."""
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        ctx = torch.random.fork_rng(devices=devices)
        ctx.__enter__()
        torch.manual_seed(self.cfg.eval_seed * 1_000_003 + offset + batch_idx)
        return ctx

    def _eval_step(self, batch: Any, batch_idx: int, split: str) -> None:
        x = batch[0]
        ctx = self._seeded(batch_idx, 0 if split == "val" else 500_000)
        try:
            rec, kl, q = self.eval_terms(x)
            B = x.shape[0]
            metrics = {f"{split}/loss": (rec + kl).mean(), f"{split}/rec": rec.mean(),
                       f"{split}/kl": kl.mean()}
            self.log_dict(metrics, batch_size=B, prog_bar=(split == "val"), sync_dist=True)
            k = self.cfg.iwae_samples if split == "test" else self.cfg.val_iwae_samples
            if k > 0:
                self.log(f"{split}/iwae_nll", self.iwae_nll(x, q, k).mean(), batch_size=B, sync_dist=True)
            self.eval_extra(split, x, q)
        finally:
            ctx.__exit__(None, None, None)
        if batch_idx == 0:
            self._val_images = x[:32].detach()

    def eval_extra(self, split: str, x: Tensor, q: Distribution) -> None:
        """Subclass hook for more per-batch evaluation statistics."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "test")

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        last = self.trainer.max_epochs is not None and self.current_epoch + 1 >= self.trainer.max_epochs
        if (self.current_epoch + 1) % max(1, self.cfg.plot_every_n_epochs) == 0 or last:
            self.save_pictures()

    def on_test_epoch_end(self) -> None:
        self.save_pictures()

    # ---- pictures -------------------------------------------------------------------------------
    @torch.no_grad()
    def save_pictures(self) -> None:
        was_training = self.training
        self.eval()
        self.save_image("samples", plots.upscale(self.sample(64, seed=0).cpu()), nrow=8, padding=1, pad_value=0.5)
        if self._val_images is not None:
            x = self._val_images
            self.save_image("reconstructions", plots.upscale(plots.pairs(x.cpu(), self.reconstruct(x).cpu())),
                            nrow=8, padding=1, pad_value=0.5)
            images, ncol = self.traversal(x[:1])
            self.save_image("traversal", plots.upscale(images.cpu()), nrow=ncol, padding=1, pad_value=0.5)
        self.train(was_training)

    # ---- python -m zoo.predict --------------------------------------------------------------------
    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
