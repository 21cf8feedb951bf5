"""RELAX (Grathwohl et al. 2018): the conditional Gumbel draw is p(z | b), the estimate stays unbiased
once its control variate is trained, it then has less variance than REINFORCE with a moving-average
baseline, the control variate's training reaches only the control variate, and the seam refuses it
where a model assembles its own samples. With REBAR's term (``rebar: true``: c(z) = eta f(softmax(z / tau))
+ MLP) it stays unbiased, the cost's own parameters get only the pathwise gradient at the hard sample,
eta and tau are trained, and it is refused without a cost function."""

from __future__ import annotations

import math

import pytest
import torch
from torch.distributions import Categorical

from zoo.config import load_config
from zoo.errors import UserError
from zoo.estimators import get_estimator
from zoo.estimators.relax import conditional_gumbel

LOGITS = [0.3, -0.2, 1.0, -1.0]  # K = 4, the problem of test_estimators_unbiased.py
VALUES = [0.0, 1.0, 2.0, 3.0]
D = 20000  # independent estimates per check
Z = 4.0  # tolerance in standard errors


def cost_of(value: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return 5.0 + (value @ torch.tensor(VALUES, dtype=value.dtype) - w) ** 2  # (n, D)


def estimates(est, draws: int = D) -> tuple[torch.Tensor, torch.Tensor]:
    """(draws, K) logit gradients and (draws,) gradients of the cost's own parameter w."""
    logits = torch.tensor(LOGITS).expand(draws, -1).clone().requires_grad_()
    w = torch.full((draws,), 1.2, requires_grad=True)
    s = est.sample(Categorical(logits=logits))
    gl, gw = torch.autograd.grad(est.loss(s, cost_of(s.value, w)), [logits, w])
    return gl * draws, gw * draws


def exact() -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(1.2, dtype=torch.float64, requires_grad=True)
    f = 5.0 + (torch.tensor(VALUES, dtype=torch.float64) - w) ** 2
    gl, gw = torch.autograd.grad((logits.softmax(-1) * f).sum(), [logits, w])
    return gl.float(), gw.float()


def trained_relax(steps: int = 300):
    """Seed 0: the control variate trained by the estimator's own variance signal, Adam 1e-2, batch 256."""
    torch.manual_seed(0)
    est = get_estimator("relax")
    opt = torch.optim.Adam(est.parameters(), lr=1e-2)
    for _ in range(steps):
        logits = torch.tensor(LOGITS).expand(256, -1).clone().requires_grad_()
        s = est.sample(logits)
        opt.zero_grad()
        est.loss(s, cost_of(s.value, torch.full((256,), 1.2))).backward()
        opt.step()
    return est.eval()


@pytest.fixture(scope="module")
def relax():
    return trained_relax()


def test_the_conditional_draw_is_the_perturbed_logits_given_their_argmax():
    """Seed 0, 200,000 draws: z~ ~ p(z | argmax = b) against the unconditional z's that landed on b,
    per component mean and standard deviation within 0.03 (their standard errors are ~0.005)."""
    torch.manual_seed(0)
    phi = torch.log_softmax(torch.tensor(LOGITS), -1).expand(200_000, -1)
    z = phi - torch.empty_like(phi).exponential_().log()
    b = z.argmax(-1)
    top = -torch.empty(len(phi)).exponential_().log()
    z_tilde = conditional_gumbel(phi, b, top, torch.empty_like(phi).exponential_())
    assert torch.equal(z_tilde.argmax(-1), b)
    for k in range(4):
        real, drawn = z[b == k], z_tilde[b == k]
        assert (real.mean(0) - drawn.mean(0)).abs().max() < 0.03, k
        assert (real.std(0) - drawn.std(0)).abs().max() < 0.03, k


def test_a_trained_control_variate_keeps_the_estimate_unbiased(relax):
    """Seed 0, 20,000 estimates after 300 training steps: within 4 standard errors of the exact gradient,
    to the logits and to the cost's own parameter."""
    gl, gw = estimates(relax)
    el, ew = exact()
    for draws, truth in ((gl, el), (gw.unsqueeze(1), ew.reshape(1))):
        se = draws.std(0) / math.sqrt(len(draws))
        assert ((draws.mean(0) - truth).abs() / se).max() < Z


def test_a_trained_control_variate_beats_a_moving_average_baseline(relax):
    """Seed 0: summed variance of the logit gradients, trained RELAX 0.37 against REINFORCE + EMA 0.57
    (asked: below 0.7 of it) and 24 for RELAX before training (a control variate at zero: REINFORCE
    without a baseline). And its control variate at the conditional sample z~ ~ p(z | b) knows b: the
    advantage f - c(z~) has 0.68 of the cost's spread (asked: below 0.8). A RELAX whose z~ ignores the drawn
    category (an unconditional Gumbel draw: still unbiased, c(z~) only a baseline) gives 0.42 (0.73 of
    EMA's) and an advantage of 1.03 of the cost's spread, and fails both."""
    torch.manual_seed(1)
    trained = estimates(relax)[0].var(0).sum()
    untrained = estimates(get_estimator("relax"))[0].var(0).sum()
    ema = get_estimator({"name": "reinforce", "baseline": "ema"})
    for _ in range(20):  # the baseline's running mean in its steady state
        ema_draws = estimates(ema)[0]
    assert trained < 0.7 * ema_draws.var(0).sum(), (trained, ema_draws.var(0).sum())
    assert trained < 0.05 * untrained
    logits = torch.tensor(LOGITS).expand(D, -1)
    s = relax.sample(logits)
    cost = cost_of(s.value, torch.full((D,), 1.2))
    relax.loss(s, cost)  # evaluation mode: the running statistics stay
    assert relax.stats["advantage_std"] < 0.8 * cost.std(), (relax.stats["advantage_std"], cost.std())


def test_the_variance_signal_trains_the_control_variate_only():
    """The model's gradient (to the logits) is the estimate's, in training and evaluation mode alike; the
    control variate gets its gradient only in training mode."""
    torch.manual_seed(0)
    est = get_estimator({"name": "relax", "hidden": 8})
    logits = torch.tensor(LOGITS).expand(64, -1).clone().requires_grad_()
    s = est.sample(logits, n=2)
    cost = cost_of(s.value, torch.full((64,), 1.2))
    torch.nn.init.normal_(est.control.net[2].weight)  # a control variate that is not zero
    grads = {}
    for mode in ("eval", "train"):  # eval first: training mode updates the running mean after use
        getattr(est, mode)()
        est.zero_grad()
        loss = est.loss(s, cost)
        (g,) = torch.autograd.grad(loss, logits, retain_graph=True)
        loss.backward(retain_graph=True)
        grads[mode] = g, est.control.net[0].weight.grad
    assert torch.allclose(grads["train"][0], grads["eval"][0], atol=1e-6)
    assert grads["train"][1] is not None and grads["train"][1].abs().sum() > 0
    assert grads["eval"][1] is None or grads["eval"][1].abs().sum() == 0
    assert loss.item() == pytest.approx(cost.mean().item(), rel=1e-5)  # the value logged is the mean cost


def test_it_scores_only_its_own_samples_and_follows_float64():
    est = get_estimator("relax")
    other = get_estimator("reinforce").sample(torch.tensor(LOGITS).expand(3, -1))
    with pytest.raises(UserError, match="only samples from its own sample"):
        est.loss(other, torch.ones(1, 3))
    logits = torch.tensor(LOGITS, dtype=torch.float64).expand(3, -1).clone().requires_grad_()
    s = est.sample(logits)
    loss = est.loss(s, cost_of(s.value, torch.full((3,), 1.2, dtype=torch.float64)))
    assert s.value.dtype == loss.dtype == torch.float64
    loss.backward()
    assert logits.grad.dtype == torch.float64


def test_the_control_variate_is_saved_and_loaded(relax):
    fresh = get_estimator("relax")  # its first layer not built yet: loading builds it
    fresh.load_state_dict(relax.state_dict())
    z = torch.randn(2, 5, 4)
    assert torch.equal(fresh.control(z, 2, None), relax.control(z, 2, None))


def test_every_categorical_node_takes_it_and_a_continuous_one_refuses_it_with_the_reason():
    """The discrete VAE's latents, hard attention's locations (stacked with their noise, one word at a time)
    and SeqGAN's tokens (drawn with relax's own sample()) take relax; a continuous node names the math."""
    for recipe in ("dvae_digits", "sat_shapes_hard", "seqgan_oracle_small"):
        assert load_config(recipe, ["model.estimator=relax"])["model"]["estimator"] == "relax", recipe
    with pytest.raises(UserError, match="handles categorical distributions, and this node is continuous"):
        load_config("vae_digits", ["model.estimator=relax"])


def test_a_joint_control_variate_is_refused_on_sequential_draws_and_auto_picks_per_variable():
    """Hard attention stacks its words' samples with their noise (relax fits), but draws each location given
    the earlier words': a control variate of all of them at once would be biased there, so control: joint is
    refused with that reason; auto (the default) is per_variable there and joint on the discrete VAE."""
    from zoo.estimators.seam import build_for_node
    from zoo.registry import MODELS

    with pytest.raises(UserError, match="biased when each is drawn given the earlier draws.*control: per_variable"):
        load_config("sat_shapes_hard", ["model.estimator={name: relax, control: joint}"])
    assert load_config("sat_shapes_hard", ["model.estimator=relax"])["model"]["estimator"] == "relax"
    for model, options, per_variable in (("sat", {"attention": "hard"}, True), ("dvae", {}, False)):
        cls = MODELS.get(model)
        node = cls.stochastic_node(cls.Config(**options), {"image_shape": [1, 8, 8]})
        assert build_for_node("relax", node).per_variable is per_variable
    with pytest.raises(UserError, match="rebar: true .* needs control: joint"):
        get_estimator({"name": "relax", "rebar": True, "control": "per_variable"})


def test_a_given_input_dim_builds_the_control_variate_at_once_and_a_wrong_one_is_named():
    """Under DDP no layer may wait for the first batch: input_dim sizes it; 4 values per cost here (K = 4)."""
    from torch.nn.parameter import is_lazy

    est = get_estimator({"name": "relax", "input_dim": 4})
    assert not is_lazy(est.control.net[0].weight)
    logits = torch.tensor(LOGITS).expand(8, -1).clone().requires_grad_()
    s = est.sample(logits)
    est.loss(s, cost_of(s.value, torch.full((8,), 1.2))).backward()
    assert logits.grad is not None
    wrong = get_estimator({"name": "relax", "input_dim": 7})
    with pytest.raises(UserError, match="input_dim=7, but its control variate reads 4 values per cost.*input_dim=4"):
        wrong.loss(wrong.sample(logits), torch.ones(1, 8))


PAIR_LOGITS = [[0.3, -0.2, 1.0], [-0.5, 0.4, 0.1]]  # two categorical variables, K = 3 each
PAIR_VALUES = [0.0, 1.0, 2.0]


def pair_cost(value: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(n, D, 2, 3) one-hots -> (n, D): one nonlinear cost shared by both variables (C = (D,) a strict
    prefix of B = (D, 2)), with a decoder parameter w read pathwise."""
    pos = value @ torch.tensor(PAIR_VALUES, dtype=value.dtype)  # (n, D, 2)
    return 5.0 + (pos[..., 0] - w * pos[..., 1] - 1.0) ** 2 + pos[..., 0] * pos[..., 1]


def pair_exact() -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient of E[cost] to the 2 x 3 logits and to w, by enumerating the 9 pairs."""
    logits = torch.tensor(PAIR_LOGITS, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    p = logits.softmax(-1)
    eye = torch.eye(3, dtype=torch.float64)
    both = torch.stack([eye[:, None].expand(3, 3, 3), eye[None, :].expand(3, 3, 3)], -2)  # (3, 3, 2, 3)
    f = pair_cost(both.reshape(1, 9, 2, 3), w).reshape(3, 3)
    gl, gw = torch.autograd.grad((p[0][:, None] * p[1][None, :] * f).sum(), [logits, w])
    return gl.float().reshape(-1), gw.float().reshape(1)


def pair_estimates(est, draws: int = D, n: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(draws, 6) logit gradients and (draws, 1) w gradients, each input with its own copy of both."""
    logits = torch.tensor(PAIR_LOGITS).expand(draws, -1, -1).clone().requires_grad_()
    w = torch.full((draws,), 0.7, requires_grad=True)
    s = est.sample(Categorical(logits=logits), n)
    gl, gw = torch.autograd.grad(est.loss(s, pair_cost(s.value, w)), [logits, w])
    return gl.reshape(draws, -1) * draws, gw.unsqueeze(1) * draws


def assert_within(draws: torch.Tensor, truth: torch.Tensor) -> None:
    se = draws.std(0) / math.sqrt(len(draws))
    z = ((draws.mean(0) - truth).abs() / se).max()
    assert z < Z, f"mean {draws.mean(0).tolist()} vs exact {truth.tolist()}: {z:.2f} standard errors off"


def test_two_variables_sharing_one_cost_stay_unbiased_with_a_control_variate_that_is_not_zero():
    """Seed 0: B = (D, 2) categoricals (K = 3) behind one nonlinear cost (C = (D,)), n = 2 samples per input,
    the control variate trained 30 steps (Adam 1e-2, batch 256; its running mean and spread then non-trivial)
    and its output layer pushed away from zero; 20,000 estimates, measured in training mode (the variance
    signal in the graph, the running statistics updated after use): within 4 standard errors of the exact
    gradient by enumeration of the 9 pairs, to all 6 logits and to the cost's own parameter w."""
    torch.manual_seed(0)
    est = get_estimator({"name": "relax", "hidden": 16, "tau": 0.5})
    opt = torch.optim.Adam(est.parameters(), lr=1e-2)
    for _ in range(30):
        logits = torch.tensor(PAIR_LOGITS).expand(256, -1, -1).clone().requires_grad_()
        s = est.sample(logits, n=2)
        opt.zero_grad()
        est.loss(s, pair_cost(s.value, torch.full((256,), 0.7))).backward()
        opt.step()
    with torch.no_grad():
        est.control.net[2].weight.add_(torch.randn_like(est.control.net[2].weight))  # a control variate far from 0
    assert float(est.control.cost_mean) > 5 and est.control.count == 30
    gl, gw = pair_estimates(est.train())
    el, ew = pair_exact()
    assert_within(gl, el)
    assert_within(gw, ew)


def test_a_context_keeps_the_estimate_unbiased_and_sends_nothing_to_the_features(relax):
    """Seed 1: the control variate reads the model's features too (context (N, 5) = tanh(x h), h a parameter
    standing for the encoder; input_dim 4 + 5): the trained control variate of the fixture with random
    weights (std 0.3) from the context into its hidden layer, n = 1. 50,000 estimates within 4 standard
    errors of the exact gradient (a standard error ~0.002, 1-2 % of each logit's gradient; measured z <= 2.0),
    in training and evaluation mode, and no gradient reaches h. Wrong conditional samples fail it: the other
    values of z~ not truncated below its maximum give z = 5.7-9.1, its maximum at phi_b + Gumbel instead of
    a Gumbel(0) 24-27, z~ conditioned on b + 1 over 40."""
    torch.manual_seed(1)
    state = relax.state_dict()
    hidden = state["control.net.0.weight"].shape[0]
    est = get_estimator({"name": "relax", "hidden": hidden, "input_dim": 9})
    state["control.net.0.weight"] = torch.cat([state["control.net.0.weight"], 0.3 * torch.randn(hidden, 5)], 1)
    est.load_state_dict(state)
    n = 50_000
    logits = torch.tensor(LOGITS).expand(n, -1).clone().requires_grad_()
    w = torch.full((n,), 1.2, requires_grad=True)
    h = torch.randn(3, 5, requires_grad=True)
    context = torch.tanh(torch.randn(n, 3) @ h)  # (n, 5): one row per input
    el, ew = exact()
    for mode in ("eval", "train"):
        getattr(est, mode)()
        s = est.sample(Categorical(logits=logits))
        gl, gw, gh = torch.autograd.grad(est.loss(s, cost_of(s.value, w), context=context), [logits, w, h],
                                         allow_unused=True)
        assert gh is None or not gh.any(), mode
        assert_within(gl * n, el)
        assert_within(gw.unsqueeze(1) * n, ew.reshape(1))


def test_the_variance_signal_is_the_squared_norm_of_the_estimate_the_model_gets():
    """Seed 2, B = (8, 2), C = (8,), n = 2, a context, a control variate that is not zero: the squared norm the
    control variate is trained on (stats estimate_sq_norm, the mean over inputs of |g|^2, g the estimate's
    gradient to that input's 2 x 3 logits) is the one of the gradient the logits get from the loss, to 1e-4
    relative; that gradient is the same in training and evaluation mode."""
    torch.manual_seed(2)
    est = get_estimator({"name": "relax", "hidden": 8})
    logits = (torch.randn(8, 2, 3) * 2).requires_grad_()  # not normalised, as an encoder's output
    context = torch.randn(8, 4)
    s = est.sample(Categorical(logits=logits), n=2)
    cost = pair_cost(s.value, torch.full((8,), 0.7))
    est.loss(s, cost, context=context)  # builds the lazy first layer
    torch.nn.init.normal_(est.control.net[2].weight)
    grads = {}
    for mode in ("eval", "train"):
        getattr(est, mode)()
        (grads[mode],) = torch.autograd.grad(est.loss(s, cost, context=context), logits, retain_graph=True)
    assert torch.allclose(grads["train"], grads["eval"], atol=1e-6)
    per_input = (grads["train"] * 8).pow(2).sum((1, 2))  # the loss averages over the 8 inputs
    assert float(est.stats["estimate_sq_norm"]) == pytest.approx(float(per_input.mean()), rel=1e-4)


def test_a_masked_category_leaves_every_gradient_finite():
    """Seed 3: a category masked by a -inf logit (never drawn) in training mode, a control variate that is not
    zero: the logits' and every control variate parameter's gradient finite (the temperature's too)."""
    torch.manual_seed(3)
    est = get_estimator({"name": "relax", "hidden": 8, "input_dim": 4})
    torch.nn.init.normal_(est.control.net[2].weight)
    logits = torch.tensor([0.3, float("-inf"), 1.0, -1.0]).expand(6, -1).clone().requires_grad_()
    s = est.sample(logits, n=2)
    assert not (s.index == 1).any()
    est.loss(s, cost_of(s.value, torch.full((6,), 1.2))).backward()
    assert torch.isfinite(logits.grad).all()
    for name, p in est.named_parameters():
        assert torch.isfinite(p.grad).all(), name


# ---- rebar: true ---------------------------------------------------------------------------------
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
    with pytest.raises(UserError, match="gives no cost function"):
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
