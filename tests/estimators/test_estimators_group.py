"""The group estimators of language-model RL practice (``grpo``, ``dr_grpo``, ``reinforce_pp``) beside ``rloo``:
the advantage identities, and by exact enumeration in float64 (every joint outcome of the n samples of each
input, weighted by its probability) which of them are unbiased for grad E[cost]:

- rloo: unbiased (its expectation equals the exact gradient to 1e-12);
- dr_grpo: f - the group's mean (its own cost included) is exactly (n - 1) / n times rloo's advantage, so its
  expectation is exactly (n - 1) / n grad E[cost]: the direction unbiased, the scale biased;
- grpo: the division by the group's std reweights the groups: the expectation is off the gradient's direction;
- reinforce_pp: the batch's mean (the sample's own cost included) and std: off too, for a finite batch.

The problems: a categorical (K = 3, 1 or 2 inputs with their own logits) and a sequential one (two 3-way draws per
sample, the second's logits given the first, one cost that couples both), as in the other unbiasedness tests.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.distributions import Categorical

from zoo.estimators import ESTIMATORS, StochasticSample, get_estimator
from zoo.estimators.baselines import STD_EPS, make_baseline
from zoo.estimators.seam import default_requirements, requirements, resolve

K = 3
F64 = torch.float64
LOGITS = torch.tensor([[0.3, -0.2, 1.0], [-0.5, 0.8, 0.1]], dtype=F64)  # two inputs
VALUES = torch.tensor([0.0, 1.0, 2.0], dtype=F64)
THETA1, THETA2 = [0.3, -0.2, 1.0], [-0.5, 0.4, 0.1]
W = [[2.0, -1.0, 0.0], [-1.5, 0.5, 1.0], [0.0, 2.0, -2.0]]  # step 2's logits: THETA2 + W[b1]
EXACT = 1e-12  # float64 rounding over at most 729 outcomes
BIAS = 0.05  # a bias is claimed where it exceeds 5 % of the exact gradient's norm (measured: 10 % to 91 %)
OFF_LINE = 0.01  # a direction change: E[g] over 1 % of its norm off the gradient's line (measured: 2.8 % to 61 %)


def test_rloo_is_k_over_k_minus_1_times_the_centred_cost_and_the_others_follow():
    torch.manual_seed(0)
    cost = 3.0 + torch.randn(5, 7, 4, dtype=F64)  # (K = 5 samples, *C)
    mean, std = cost.mean(0, keepdim=True), cost.std(0, keepdim=True)
    rloo, _, _ = make_baseline("rloo", 0.9, None, 8).advantage(cost, None)
    torch.testing.assert_close(rloo, 5 / 4 * (cost - mean), rtol=0, atol=1e-13)
    dr, _, _ = make_baseline("dr_grpo", 0.9, None, 8).advantage(cost, None)
    torch.testing.assert_close(dr, 4 / 5 * rloo, rtol=0, atol=1e-13)
    grpo, _, _ = make_baseline("grpo", 0.9, None, 8).advantage(cost, None)
    torch.testing.assert_close(grpo, (cost - mean) / (std + STD_EPS), rtol=0, atol=1e-13)
    pp, _, _ = make_baseline("reinforce_pp", 0.9, None, 8).advantage(cost, None)
    torch.testing.assert_close(pp, (cost - cost.mean()) / (cost.std(unbiased=False) + STD_EPS), rtol=0, atol=1e-13)


def categorical_expectation(spec, n: int, inputs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(E[the estimate], the exact gradient) to the first ``inputs`` inputs' logits; cost 5 + (v_y - 1.2)^2."""
    est = get_estimator(spec).double()
    logits_ = LOGITS[:inputs]

    def f(index):
        return 5.0 + (VALUES[index] - 1.2) ** 2

    p = logits_.softmax(-1)
    mean = torch.zeros_like(logits_)
    for outcome in itertools.product(range(K), repeat=n * inputs):
        index = torch.tensor(outcome).view(n, inputs)  # (n, B)
        logits = logits_.clone().requires_grad_()
        s = est.observe(Categorical(logits=logits), index)
        (g,) = torch.autograd.grad(est.loss(s, f(index)), logits)
        mean += p.gather(1, index.T).prod() * g
    logits = logits_.clone().requires_grad_()
    (exact,) = torch.autograd.grad((logits.softmax(-1) * f(torch.arange(K))).sum(-1).mean(), logits)
    return mean, exact


