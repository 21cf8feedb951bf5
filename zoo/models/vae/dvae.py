"""Discrete VAE: N categorical latents of K classes (the estimator benchmark's 20 x 10).

    q(z|x) = prod_n Cat(z_n; softmax(logits_n(x))),   p(z) = prod_n Uniform{1..K},
    p(x|z) = Bernoulli(decoder(one_hot(z)))   (the decoder reads the N one-hots, flattened)

No pathwise gradient exists through a categorical draw ("Deep Learning" (Goodfellow et al.), 20.9.1
"Back-Propagating through Discrete Stochastic Operations"), so grad_phi E_q[-log p(x|z)] is whatever
estimator the recipe names (Xu's softmax lecture notes):
- ``reinforce`` (score function, with a baseline: ema, batch_mean, learned) and ``rloo`` (n
  samples, leave-one-out baseline): unbiased, high variance;
- ``relax``: REINFORCE with a learned control variate of the relaxed sample and the image, unbiased
  (``rebar: true`` adds REBAR's eta * f(softmax(z / tau)), the decoder's cost at the relaxed sample);
- ``arm``, ``disarm`` (binary latents, ``n_classes: 2``): an antithetic pair of samples per image,
  unbiased (``recipes/vae/dvae_digits_binary.yaml``);
- ``gumbel_softmax``: the decoder reads relaxed one-hots softmax((logits + G) / tau): biased, low
  variance (its training loss is a *relaxed* objective, not the ELBO);
- ``straight_through``: hard one-hots forward, the relaxed Jacobian backward: biased.
``expectation`` would need all K^N = 10^20 joint configurations: the node declares no per-variable
cost, so the recipe loader refuses it (and ``unordered_set``) before anything is built.

The KL to the uniform prior is exact: KL(q || U) = sum_n (log K - H(q_n)). Validation and test
losses always decode exact categorical draws, so they are true negative ELBOs whatever the
training estimator.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.distributions import Categorical, Distribution, kl_divergence

from zoo.models.vae.config import DVAE_SPEC
from zoo.models.vae.module import LatentVAE


class DiscreteVAE(LatentVAE):
    """Discrete VAE: N x K categorical latents trained with any registry estimator; exact KL to uniform."""

    spec = DVAE_SPEC  # its options and its node: N x K categoricals (dvae_node)
    latent_ndim = 2

    def encoder_out_dim(self) -> int:
        return self.cfg.n_latents * self.cfg.n_classes

    def latent_numel(self) -> int:
        return self.cfg.n_latents * self.cfg.n_classes

    def posterior(self, x: Tensor) -> Distribution:
        logits = self.encoder(x).view(-1, self.cfg.n_latents, self.cfg.n_classes)  # (B, N, K)
        return Categorical(logits=logits)  # batch (B, N)

    def kl(self, q: Distribution) -> Tensor:
        uniform = Categorical(logits=torch.zeros_like(q.logits))
        return kl_divergence(q, uniform).sum(-1)  # (B,) = sum_n log K - H(q_n)

    def draw(self, q: Distribution, k: int) -> Tensor:
        return F.one_hot(q.sample((k,)), self.cfg.n_classes).to(q.logits.dtype)  # (k, B, N, K)

    def log_ratio(self, q: Distribution, z: Tensor) -> Tensor:
        log_q = q.log_prob(z.argmax(-1)).sum(-1)  # (k, B)
        return -self.cfg.n_latents * math.log(self.cfg.n_classes) - log_q

    def code(self, q: Distribution) -> Tensor:
        return F.one_hot(q.logits.argmax(-1), self.cfg.n_classes).to(q.logits.dtype)  # (B, N, K): the mode

    def prior_draw(self, n: int, g: torch.Generator) -> Tensor:
        idx = torch.randint(self.cfg.n_classes, (n, self.cfg.n_latents), generator=g, device=g.device)
        return F.one_hot(idx, self.cfg.n_classes).float()  # (n, N, K)

    def traversal(self, x: Tensor) -> tuple[Tensor, int]:
        """Rows: the ``traversal_latents`` latents with the largest KL for x[0] (the ones it uses);
        columns: that latent set to class 0..K-1, the others at the posterior mode of x[0]."""
        q = self.posterior(x[:1])
        z0 = self.code(q)[0]  # (N, K)
        kl_n = math.log(self.cfg.n_classes) - q.entropy()[0]  # (N,) per-latent KL to uniform
        R, K = min(self.cfg.traversal_latents, self.cfg.n_latents), self.cfg.n_classes
        latents = kl_n.argsort(descending=True)[:R].tolist()
        z = z0.repeat(R, K, 1, 1)  # (R, K, N, K)
        eye = torch.eye(K, device=z.device)
        for r, n in enumerate(latents):
            z[r, :, n] = eye
        return self.mean_image(self.decode(z)).flatten(0, 1), K  # (R * K, C, H, W)
