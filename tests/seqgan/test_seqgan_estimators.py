"""SeqGAN's generator with the registry's estimators, checked against the exact gradient of a tiny instance:
V = 3 tokens, T = 3, so all 27 sequences are enumerated in float64 and

    grad E[cost] = -grad sum_Y p(Y) D(Y) / T

(every path estimates grad E[-D(Y)] / T: the score-function loss averages T per-token terms). D is fixed
(eval mode), with its output layer scaled so its scores spread over (0, 1); while adversarial training has
not started the rollouts complete prefixes with G itself, so the rollout estimate of Q is unbiased.
An estimate is the mean of K = 40 gradients of ``estimator_loss`` (each over 400 sequences), drawn after
torch.manual_seed(0); its standard error is their standard deviation / sqrt(K).
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from seqgan_testlib import fit, tiny_data, tiny_model
from torch.distributions import Categorical

from zoo.estimators import StochasticSample
from zoo.models.seqgan.rollout import rollout_rewards

V, T, K, ROWS = 3, 3, 40, 400


def instance(estimator, **over):
    dm = tiny_data(vocab_size=V, seq_len=T, num_train=64, num_val=16, num_test=16, batch_size=32)
    model = tiny_model(dm, estimator=estimator, dis_filter_sizes=[1, 2, 3], dis_num_filters=[8, 8, 8],
                       gen_emb_dim=4, gen_hidden_dim=4, adv_batch_size=ROWS, **over).double()
    with torch.no_grad():
        model.gen.init_normal(0.5, torch.Generator().manual_seed(1))  # a G far from uniform
        model.dis.out.weight.mul_(30)  # D's scores spread over (0, 1): a gradient worth estimating
        control = getattr(model.estimator, "control", None)
        if control is not None:  # relax: a control variate far from zero (its output layer starts at zero), so
            # that the estimate leans on its correction terms
            torch.nn.init.normal_(control.net[2].weight, generator=torch.Generator().manual_seed(2))
    model.dis.eval()
    return model


def expected_reward(model) -> torch.Tensor:
    """E[D(Y)] = sum over all V^T sequences of p(Y) D(Y), in float64, differentiable in G."""
    seqs = torch.tensor(list(itertools.product(range(V), repeat=T)))  # (27, T)
    logp = model.gen(seqs).log_softmax(-1).gather(-1, seqs.unsqueeze(-1)).squeeze(-1).sum(1)  # (27,)
    with torch.no_grad():
        d = torch.sigmoid(model.dis(seqs))  # (27,)
    return (logp.exp() * d).sum()


def flat_grad(loss, params) -> torch.Tensor:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def exact_gradient(model) -> torch.Tensor:
    return flat_grad(-expected_reward(model) / T, list(model.gen.parameters()))


def estimates(model) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, standard error) of K gradient estimates to G's parameters."""
    torch.manual_seed(0)
    params = list(model.gen.parameters())
    g = torch.stack([flat_grad(model.estimator_loss(None), params) for _ in range(K)])  # (K, P)
    return g.mean(0), g.std(0) / K**0.5


SLOW = pytest.mark.slow  # the default suite keeps one estimator of each kind (a few seconds each)
UNBIASED = {
    "reinforce (the paper: rollouts, no baseline)": ("reinforce", {"rollouts": 4}),
    "rloo, group of 4, rollouts": ("rloo", {"group_size": 4, "rollouts": 4}),
    "rloo, group of 4, no rollouts": ("rloo", {"group_size": 4, "rollouts": 0}),
    "reinforce + rloo baseline, group of 3, no rollouts": ({"name": "reinforce", "baseline": "rloo"},
                                                          {"group_size": 3, "rollouts": 0}),
    "reinforce + ema, group of 2": ({"name": "reinforce", "baseline": "ema"}, {"group_size": 2, "rollouts": 2}),
    "reinforce + batch_mean, no rollouts": ({"name": "reinforce", "baseline": "batch_mean"}, {"rollouts": 0}),
    "reinforce + learned": ({"name": "reinforce", "baseline": "learned"}, {"rollouts": 2}),
    "relax, rollouts": ("relax", {"rollouts": 2}),
    "relax, no rollouts": ("relax", {"rollouts": 0}),
}


FAST = ("rloo, group of 4, no rollouts",)


@pytest.mark.parametrize("label", [pytest.param(k, marks=() if k in FAST else SLOW) for k in UNBIASED])
def test_unbiased_estimators_agree_with_the_exact_gradient(label):
    """Each coordinate of the mean estimate within 5 standard errors of the exact gradient (seed 0, K = 40
    estimates of 400 sequences; with ~190 coordinates a t(39) deviate beyond 5 has probability ~0.2% in all),
    and the estimate is informative: its error is under a tenth of the exact gradient's norm (measured: 2%)."""
    estimator, over = UNBIASED[label]
    model = instance(estimator, **over)
    exact = exact_gradient(model)
    mean, se = estimates(model)
    z = (mean - exact).abs() / se.clamp_min(1e-12)
    assert z.max() < 5, f"{label}: {z.max():.2f} standard errors off"
    assert (mean - exact).norm() < 0.1 * exact.norm()