def sequential_expectation(spec, n: int, inputs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(E[the estimate], the exact gradient) to (theta1, theta2, W): ``inputs`` copies of the input, n paths
    each; a path draws b1 ~ softmax(theta1), then b2 ~ softmax(theta2 + W[b1]); one cost per path couples both."""
    est = get_estimator(spec).double()
    eye = torch.eye(K, dtype=F64)

    def params():
        return [torch.tensor(x, dtype=F64, requires_grad=True) for x in (THETA1, THETA2, W)]

    def cost(b1, b2):
        a, b = VALUES[b1], VALUES[b2]
        return 5.0 + (a - 2.0 * b + 0.4) ** 2 + a * b

    paths = list(itertools.product(range(K), repeat=2))
    mean = None
    for outcome in itertools.product(range(len(paths)), repeat=n * inputs):
        b = torch.tensor([paths[i] for i in outcome]).view(n, inputs, 2)  # (n, B, T=2)
        t1, t2, w = params()
        logits = torch.stack([t1.expand(n, inputs, K), t2 + w[b[..., 0]]], 2).log_softmax(-1)  # (n, B, 2, K)
        log_prob = logits.gather(-1, b.unsqueeze(-1)).squeeze(-1)  # (n, B, 2)
        s = StochasticSample(value=eye[b], log_prob=log_prob, dist=Categorical(logits=logits), index=b)
        grads = torch.autograd.grad(est.loss(s, cost(b[..., 0], b[..., 1])), [t1, t2, w])  # cost (n, B)
        g = torch.cat([x.flatten() for x in grads]) * log_prob.detach().sum().exp()
        mean = g if mean is None else mean + g
    t1, t2, w = params()
    p = t1.softmax(-1)[:, None] * (t2 + w).softmax(-1)  # (K, K): p(b1, b2)
    f = cost(torch.arange(K)[:, None].expand(K, K), torch.arange(K)[None, :].expand(K, K))
    exact = torch.cat([x.flatten() for x in torch.autograd.grad((p * f).sum(), [t1, t2, w])])
    return mean, exact


def off_line(mean: torch.Tensor, exact: torch.Tensor) -> float:
    """How far E[g] is from every multiple of the exact gradient, relative to |E[g]|."""
    scale = (mean * exact).sum() / exact.pow(2).sum()
    return float((mean - scale * exact).norm() / mean.norm())


CASES = {  # label: (estimator, n, inputs); the sequential problem runs those with n * inputs <= 2 (81 outcomes)
    "rloo n=3": ("rloo", 3, 1),
    "reinforce + rloo baseline n=2": ({"name": "reinforce", "baseline": "rloo"}, 2, 1),
    "dr_grpo n=3": ("dr_grpo", 3, 1),
    "dr_grpo n=2": ("dr_grpo", 2, 1),
    "grpo n=3": ("grpo", 3, 1),
    "grpo n=2": ("grpo", 2, 1),
    "reinforce_pp n=1": ("reinforce_pp", 1, 2),
    "reinforce_pp n=2": ("reinforce_pp", 2, 1),
}


@pytest.mark.parametrize("label, problem", [(label, "categorical") for label in CASES] + [
    (label, "sequential") for label, (_, n, inputs) in CASES.items() if n * inputs <= 2])
def test_exact_enumeration_shows_which_are_unbiased(label, problem):
    spec, n, inputs = CASES[label]
    if problem == "categorical":
        mean, exact = categorical_expectation(spec, n, inputs)
    else:
        mean, exact = sequential_expectation(spec, n, inputs)
    name, _, opts = resolve(spec)
    caps = requirements(name, opts)
    baseline = opts.baseline
    bias = float((mean - exact).norm() / exact.norm())
    if baseline == "rloo":
        assert caps.unbiased and bias < EXACT, bias
    elif baseline == "dr_grpo":  # exactly (n - 1) / n of the gradient
        assert not caps.unbiased and bias > BIAS
        torch.testing.assert_close(mean, (n - 1) / n * exact, rtol=0, atol=EXACT)
    else:  # grpo, reinforce_pp: biased, and off the gradient's direction
        assert not caps.unbiased and bias > BIAS, bias
        assert off_line(mean, exact) > OFF_LINE, off_line(mean, exact)


@pytest.mark.parametrize("name, group", [("grpo", True), ("dr_grpo", True), ("reinforce_pp", False)])
def test_they_declare_their_bias_and_their_group(name, group):
    caps = default_requirements(ESTIMATORS.get(name))
    assert not caps.unbiased and caps.min_samples == (2 if group else 1)
    assert get_estimator(name).unbiased is False
    name, _, opts = resolve({"name": "reinforce", "baseline": name})
    assert not requirements(name, opts).unbiased  # as a baseline of reinforce too
    assert get_estimator({"name": "reinforce", "baseline": "rloo"}).unbiased
