"""ARM and DisARM (binary variables): unbiased on a problem whose cost couples three variables, the
formulas on one hand-worked pair, DisARM's variance below ARM's (its Rao-Blackwellisation), the
Bernoulli and two-category forms agree, a pathwise gradient still reaches the cost, and the seam
refuses them where the variables are not binary or n is odd."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.distributions import Bernoulli, Categorical

from zoo.config import load_config
from zoo.errors import UserError
from zoo.estimators import StochasticSample, get_estimator

PHI = [0.4, -0.7, 1.5]  # three binary variables, logits of b = 1
W = [1.0, -2.0, 0.5]
D = 40000  # independent estimates per check
Z = 4.0  # tolerance in standard errors


def cost_of(b: torch.Tensor, t: torch.Tensor | float = 0.3) -> torch.Tensor:
    """(..., 3) bits -> (...): couples every variable, and b_0 with b_2 beyond the square."""
    return (b @ torch.tensor(W, dtype=b.dtype) - t) ** 2 + 3 * b[..., 0] * b[..., 2]


def exact() -> torch.Tensor:
    phi = torch.tensor(PHI, dtype=torch.float64, requires_grad=True)
    p = torch.sigmoid(phi)
    total = 0.0
    for bits in itertools.product([0.0, 1.0], repeat=3):  # all 8 configurations
        b = torch.tensor(bits, dtype=torch.float64)
        total = total + (p**b * (1 - p) ** (1 - b)).prod() * cost_of(b)
    (g,) = torch.autograd.grad(total, phi)
    return g.float()


def estimates(name: str, form: str = "bernoulli", draws: int = D, seed: int = 0) -> torch.Tensor:
    """(draws, 3) gradient estimates w.r.t. phi, one pair of samples each."""
    torch.manual_seed(seed)
    est = get_estimator(name)
    phi = torch.tensor(PHI).expand(draws, -1).clone().requires_grad_()
    if form == "bernoulli":
        s = est.sample(Bernoulli(logits=phi), 2)
        bits = s.value  # (2, draws, 3)
    else:  # two categories, logits (0, phi): category 1 is b = 1
        s = est.sample(Categorical(logits=torch.stack([torch.zeros_like(phi), phi], -1)), 2)
        bits = s.value[..., 1]
    (g,) = torch.autograd.grad(est.loss(s, cost_of(bits)), phi)
    return g * draws


def z_score(g: torch.Tensor, target: torch.Tensor) -> float:
    return float(((g.mean(0) - target).abs() / (g.std(0) / math.sqrt(len(g)))).max())


@pytest.mark.parametrize("name", ["arm", "disarm"])
@pytest.mark.parametrize("form", ["bernoulli", "categorical"])
def test_unbiased_when_the_cost_couples_the_variables(name, form):
    assert z_score(estimates(name, form), exact()) < Z


def test_disarm_has_less_variance_than_arm_and_than_leave_one_out_over_two_samples():
    """Seed 0, 40,000 estimates each: measured 1.19 (disarm), 1.58 (arm), 2.19 (rloo, n = 2) at 200,000."""
    arm, disarm = estimates("arm").var(0).sum(), estimates("disarm").var(0).sum()
    torch.manual_seed(0)
    rloo = get_estimator("rloo")
    phi = torch.tensor(PHI).expand(D, -1).clone().requires_grad_()
    s = rloo.sample(Categorical(logits=torch.stack([torch.zeros_like(phi), phi], -1)), 2)
    (g,) = torch.autograd.grad(rloo.loss(s, cost_of(s.value[..., 1])), phi)
    loo = (g * D).var(0).sum()
    assert disarm < 0.85 * arm and disarm < 0.7 * loo


def test_one_pair_worked_by_hand():
    """phi = 0, u = 0.2: b = 1[0.2 < 0.5] = 1, b~ = 1[0.8 < 0.5] = 0; f(1) = 3, f(0) = 1.
    ARM: (f(b~) - f(b)) (u - 1/2) = (-2)(-0.3) = 0.6; DisARM: 1/2 (3 - 1) (+1) sigmoid(0) = 0.5."""
    for name, expected in [("arm", 0.6), ("disarm", 0.5)]:
        phi = torch.zeros(1, requires_grad=True)
        dist = Bernoulli(logits=phi)
        value = torch.tensor([[1.0], [0.0]])  # (n = 2, B = 1): b, then b~
        s = StochasticSample(value=value, log_prob=dist.log_prob(value), dist=dist,
                             extras={"antithetic_noise": torch.tensor([[0.2]])})
        cost = 1.0 + 2.0 * value[:, 0]  # f(b) = 1 + 2 b
        (g,) = torch.autograd.grad(get_estimator(name).loss(s, cost), phi)
        assert g.item() == pytest.approx(expected, abs=1e-6)


def test_the_pair_shares_its_noise_and_both_halves_are_draws_of_the_distribution():
    torch.manual_seed(1)
    est = get_estimator("disarm")
    p = torch.sigmoid(torch.tensor(PHI))
    s = est.sample(Bernoulli(logits=torch.tensor(PHI).expand(50000, -1)), 2)
    u = s.extras["antithetic_noise"][0]  # (50000, 3)
    assert torch.equal(s.value[0], (u < p).float()) and torch.equal(s.value[1], (1 - u < p).float())
    for half in s.value:  # each half: Bernoulli(p), within 4 standard errors
        se = (p * (1 - p) / 50000).sqrt()
        assert ((half.mean(0) - p).abs() < 4 * se).all()


def test_the_cost_keeps_its_pathwise_gradient_and_the_loss_is_the_mean_cost():
    torch.manual_seed(0)
    est = get_estimator("disarm", n=4)  # 2 pairs
    t = torch.tensor(0.3, requires_grad=True)
    s = est.sample(Bernoulli(logits=torch.tensor(PHI).expand(8, -1)))
    cost = cost_of(s.value, t)  # (4, 8)
    loss = est.loss(s, cost)
    (gt,) = torch.autograd.grad(loss, t, retain_graph=True)
    (expected,) = torch.autograd.grad(cost.mean(), t)
    assert s.n == 4 and loss.item() == pytest.approx(cost.mean().item()) and gt.item() == pytest.approx(expected.item())


def test_misuse_gets_a_clear_error():
    with pytest.raises(UserError, match="n must be even"):
        get_estimator("disarm", n=3)
    with pytest.raises(UserError, match="n must be even"):
        get_estimator("arm").sample(Bernoulli(logits=torch.zeros(2)), 3)
    with pytest.raises(UserError, match="needs 2 categories, got 3"):
        get_estimator("disarm").sample(torch.zeros(2, 3))
    with pytest.raises(UserError, match="Bernoulli or a categorical"):
        get_estimator("arm").sample(torch.distributions.Normal(0.0, 1.0))
    foreign = get_estimator("reinforce").sample(torch.zeros(2, 2), 2)
    with pytest.raises(UserError, match="its own sample"):
        get_estimator("disarm").loss(foreign, torch.zeros(2, 2))


@pytest.mark.parametrize("override, why, fits", [
    (["model.estimator=disarm"], "at most 2 categories, and this node's have 10 (2 would fit)",
     "dr_grpo, grpo, gumbel_softmax"),
    (["model.estimator=arm", "model.n_classes=2", "model.n_samples=3"], "n must be even, got n=3", "arm, disarm"),
])
def test_the_seam_refuses_them_where_they_cannot_train_and_names_what_fits(override, why, fits):
    with pytest.raises(UserError) as err:
        load_config("dvae_digits", override)
    assert why in str(err.value) and f"Estimators that fit: {fits}" in str(err.value)
    # attention over locations: the data's image side states L, the cnn's grid cells, before any data are read
    with pytest.raises(UserError, match=r"this node's have 64 \(2 would fit\)"):
        load_config("sat_shapes_hard", ["model.estimator=disarm"])  # 8 x 8 cells of a 64-px scene
    with pytest.raises(UserError, match=r"this node's have 16 \(2 would fit\)"):
        load_config("sat_shapes_hard", ["model.estimator=arm", "data.image_size=32"])


def test_a_binary_discrete_vae_takes_them_and_lists_them_as_fits():
    from zoo.estimators import compatible
    from zoo.registry import MODELS

    cfg = load_config("dvae_digits", ["model.estimator=disarm", "model.n_classes=2"])
    assert cfg["model"]["estimator"] == "disarm"
    dvae = MODELS.get("dvae")
    assert {"arm", "disarm"} <= set(compatible(dvae.stochastic_node(dvae.Config(n_classes=2))))
    assert not {"arm", "disarm"} & set(compatible(dvae.stochastic_node(dvae.Config(n_classes=10))))


def test_seqgan_refuses_them_for_what_its_tokens_are_and_its_hint_leads_to_a_recipe_that_loads():
    """The oracle's vocabulary (data.vocab_size) is G's tokens' categories before any data are read; the hint of
    the refusal (a group per start) gives a command that loads; binary tokens drawn one after another are refused
    before anything runs (antithetic pairs need independent draws), not at the first generator step."""
    with pytest.raises(UserError) as err:
        load_config("seqgan_oracle_small", ["model.estimator=arm"])
    msg = str(err.value)
    assert "at most 2 categories, and this node's have 1000 (2 would fit)" in msg
    hint = err.value.details[1]  # after the estimators that fit
    assert hint.startswith("model.group_size=4") and "model.estimator=rloo" in hint
    load_config("seqgan_oracle_small", ["model.group_size=4", "model.estimator=rloo"])  # the hint's command
    with pytest.raises(UserError, match="have 1000 \\(2 would fit\\)"):
        load_config("seqgan_oracle_small", ["model.group_size=4", "model.estimator=arm"])
    with pytest.raises(UserError, match="drawn independently given the input, and this node draws each given"):
        load_config("seqgan_oracle_small", ["data.vocab_size=2", "model.group_size=2", "model.estimator=arm"])


def test_seqgan_with_binary_tokens_and_arm_exits_2_before_training(tmp_path, capsys):
    from zoo.train import main

    code = main(["recipe=seqgan_oracle_small", "data.vocab_size=2", "model.group_size=2", "model.estimator=disarm",
                 f"run_dir={tmp_path}/runs"])
    assert code == 2 and "antithetic pairs" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
