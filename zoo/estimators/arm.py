"""ARM (Yin & Zhou, ICLR 2019) and DisARM (Dong, Mnih & Tucker, NeurIPS 2020) for binary variables.

Both estimate grad_phi E[f(b)], b_i ~ Bernoulli(sigmoid(phi_i)) independently, from one antithetic
pair of samples drawn with the same uniform noise u (one per variable):

    b = 1[u < sigmoid(phi)],   b~ = 1[1 - u < sigmoid(phi)]     (each is a Bernoulli(sigmoid(phi)) draw)

    ARM:     g_i = (f(b~) - f(b)) (u_i - 1/2)
    DisARM:  g_i = 1/2 (f(b) - f(b~)) (-1)^b~_i 1[b_i != b~_i] sigmoid(|phi_i|)

Both are unbiased; DisARM is ARM with u_i integrated out given (b, b~) (a Rao-Blackwellisation), so
its variance is never larger, and it is zero for a variable whose two draws agree. Neither needs
f's gradient or a relaxation: f is evaluated at the two hard samples only, as REINFORCE with a
leave-one-out baseline over 2 samples (``rloo``, n = 2) does, at the same cost. ``n`` samples per
input are n / 2 antithetic pairs, whose estimates are averaged.

Binary variables are a ``Bernoulli(logits=phi)`` or a categorical with two categories (logits l,
phi = l_1 - l_0, category 1 is b = 1). The categorical extension (ARSM, Yin et al. 2019) is not
included. f may couple every variable of one cost (the estimate of g_i uses the whole cost).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Bernoulli, Distribution

from zoo.errors import UserError
from zoo.estimators.base import (
    Estimator,
    StochasticSample,
    as_distribution,
    categorical_logits,
    check_cost,
    one_hot_sample,
)
from zoo.estimators.config import ARM as ARM_SPEC
from zoo.estimators.config import DISARM


def binary_logits(dist: Distribution, name: str) -> tuple[Tensor, bool]:
    """(phi (*B), categorical?): the logit of b = 1 of a Bernoulli or a two-category categorical."""
    logits = categorical_logits(dist)
    if logits is not None:
        if logits.shape[-1] != 2:
            raise UserError(f"estimator '{name}' handles binary variables: a categorical needs 2 categories, got "
                            f"{logits.shape[-1]} (for more, use rloo, relax or unordered_set)")
        return logits[..., 1] - logits[..., 0], True
    if isinstance(dist, Bernoulli):
        return dist.logits, False
    raise UserError(f"estimator '{name}' needs a Bernoulli or a categorical with 2 categories, got "
                    f"{type(dist).__name__}")


class ARM(Estimator):
    """Augment-REINFORCE-merge: antithetic pairs of binary samples (unbiased; Yin & Zhou 2019; binary)."""

    spec = ARM_SPEC  # own_samples: the estimate needs the uniform noise behind each pair
    rao_blackwell = False  # disarm: u integrated out given the pair

    def __init__(self, options=None, **kwargs):
        super().__init__(options, **kwargs)
        self.stats: dict[str, Tensor] = {}  # last call's diagnostics

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        phi, categorical = binary_logits(dist, self.name)  # (*B)
        n = self._n(n)
        if n % 2:
            raise UserError(f"estimator '{self.name}' draws antithetic pairs: n must be even, got n={n}")
        with torch.no_grad():
            u = torch.rand((n // 2, *phi.shape), dtype=phi.dtype, device=phi.device)  # (m, *B)
            p = torch.sigmoid(phi)
            bits = torch.cat([u < p, 1 - u < p]).long()  # (n, *B): the m draws b, then their partners b~
        if categorical:  # one-hots (n, *B, 2) under the normalised logits
            return one_hot_sample(dist, categorical_logits(dist), bits, extras={"antithetic_noise": u})
        value = bits.to(phi.dtype)  # (n, *B)
        return StochasticSample(value=value, log_prob=dist.log_prob(value), dist=dist, extras={"antithetic_noise": u})

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (n, *C)
        u = s.extras.get("antithetic_noise")
        if u is None:
            raise UserError(f"estimator '{self.name}' scores only samples from its own sample(): it needs the "
                            "uniform noise behind each antithetic pair")
        phi, _ = binary_logits(s.dist, self.name)  # (*B), with the gradient to the model
        m = u.shape[0]
        bits = (s.index if s.index is not None else s.value).to(phi.dtype)  # (n, *B)
        b, b_anti = bits[:m], bits[m:]  # (m, *B) each
        f = cost.detach()
        diff = f[:m] - f[m:]  # (m, *C): f(b) - f(b~)
        diff = diff.reshape(*diff.shape, *[1] * (b.dim() - diff.dim()))  # (m, *C, 1, ...): over B's other dims
        if self.rao_blackwell:
            sign = 1 - 2 * b_anti  # (-1)^b~
            g = 0.5 * diff * sign * (b != b_anti) * torch.sigmoid(phi.detach().abs())
        else:
            g = -diff * (u - 0.5)  # (f(b~) - f(b)) (u - 1/2)
        g = g.mean(0)  # (*B): the mean over the pairs, each input's estimate of d E[f] / d phi
        per_cost = max(f[0].numel(), 1)  # the loss averages over the inputs (the cost's C dims)
        surrogate = (g.detach() * phi).sum() / per_cost
        loss = cost.mean(0).mean() + surrogate - surrogate.detach()  # value: the mean cost
        self.stats = {"pairs_differ": (b != b_anti).float().mean(), "pair_cost_gap": diff.abs().float().mean()}
        return loss


class DisARM(ARM):
    """ARM with its noise integrated out given each pair: lower variance (unbiased; Dong et al. 2020; binary)."""

    spec = DISARM
    rao_blackwell = True
