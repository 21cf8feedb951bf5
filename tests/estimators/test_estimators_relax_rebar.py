"""RELAX with REBAR's term (``rebar: true``): the control variate eta * f(softmax(z / tau)) + MLP keeps the
estimate unbiased, the cost's own parameters get only the pathwise gradient at the hard sample, the
variance signal trains eta and tau, and the seam and the estimator refuse it without a cost function."""

from __future__ import annotations

import math

import pytest
import torch

from zoo.config import load_config
from zoo.errors import UserError
from zoo.estimators import get_estimator

LOGITS = [0.3, -0.2, 1.0, -1.0]  # K = 4, the problem of test_estimators_relax.py
VALUES = [0.0, 1.0, 2.0, 3.0]
D = 20000  # independent estimates per check
Z = 4.0  # tolerance in standard errors


def cost_of(value: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(n, D, K) one-hots or relaxed ones -> (n, D); a smooth function of the value, so REBAR can read it."""
    return 5.0 + (value @ torch.tensor(VALUES, dtype=value.dtype) - w) ** 2


def exact() -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(1.2, dtype=torch.float64, requires_grad=True)
    f = 5.0 + (torch.tensor(VALUES, dtype=torch.float64) - w) ** 2
    gl, gw = torch.autograd.grad((logits.softmax(-1) * f).sum(), [logits, w])
    return gl.float(), gw.float()


@pytest.fixture(scope="module")
def rebar():
    """Seed 0: trained by its own variance signal for 300 Adam steps (lr 1e-2, batch 256)."""
    torch.manual_seed(0)
    est = get_estimator("relax", rebar=True)
    opt = torch.optim.Adam(est.parameters(), lr=1e-2)
    for _ in range(300):
        logits = torch.tensor(LOGITS).expand(256, -1).clone().requires_grad_()
        w = torch.full((256,), 1.2)
        s = est.sample(logits)
        opt.zero_grad()
        est.loss(s, cost_of(s.value, w), cost_fn=lambda v, w=w: cost_of(v, w)).backward()
        opt.step()
    return est.eval()


def test_unbiased_once_trained_for_the_logits_and_for_the_costs_own_parameter(rebar):
    torch.manual_seed(1)
    logits = torch.tensor(LOGITS).expand(D, -1).clone().requires_grad_()
    w = torch.full((D,), 1.2, requires_grad=True)
    s = rebar.sample(logits)
    gl, gw = torch.autograd.grad(rebar.loss(s, cost_of(s.value, w), cost_fn=lambda v: cost_of(v, w)), [logits, w])
    gl, gw = gl * D, gw * D
    exact_l, exact_w = exact()
    assert float(((gl.mean(0) - exact_l).abs() / (gl.std(0) / math.sqrt(D))).max()) < Z
    assert float((gw.mean() - exact_w).abs() / (gw.std() / math.sqrt(D))) < Z
    assert rebar.control.eta.item() != 1.0  # trained away from its start


def test_the_costs_parameters_get_only_the_pathwise_gradient_at_the_hard_sample(rebar):
    """The REBAR term evaluates f at relaxed samples; none of that reaches f's own parameters: their gradient is
    exactly that of the mean cost at the hard samples (bit for bit)."""
    rebar.train()
    torch.manual_seed(2)
    logits = torch.tensor(LOGITS).expand(64, -1).clone().requires_grad_()
    w = torch.full((64,), 1.2, requires_grad=True)
    s = rebar.sample(logits)
    cost = cost_of(s.value, w)
    (expected,) = torch.autograd.grad(cost.mean(), w, retain_graph=True)
    loss = rebar.loss(s, cost, cost_fn=lambda v: cost_of(v, w))
    gw, geta, gl = torch.autograd.grad(loss, [w, rebar.control.eta, logits])
    rebar.eval()
    assert torch.equal(gw, expected)
    assert geta.abs() > 0 and gl.abs().sum() > 0  # the variance signal reaches eta; the estimate the logits
    assert loss.item() == pytest.approx(cost.mean().item())  # the value: the mean cost


def test_without_rebar_the_state_is_as_before_and_the_model_passes_no_cost_function():
    assert "control.eta" not in get_estimator("relax").state_dict()  # earlier checkpoints load as they are
    assert "control.eta" in get_estimator("relax", rebar=True).state_dict()
    assert not get_estimator("relax").wants_cost_fn and get_estimator("relax", rebar=True).wants_cost_fn


def test_it_is_refused_without_a_cost_function():
    est = get_estimator("relax", rebar=True)
    s = est.sample(torch.zeros(4, 3))
    with pytest.raises(UserError, match="cost_fn"):
        est.loss(s, torch.ones(1, 4))
    with torch.no_grad():  # a loss value under no_grad (its estimate is still a gradient inside)
        value = est.loss(s, torch.ones(1, 4), cost_fn=lambda v: v.sum((-2, -1)))
    assert value.item() == 1.0
    with pytest.raises(UserError, match="cost is not differentiable"):
        load_config("seqgan_oracle_small", ["model.estimator={name: relax, rebar: true}"])
    assert load_config("dvae_digits", ["model.estimator={name: relax, rebar: true}"])["model"]["estimator"] == \
        {"name": "relax", "rebar": True}


def test_the_discrete_vae_hands_it_its_decoder_cost_and_trains_eta():
    from zoo.models.vae.dvae import DiscreteVAE

    torch.manual_seed(0)
    info = {"dataset": "digits", "image_shape": [1, 8, 8], "binarize": "static", "threshold": 0.5}
    model = DiscreteVAE({"estimator": {"name": "relax", "rebar": True}, "n_latents": 8, "n_classes": 2,
                         "hidden": 32}, info)
    x = (torch.rand(16, 1, 8, 8) > 0.5).float()
    loss = model.estimator_loss((x, torch.zeros(16)))
    loss.backward()
    assert model.estimator.control.eta.grad.abs() > 0
    assert all(p.grad is not None for p in model.encoder.parameters())
