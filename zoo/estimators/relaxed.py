"""Relaxed categorical estimators: Gumbel-softmax / Concrete and straight-through (Xu's softmax lecture notes).

The Gumbel-max trick writes a categorical sample as a function of parameter-free noise,
one_hot(argmax(logits + G)), but argmax has zero gradient almost everywhere. The Concrete
relaxation (Maddison et al. 2017; Jang et al. 2017) replaces it by softmax((logits + G) / tau).

Both estimators are **biased**: the model is run on y = softmax((logits + G) / tau) instead of a
one-hot, so the estimate is of grad E[f(y_tau)], not grad E[f(one_hot)]. Only the hard Gumbel-max
sample is exact (the same notes: "Only sampling Gumble Hard-max is unbiased"). The bias shrinks as
tau -> 0, but the gradient variance grows like 1/tau, hence the annealing schedule
tau(step) = max(tau_min, tau * exp(-anneal_rate * step)) (Jang et al.: tau 1 -> 0.5).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
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
from zoo.estimators.config import GUMBEL_SOFTMAX, STRAIGHT_THROUGH
from zoo.estimators.gumbel import sample_gumbel


class GumbelSoftmax(Estimator):
    """Concrete relaxation softmax((logits + G) / tau) (biased; low variance; categoricals)."""

    spec = GUMBEL_SOFTMAX
    hard = False  # straight_through: hard one-hot forward

    def __init__(self, options=None, **kwargs):
        super().__init__(options, **kwargs)
        # schedule position, a buffer so that a resumed run continues the schedule; `_step` is its copy
        # on the host, read by `temperature` on every sample (reading the buffer would sync a GPU)
        self.register_buffer("step_count", torch.zeros((), dtype=torch.long))
        self._step = 0
        self.register_load_state_dict_post_hook(lambda module, keys: module._sync_step())

    def _sync_step(self) -> None:
        self._step = int(self.step_count)  # once, after a checkpoint's state is loaded

    @property
    def temperature(self) -> float:
        o = self.options
        if o.anneal_rate <= 0:
            return o.tau
        return max(o.tau_min, o.tau * math.exp(-o.anneal_rate * self._step))

    def set_step(self, step: int) -> None:
        self._step = int(step)
        self.step_count.fill_(self._step)

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        logits = categorical_logits(dist)  # (*B, K), normalised
        if logits is None:
            raise UserError(
                f"estimator '{self.name}' relaxes categorical variables; got {type(dist).__name__}. "
                "Pass a Categorical / OneHotCategorical or logits ('reparam' is for continuous ones)."
            )
        n = self._n(n)
        phi = logits.expand(n, *logits.shape)  # (n, *B, K)
        with torch.no_grad():
            g = sample_gumbel(phi)  # (n, *B, K), parameter-free noise
        soft = torch.softmax((phi + g) / self.temperature, dim=-1)  # (n, *B, K), differentiable
        index = (phi + g).argmax(-1)  # (n, *B): the exact Gumbel-max sample (= soft.argmax)
        if self.hard:
            hard = F.one_hot(index, logits.shape[-1]).to(soft.dtype)
            value = hard - soft.detach() + soft  # forward: one-hot; backward: d soft
        else:
            value = soft
        log_prob = torch.gather(phi, -1, index.unsqueeze(-1)).squeeze(-1)  # (n, *B)
        return StochasticSample(value=value, log_prob=log_prob, dist=dist, index=index,
                                extras={"tau": self.temperature})

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (n, *C); gradient flows through s.value
        return cost.mean(0).mean()

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, temperature={self.temperature:.4g}"


class StraightThrough(GumbelSoftmax):
    """Hard one-hot forward, Gumbel-softmax gradient backward (biased; categoricals).

    The model sees exact categorical samples (so train and test behave the same, and the cost is
    only ever evaluated at one-hots), but the backward pass uses the Jacobian of the relaxed sample
    softmax((logits + G) / tau) with the cost's gradient taken at the hard one-hot: an estimate that
    is biased even for a linear cost. The bias falls with tau while the variance grows.
    """

    spec = STRAIGHT_THROUGH
    hard = True
