"""What the Gaussian and the discrete VAE share: decoder likelihoods and the ELBO; its importance-weighted
tightening, validation, test and pictures are evaluation.py's, the inference API and `zoo.predict` predict.py's.

For one image x the loss is the negative ELBO (Xu's softmax lecture notes, "Auto-Encoder (VAE)"):

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

import sys
from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch import Tensor, nn
from torch.distributions import Distribution, Normal

from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.models.vae.evaluation import VAEEvaluation
from zoo.models.vae.nets import build_nets
from zoo.models.vae.predict import VAEAPI, predict_cli


class LatentVAE(VAEEvaluation, VAEAPI, ZooModule):
    """Base class; subclasses define the latent space (posterior, prior, KL, sampling)."""

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

    # ---- python -m zoo.predict --------------------------------------------------------------------
    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