@pytest.mark.parametrize("estimator", ["gumbel_softmax", pytest.param("straight_through", marks=SLOW)])
def test_relaxed_estimators_are_biased(estimator):
    """Gumbel-softmax and straight-through (tau = 1, the default) estimate the gradient of D at relaxed rows, not
    of E[D(Y)]: their mean (seed 0, K = 40 x 400 sequences) is over 5 standard errors from the exact gradient
    (labelled biased in the registry; measured for gumbel_softmax: 157), while still pointing the same way."""
    model = instance(estimator)
    exact = exact_gradient(model)
    mean, se = estimates(model)
    assert not type(model.estimator).capabilities.unbiased
    assert ((mean - exact).abs() / se.clamp_min(1e-12)).max() > 5
    assert torch.dot(mean, exact) > 0


@pytest.mark.parametrize("estimator, over", [
    ("rloo", {"group_size": 4, "rollouts": 0}),
    pytest.param({"name": "reinforce", "baseline": "rloo"}, {"group_size": 4, "rollouts": 2}, marks=SLOW),
    ("gumbel_softmax", {}),
    pytest.param("straight_through", {}, marks=SLOW),
    pytest.param("relax", {"rollouts": 0}, marks=SLOW),
])
def test_a_few_steps_raise_the_expected_reward(estimator, over):
    """20 Adam steps (lr 0.05) on each new estimator's surrogate raise the exact E[D(Y)] of the tiny instance
    (seed 0)."""
    model = instance(estimator, **over)
    before = expected_reward(model).item()
    opt = torch.optim.Adam(list(model.gen.parameters()) + list(model.estimator.parameters()), lr=0.05)
    torch.manual_seed(0)
    for step in range(20):
        opt.zero_grad()
        model.estimator_loss(None).backward()
        opt.step()
        model.estimator.set_step(step + 1)
    after = expected_reward(model).item()
    assert after > before + 0.02, (before, after)


def test_the_default_path_draws_and_scores_as_before():
    """The paper's setting (reinforce, no baseline, rollouts, group_size 1): the same sequences, rewards and
    gradient (torch.equal) as the plain draw, rewards and REINFORCE loss written out below, for a fixed seed."""
    dm = tiny_data()
    model = tiny_model(dm)
    params = list(model.gen.parameters())
    loss, q = model.g_loss(torch.Generator().manual_seed(7))
    new = flat_grad(loss, params)
    g = torch.Generator().manual_seed(7)  # the draw, the rewards and the policy-gradient loss, inline
    seqs = model.gen.sample(model.cfg.adv_batch_size, model.seq_len, generator=g)
    old_q = rollout_rewards(model.gen, model.dis, seqs, model.cfg.rollouts, batched=True, generator=g,
                            chunk=model.cfg.d_chunk)
    h, _ = model.gen.lstm(model.gen.embed(model.gen.inputs(seqs)))
    dist = Categorical(logits=model.gen.head(h).unsqueeze(0))
    index = seqs.unsqueeze(0)
    s = StochasticSample(value=F.one_hot(index, model.gen.vocab_size).float(), log_prob=dist.log_prob(index),
                         dist=dist, index=index)
    old = flat_grad(model.estimator.loss(s, -old_q.unsqueeze(0), context=h.detach()), params)
    assert torch.equal(q, old_q) and torch.equal(new, old)
    assert not model.est_draws


def test_d_reads_one_hot_rows_as_it_reads_tokens():
    model = tiny_model(tiny_data()).eval()
    seqs = model.gen.sample(16, model.seq_len, generator=torch.Generator().manual_seed(0))
    rows = F.one_hot(seqs, model.gen.vocab_size).float().requires_grad_()
    logits = model.dis.forward_onehot(rows)
    assert torch.allclose(logits, model.dis(seqs), atol=1e-5)
    logits.sum().backward()
    assert rows.grad.abs().sum() > 0  # a relaxed row's gradient reaches G


def test_a_relaxed_estimator_trains_in_the_loop_and_steps_its_temperature_schedule():
    """Two adversarial iterations of two G steps each under Lightning: the schedule stands at step 4,
    tau = max(tau_min, tau exp(-rate 4)), and G moved."""
    dm = tiny_data()
    model = tiny_model(dm, estimator={"name": "gumbel_softmax", "anneal_rate": 0.2, "tau_min": 0.1},
                       adv_iterations=2, adv_g_steps=2, eval_samples=64, test_samples=64)
    before = [p.detach().clone() for p in model.gen.parameters()]
    fit(model, dm)
    assert model.estimator.temperature == pytest.approx(math.exp(-0.2 * 4))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.gen.parameters()))
