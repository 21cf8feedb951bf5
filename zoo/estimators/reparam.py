"""Pathwise (re-parameterisation) gradient: z = g(eps, theta), eps ~ p(eps) (Xu's softmax lecture notes).

Because p(eps) does not depend on theta, grad E[f(z)] = E[grad f(g(eps, theta))]: the gradient goes
through the sample itself. Unbiased, and usually far lower variance than the score function
(the notes' example: ~100x lower at a=2, b=3). Needs a distribution with ``rsample``; torch
provides it for Normal, MultivariateNormal, LowRankMultivariateNormal, Laplace, Exponential,
Gamma, Beta, Dirichlet, LogNormal, Uniform, Cauchy, StudentT, RelaxedOneHotCategorical, ...
Discrete distributions have none (a step function has zero gradient almost everywhere:
"Deep Learning" (Goodfellow et al.), 20.9.1).
"""

from __future__ import annotations

from torch import Tensor
from torch.distributions import Distribution

from zoo.errors import UserError
from zoo.estimators.base import (
    Estimator,
    StochasticSample,
    as_distribution,
    check_cost,
)
from zoo.estimators.config import REPARAM


class Reparam(Estimator):
    """Pathwise gradient through dist.rsample (unbiased, low variance; continuous distributions)."""

    spec = REPARAM

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        if not dist.has_rsample:
            raise UserError(
                f"estimator 'reparam' needs a distribution with rsample; {type(dist).__name__} has none. "
                "For discrete variables use 'reinforce', 'rloo', 'gumbel_softmax', 'straight_through' "
                "or 'expectation'."
            )
        n = self._n(n)
        value = dist.rsample((n,))  # (n, *B, *E), differentiable in the parameters
        return StochasticSample(value=value, log_prob=dist.log_prob(value), dist=dist)

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (n, *C), its graph reaches the parameters via s.value
        return cost.mean(0).mean()
