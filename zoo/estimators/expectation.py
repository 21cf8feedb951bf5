"""Exact expectation by enumeration over a small categorical: E[f] = sum_k p_k f(one_hot_k).

No sampling and no variance: the "sample" holds all K one-hots (leading dim K), the combine
weights are the probabilities p_k (with gradient), so grad loss = sum_k (grad p_k) f_k + p_k grad f_k
exactly. Costs K evaluations of the downstream model. It is the ground truth the other estimators
are tested against, and the "soft" path for small K.

Each categorical variable must have its own cost (cost shape (K, *B)): a cost shared by several
categorical variables would need the joint enumeration of K^m configurations, which this does not do.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Distribution

from zoo.errors import UserError
from zoo.estimators.base import (
    Estimator,
    StochasticSample,
    as_distribution,
    categorical_logits,
    check_cost,
)
from zoo.estimators.config import EXPECTATION


class Expectation(Estimator):
    """Exact sum over the K categories, weights = probabilities (exact, zero variance; small K)."""

    spec = EXPECTATION

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        """Enumerate all K categories; ``n`` is ignored (the sample dim is K)."""
        dist = as_distribution(dist)
        logits = categorical_logits(dist)  # (*B, K)
        if logits is None:
            raise UserError(
                f"estimator 'expectation' enumerates a categorical distribution; got {type(dist).__name__}. "
                "Pass a Categorical / OneHotCategorical or a logits tensor."
            )
        K = logits.shape[-1]
        batch = logits.shape[:-1]
        eye = torch.eye(K, dtype=logits.dtype, device=logits.device)  # (K, K)
        value = eye.view(K, *([1] * len(batch)), K).expand(K, *batch, K)  # (K, *B, K)
        index = torch.arange(K, device=logits.device).view(K, *([1] * len(batch)))
        index = index.expand(K, *batch)  # (K, *B)
        log_prob = logits.movedim(-1, 0)  # (K, *B)
        weights = log_prob.exp()  # (K, *B) probabilities, with gradient
        return StochasticSample(value=value, log_prob=log_prob, dist=dist, index=index, weights=weights)

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (K, *C)
        if cost.shape[1:] != s.batch_shape:
            raise UserError(
                f"estimator 'expectation' needs one cost per categorical variable: cost (K, *B) = "
                f"({s.n}, {', '.join(map(str, s.batch_shape))}), got {tuple(cost.shape)}. A cost shared by "
                "several categoricals needs joint enumeration; use a sampling estimator instead."
            )
        return (s.weights * cost).sum(0).mean()  # exact E[cost], averaged over the batch
