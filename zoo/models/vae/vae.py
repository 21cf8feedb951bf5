"""Gaussian VAE (Kingma & Welling 2014; Xu's softmax lecture notes "Auto-Encoder (VAE)"; the CS 182/282A
notes, "Variational Autoencoders (VAE)").

    q(z|x) = N(mu(x), diag sigma^2(x)),   p(z) = N(0, I),   p(x|z) = Bernoulli / Gaussian(decoder(z))

z is drawn by the registry's ``reparam`` estimator (z = mu + sigma * eps through ``rsample``), so the
reconstruction gradient is pathwise. The KL term has the closed form of Xu's
notes' "KL between two Gaussian distributions" with mu_2 = 0, Sigma_2 = I:

    KL = 1/2 sum_d (sigma_d^2 + mu_d^2 - 1 - log sigma_d^2),

computed by ``torch.distributions.kl_divergence`` (tests check it against that formula and
against Monte Carlo).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Distribution, Independent, Normal, kl_divergence

from zoo.models.vae.config import VAE_SPEC
from zoo.models.vae.module import LatentVAE


class VAE(LatentVAE):
    """Gaussian VAE: re-parameterised N(mu, sigma^2) latent, closed-form KL, Bernoulli/Gaussian decoder."""

    spec = VAE_SPEC  # its options and its node, z ~ N(mu, sigma^2) feeding a differentiable decoder
    latent_ndim = 1

    def encoder_out_dim(self) -> int:
        return 2 * self.cfg.latent_dim  # (mu, log sigma^2)

    def latent_numel(self) -> int:
        return self.cfg.latent_dim

    def posterior(self, x: Tensor) -> Distribution:
        mu, logvar = self.encoder(x).chunk(2, dim=-1)  # (B, D) each
        std = torch.exp(0.5 * logvar.clamp(-15.0, 10.0))
        return Independent(Normal(mu, std), 1)  # batch (B,), event (D,)

    def prior(self) -> Distribution:
        zero = torch.zeros(self.cfg.latent_dim, device=self.device, dtype=self.dtype)
        return Independent(Normal(zero, torch.ones_like(zero)), 1)

    def kl(self, q: Distribution) -> Tensor:
        return kl_divergence(q, self.prior())  # (B,), closed form

    def draw(self, q: Distribution, k: int) -> Tensor:
        return q.sample((k,))  # (k, B, D)

    def log_ratio(self, q: Distribution, z: Tensor) -> Tensor:
        return self.prior().log_prob(z) - q.log_prob(z)  # (k, B)

    def code(self, q: Distribution) -> Tensor:
        return q.mean  # (B, D)

    def prior_draw(self, n: int, g: torch.Generator) -> Tensor:
        return torch.randn(n, self.cfg.latent_dim, generator=g, device=g.device)  # (n, D)

    # ---- diagnostics ------------------------------------------------------------------------------
    def on_test_epoch_start(self) -> None:
        self._test_means: list[Tensor] = []

    def eval_extra(self, split: str, x: Tensor, q: Distribution) -> None:
        if split == "test" and hasattr(self, "_test_means"):
            self._test_means.append(q.mean.detach())

    def on_test_epoch_end(self) -> None:
        means = getattr(self, "_test_means", [])
        means = torch.cat(means) if means else torch.zeros(0, self.cfg.latent_dim, device=self.device, dtype=self.dtype)
        if len(means) > 1:
            # "Importance Weighted Autoencoders": units whose posterior mean varies across inputs carry information
            active = (means.var(0) > self.cfg.active_threshold).sum().float()
            self.log("test/active_units", active, sync_dist=True)
        super().on_test_epoch_end()

    def traversal(self, x: Tensor) -> tuple[Tensor, int]:
        """Rows: the ``traversal_dims`` dimensions with the largest KL for input x[0]; columns:
        z_d from -range to +range, every other dimension at the posterior mean of x[0]."""
        q = self.posterior(x[:1])
        mu, std = q.base_dist.loc[0], q.base_dist.scale[0]  # (D,)
        kl_d = 0.5 * (std**2 + mu**2 - 1 - 2 * std.log())  # per-dimension closed-form KL
        dims = kl_d.argsort(descending=True)[: self.cfg.traversal_dims]
        values = torch.linspace(-self.cfg.traversal_range, self.cfg.traversal_range, 9, device=self.device,
                                dtype=self.dtype)
        z = mu.repeat(len(dims), len(values), 1)  # (R, C, D)
        for r, d in enumerate(dims.tolist()):
            z[r, :, d] = values
        return self.mean_image(self.decode(z)).flatten(0, 1), len(values)  # (R * C, C, H, W)
