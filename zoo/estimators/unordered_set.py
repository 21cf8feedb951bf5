"""Unordered set estimator (Kool, van Hoof & Welling, ICLR 2020) on Gumbel-top-k samples.

Draw k distinct categories S without replacement (Gumbel-top-k). With p^{D\\C}(x) = p(x) / (1 - P(C))
the distribution restricted to the domain without C, and p^{D\\C}(S) the probability of the
*unordered* set S (a sum over its k! orderings), the leave-one-out ratio
    R(S, s) = p^{D\\s}(S \\ s) / p(S)
makes   e(S) = sum_{s in S} p(s) R(S, s) f(s)   an unbiased estimate of E[f], and
    grad = sum_{s in S} grad p(s) R(S, s) (f(s) - b_s)
an unbiased gradient estimate for any b_s whose expectation over the other k - 1 samples is the
same for every s. The built-in baseline b_s = p(s) f(s) + (1 - p(s)) * [the unordered-set estimate
of E_{D\\s}[f] from the other k - 1 samples] has expectation E[f] for every s (Kool et al. 2020,
second-order leave-one-out ratios), so it needs k >= 2.

Distinct samples never waste evaluations on duplicates, which is where it beats RLOO when the
distribution has low entropy. Cost: k! orderings per set (k up to ~6). Each categorical variable
needs its own cost (cost (k, *B)), as for ``expectation``.
"""

from __future__ import annotations

import itertools
import math

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
    one_hot_sample,
)
from zoo.estimators.config import UNORDERED_SET
from zoo.estimators.gumbel import gumbel_topk


def log_set_prob(logp: Tensor, log_rest: Tensor) -> Tensor:
    """log p^{D\\C}(S) of a set S drawn without replacement from the domain D less C: its members'
    log-probs ``logp`` (..., m) under the full distribution, ``log_rest`` (...) = log of the mass outside
    both S and C.

    Sum over the m! orderings of prod_j p(x_j) / (1 - P(C) - sum_{i<j} p(x_i)). Each denominator is the
    mass not drawn yet, written as P(rest) + sum_{i>=j} p(x_i): a sum of positive terms. As a difference
    it loses every digit when one category holds nearly all the mass (1 - p ~ 1e-16), and the ratios
    reach 1e13 in a one-latent VAE's training.
    """
    m = logp.shape[-1]
    perms = torch.tensor(list(itertools.permutations(range(m))), dtype=torch.long, device=logp.device)
    lp = logp[..., perms] if m else logp.unsqueeze(-2)  # (..., m!, m)
    undrawn = torch.logcumsumexp(lp.flip(-1), -1).flip(-1)  # (..., m!, m): log sum_{i>=j} p(x_i)
    left = torch.logaddexp(undrawn, log_rest[..., None, None])  # log of the mass left at position j
    return torch.logsumexp((lp - left).sum(-1), dim=-1)  # (...)


def _others(k: int, drop: tuple[int, ...]) -> list[int]:
    return [i for i in range(k) if i not in drop]


class UnorderedSet(Estimator):
    """Sampling without replacement + leave-one-out ratios (unbiased; Kool et al. 2020; categoricals)."""

    spec = UNORDERED_SET

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        logits = categorical_logits(dist)  # (*B, K)
        if logits is None:
            kind = type(dist).__name__
            raise UserError(f"estimator 'unordered_set' needs a categorical distribution, got {kind}")
        k = self._n(n)
        if k > logits.shape[-1]:
            raise UserError(f"unordered_set: n={k} distinct samples but only {logits.shape[-1]} categories")
        with torch.no_grad():
            idx, keys = gumbel_topk(logits, k)  # (*B, k)
        # one-hots (k, *B, K) and log-probs (k, *B) with their gradient to the logits
        return one_hot_sample(dist, logits, idx.movedim(-1, 0), extras={"keys": keys.movedim(-1, 0)})

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (k, *B)
        if cost.shape[1:] != s.batch_shape:
            want = (s.n, *s.batch_shape)
            raise UserError(f"estimator 'unordered_set' needs one cost per categorical variable: cost "
                            f"(k, *B) = {want}, got {tuple(cost.shape)}")
        k = s.n
        if self.options.baseline and k < 2:
            raise UserError("unordered_set's built-in baseline needs n >= 2 samples (or baseline=false)")
        logp = s.log_prob.movedim(0, -1)  # (*B, k)
        f = cost.movedim(0, -1)  # (*B, k)
        with torch.no_grad():
            lq, fd = logp.detach().double(), f.detach().double()
            p = lq.exp()
            outside = categorical_logits(s.dist).detach().double().scatter(-1, s.index.movedim(0, -1), -math.inf)
            rest = torch.logsumexp(outside, -1)  # (*B) log of the mass outside S (-inf when S is all of D)
            full = log_set_prob(lq, rest)  # (*B) log p(S)
            loo = torch.stack([log_set_prob(lq[..., _others(k, (i,))], rest)
                               for i in range(k)], -1)  # (*B, k): log p^{D\s}(S \ s)
            ratio = (loo - full.unsqueeze(-1)).exp()  # R(S, s)
            adv = fd
            if self.options.baseline:
                base = p * fd  # s' = s term: p(s) f(s)
                for i in range(k):
                    for j in range(k):
                        if i == j:
                            continue
                        l2 = log_set_prob(lq[..., _others(k, (i, j))], rest)  # log p^{D\{s,s'}}(S \ {s,s'})
                        base[..., i] += p[..., j] * (l2 - loo[..., i]).exp() * fd[..., j]
                adv = fd - base
            weight = (p * ratio).to(f.dtype)  # (*B, k): estimate of E[f] = sum weight * f
            score = (ratio * adv).to(f.dtype)
        prob = logp.exp()
        surrogate = (weight * f).sum(-1) + ((prob - prob.detach()) * score).sum(-1)  # (*B)
        return surrogate.mean()
