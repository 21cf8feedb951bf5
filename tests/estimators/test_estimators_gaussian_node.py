"""The Gaussian VAE's node, z ~ Independent(Normal(mu, sigma), 1) as ``VAE.posterior`` builds it, under every
estimator the matrix runs on it (reparam, reinforce with each baseline, rloo): each estimate averages to the
closed-form gradient of E[||A z - x||^2] = ||A mu - x||^2 + sum_j sigma_j^2 ||A_j||^2 to mu and log sigma, and a
few steps of each lower that expected cost. Float64; D independent estimates batched as independent inputs
(each its own copy of the parameters, so a copy's gradient times D is one estimate)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Independent, Normal

from zoo.estimators import get_estimator

D = 20000  # independent estimates
Z = 4.0  # tolerance: every coordinate within 4 standard errors of the exact gradient
A = torch.tensor([[1.0, -0.5], [0.3, 2.0], [-1.0, 0.7]], dtype=torch.float64)  # a linear "decoder" (3, 2)
X = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
MU, LOG_SIGMA = [0.2, -0.4], [-0.3, 0.1]
SPECS = {
    "reparam": "reparam",
    "reinforce": "reinforce",  # baseline none
    "reinforce[ema]": {"name": "reinforce", "baseline": "ema"},
    "reinforce[batch_mean]": {"name": "reinforce", "baseline": "batch_mean"},
    "reinforce[learned]": {"name": "reinforce", "baseline": "learned", "context_dim": 3, "hidden": 8},
    "rloo": {"name": "rloo", "n": 4},
}


def cost(z: torch.Tensor) -> torch.Tensor:
    return ((z @ A.T - X) ** 2).sum(-1)  # (n, D)


def exact() -> torch.Tensor:
    mu = torch.tensor(MU, dtype=torch.float64, requires_grad=True)
    log_sigma = torch.tensor(LOG_SIGMA, dtype=torch.float64, requires_grad=True)
    value = ((A @ mu - X) ** 2).sum() + ((2 * log_sigma).exp() * (A**2).sum(0)).sum()
    return torch.cat(torch.autograd.grad(value, [mu, log_sigma]))


def draws(spec, steps: int = 3) -> torch.Tensor:
    """(D, 4): per-estimate gradients to (mu, log sigma), after ``steps - 1`` earlier calls (a running baseline
    in use, a learned one regressed a little)."""
    est = get_estimator(spec).double()
    context = torch.randn(D, 3, dtype=torch.float64)  # the image stands in: any features of the input
    for _ in range(steps):
        mu = torch.tensor(MU, dtype=torch.float64).expand(D, -1).clone().requires_grad_()
        log_sigma = torch.tensor(LOG_SIGMA, dtype=torch.float64).expand(D, -1).clone().requires_grad_()
        s = est.sample(Independent(Normal(mu, log_sigma.exp()), 1))
        loss = est.loss(s, cost(s.value), context=context)
        g_mu, g_sigma = torch.autograd.grad(loss, [mu, log_sigma], retain_graph=True)
        loss.backward()  # the learned baseline's regression step (its gradient; no optimiser needed here)
    return torch.cat([g_mu, g_sigma], 1) * D


@pytest.mark.parametrize("row", list(SPECS))
def test_every_estimator_on_the_gaussian_node_matches_the_closed_form(row):
    """Seed 0: the mean of D estimates within 4 standard errors of the closed form, every coordinate."""
    torch.manual_seed(0)
    g = draws(SPECS[row])
    mean, se = g.mean(0), g.std(0) / math.sqrt(D)
    truth = exact()
    assert ((mean - truth).abs() / se).max() < Z, (row, mean.tolist(), truth.tolist())
    assert (truth.abs() / se).min() > 2 * Z  # the check has power: every coordinate far from zero in its units


def test_a_few_steps_of_each_lower_the_expected_cost():
    """Seed 0: 60 Adam steps (lr 0.05, a batch of 64) on (mu, log sigma) with each estimator lower the exact
    expected cost from 13.2 to below 70 % of it."""
    def expected(mu, log_sigma):
        return float(((A @ mu - X) ** 2).sum() + ((2 * log_sigma).exp() * (A**2).sum(0)).sum())

    start = expected(torch.tensor(MU, dtype=torch.float64), torch.tensor(LOG_SIGMA, dtype=torch.float64))
    for row, spec in SPECS.items():
        torch.manual_seed(0)
        est = get_estimator(spec).double()
        mu = torch.tensor(MU, dtype=torch.float64, requires_grad=True)
        log_sigma = torch.tensor(LOG_SIGMA, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([mu, log_sigma, *est.parameters()], lr=0.05)
        context = torch.randn(64, 3, dtype=torch.float64)
        for _ in range(60):
            q = Independent(Normal(mu.expand(64, -1), log_sigma.exp().expand(64, -1)), 1)
            s = est.sample(q)
            opt.zero_grad()
            est.loss(s, cost(s.value), context=context).backward()
            opt.step()
        assert expected(mu.detach(), log_sigma.detach()) < 0.7 * start, row
