"""RELAX over sequential draws (each variable drawn given the earlier ones, as hard attention's locations are):
with one control variate per variable (``control: per_variable``) the estimate averages to the exact gradient,
found by enumerating the 9 paths of two 3-way draws in float64; one control variate of both variables at once
(``control: joint``) is biased there, which is why the seam refuses it on a sequential node."""

from __future__ import annotations

import math

import torch

from zoo.estimators import StochasticSample, get_estimator

K, D = 3, 100_000  # categories; independent estimates
THETA1, THETA2 = [0.3, -0.2, 1.0], [-0.5, 0.4, 0.1]
W = [[2.0, -1.0, 0.0], [-1.5, 0.5, 1.0], [0.0, 2.0, -2.0]]  # step 2's logits: THETA2 + W[b1]
VALUES = torch.tensor([0.0, 1.0, 2.0], dtype=torch.float64)


def cost(v1: torch.Tensor, v2: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """One-hots (..., K) of both draws and a pathwise parameter w -> one cost that couples them."""
    a, b = v1 @ VALUES, v2 @ VALUES
    return 5.0 + (a - 2.0 * b + w) ** 2 + a * b


def exact() -> torch.Tensor:
    """d E[cost] / d (theta1, theta2, W, w) by enumeration."""
    t1, t2 = torch.tensor(THETA1, dtype=torch.float64, requires_grad=True), torch.tensor(THETA2, dtype=torch.float64,
                                                                                          requires_grad=True)
    w_mat, w = torch.tensor(W, dtype=torch.float64, requires_grad=True), torch.tensor(0.4, dtype=torch.float64,
                                                                                     requires_grad=True)
    eye = torch.eye(K, dtype=torch.float64)
    p1 = t1.softmax(-1)  # (K,)
    p2 = (t2 + w_mat).softmax(-1)  # (K, K): row b1
    f = cost(eye[:, None].expand(K, K, K), eye[None, :].expand(K, K, K), w)  # (K, K)
    value = (p1[:, None] * p2 * f).sum()
    return torch.cat([g.flatten() for g in torch.autograd.grad(value, [t1, t2, w_mat, w])])


def estimates(control: str) -> torch.Tensor:
    """(D, 16) estimates from RELAX whose control variate is far from zero (output layer N(0, 1))."""
    est = get_estimator({"name": "relax", "control": control, "hidden": 16}).double()
    t1 = torch.tensor(THETA1, dtype=torch.float64).expand(D, -1).clone().requires_grad_()
    t2 = torch.tensor(THETA2, dtype=torch.float64).expand(D, -1).clone().requires_grad_()
    w_mat = torch.tensor(W, dtype=torch.float64).expand(D, -1, -1).clone().requires_grad_()
    w = torch.full((D,), 0.4, dtype=torch.float64, requires_grad=True)

    def loss() -> torch.Tensor:
        s1 = est.sample(t1)  # index (1, D)
        s2 = est.sample(t2 + w_mat[torch.arange(D), s1.index[0]])  # given b1
        noise = tuple(torch.stack([a, b], 2) for a, b in zip(s1.extras["relax_noise"], s2.extras["relax_noise"]))
        logits = torch.stack([s1.dist.logits, s2.dist.logits], 1).unsqueeze(0)  # (1, D, 2, K): per sample
        joint = StochasticSample(value=torch.stack([s1.value, s2.value], 2), dist=torch.distributions.Categorical(
            logits=logits), log_prob=torch.stack([s1.log_prob, s2.log_prob], 2),
            index=torch.stack([s1.index, s2.index], 2), extras={"relax_noise": noise})
        return est.loss(joint, cost(s1.value, s2.value, w))  # cost (1, D)

    loss()  # builds the control variate
    torch.nn.init.normal_(est.control.net[2].weight)
    est.eval()
    grads = torch.autograd.grad(loss(), [t1, t2, w_mat, w])
    return torch.cat([g.reshape(D, -1) for g in grads], 1) * D  # (D, 16)


def z_scores(control: str) -> torch.Tensor:
    g = estimates(control)
    return (g.mean(0) - exact()).abs() / (g.std(0) / math.sqrt(D))


def test_a_per_variable_control_variate_is_unbiased_over_sequential_draws():
    """Seed 0, 100,000 estimates: every coordinate within 4.5 standard errors (16 coordinates; max 1.5 with seed 0,
    2.6 with seed 1)."""
    torch.manual_seed(0)
    z = z_scores("per_variable")
    assert z.max() < 4.5, z


def test_a_joint_control_variate_is_biased_over_sequential_draws():
    """Seed 0, the same problem and control variate size: some coordinate is more than 10 standard errors off
    (27 with seed 0, 73 with seed 1): the check above has the power to see such a bias."""
    torch.manual_seed(0)
    z = z_scores("joint")
    assert z.max() > 10, z
