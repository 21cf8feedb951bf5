"""Registry behaviour, option validation, error messages, state, and small exact checks."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import pytest
import torch
from torch.distributions import Categorical, Normal, OneHotCategorical

from zoo.errors import UserError
from zoo.estimators import (
    ESTIMATORS,
    Estimator,
    StochasticSample,
    get_estimator,
    list_estimators,
    register_estimator,
    reward_to_go,
)


def test_builtins_registered_and_flagged():
    names = list_estimators()
    for name in ["reparam", "reinforce", "rloo", "gumbel_softmax", "straight_through", "expectation"]:
        assert name in names
    assert get_estimator("reinforce").unbiased and not get_estimator("gumbel_softmax").unbiased


def test_unknown_name_suggests_close_names():
    with pytest.raises(UserError, match=r"unknown estimator 'reinfroce'.*did you mean: reinforce"):
        get_estimator("reinfroce")


def test_unknown_option_names_option_estimator_and_valid_options():
    with pytest.raises(UserError) as err:
        get_estimator("reinforce", baselin="ema")
    msg = str(err.value)
    assert "'baselin'" in msg and "'reinforce'" in msg and "did you mean: baseline" in msg and "decay" in msg


def test_bad_option_values():
    with pytest.raises(UserError, match="'baseline' in estimator 'reinforce' must be one of"):
        get_estimator("reinforce", baseline="mean")
    with pytest.raises(UserError, match="'tau'.*(?i:float)"):
        get_estimator("gumbel_softmax", tau="hot")
    with pytest.raises(UserError, match="'tau' in estimator 'gumbel_softmax' must be > 0"):
        get_estimator({"name": "gumbel_softmax", "tau": 0.0})
    with pytest.raises(UserError, match="no 'name'"):
        get_estimator({"baseline": "ema"})


def test_mapping_and_omegaconf_specs():
    from omegaconf import OmegaConf

    est = get_estimator({"name": "reinforce", "baseline": "ema", "decay": 0.8})
    assert est.options.decay == 0.8 and est.name == "reinforce"
    est = get_estimator(OmegaConf.create({"name": "gumbel_softmax", "tau": 0.5}))
    assert est.temperature == 0.5
    assert get_estimator(est) is est


def test_duplicate_registration_rejected():
    """A second class under a taken name is a user's mistake (a plugin's), one message naming both."""
    from zoo.errors import UserError

    with pytest.raises(UserError, match=r"two estimators are registered as 'reinforce': zoo.estimators.reinforce:"
                                        r"\w+ and zoo.estimators.base:Estimator; give one of them another name"):
        register_estimator("reinforce")(Estimator)


def test_own_estimator_by_register_and_by_dotted_path(tmp_path, monkeypatch):
    (tmp_path / "my_estimators.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from zoo.estimators import Estimator, StochasticSample

        @dataclass
        class Options:
            scale: float = 1.0  # multiplies the cost

        class Scaled(Estimator):
            """Pathwise estimator with a scaled cost."""
            Config = Options
            def sample(self, dist, n=None):
                value = dist.rsample((self._n(n),))
                return StochasticSample(value=value, log_prob=dist.log_prob(value), dist=dist)
            def loss(self, s, cost, context=None):
                return self.options.scale * cost.mean()
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    est = get_estimator("my_estimators:Scaled", scale=2.0)
    mu = torch.tensor(1.0, requires_grad=True)
    s = est.sample(Normal(mu, 1.0), n=3)
    est.loss(s, s.value).backward()
    assert abs(float(mu.grad) - 2.0) < 1e-6
    with pytest.raises(UserError, match="unknown option 'scal'"):
        get_estimator("my_estimators:Scaled", scal=2.0)
    with pytest.raises(UserError, match="cannot import module"):
        get_estimator("no_such_module:Thing")

    @register_estimator("test_scaled")
    class Registered(est.__class__):
        pass

    try:
        assert "test_scaled" in list_estimators()
        assert get_estimator("test_scaled", scale=3.0).options.scale == 3.0
    finally:
        ESTIMATORS._entries.pop("test_scaled")


def test_entropy_weight_adds_exact_entropy_gradient():
    logits = torch.tensor([[0.5, -0.3, 1.2], [0.0, 0.1, -2.0]], requires_grad=True)
    grads = {}
    for w in (0.0, 0.5):
        torch.manual_seed(0)  # same samples for both
        est = get_estimator("reinforce", entropy_weight=w)
        s = est.sample(logits, n=2)
        cost = (s.value * torch.tensor([1.0, 2.0, 4.0])).sum(-1)  # (2, 2)
        (grads[w],) = torch.autograd.grad(est.loss(s, cost), logits)
    (ent,) = torch.autograd.grad(Categorical(logits=logits).entropy().mean(), logits)
    assert not torch.allclose(grads[0.0], grads[0.5])
    assert torch.allclose(grads[0.5] - grads[0.0], -0.5 * ent, atol=1e-6)


def test_reward_to_go_hand_example():
    r = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
    assert reward_to_go(r).tolist() == [[6.0, 5.0, 3.0], [1.0, 1.0, 1.0]]
    assert torch.allclose(reward_to_go(r, gamma=0.5), torch.tensor([[2.75, 3.5, 3.0], [0.25, 0.5, 1.0]]))
    assert torch.allclose(reward_to_go(r.T, gamma=0.5, dim=0), reward_to_go(r, gamma=0.5).T)


def test_clear_errors_for_wrong_use():
    with pytest.raises(UserError, match="rsample"):
        get_estimator("reparam").sample(torch.zeros(3))
    with pytest.raises(UserError, match="categorical"):
        get_estimator("expectation").sample(Normal(0.0, 1.0))
    with pytest.raises(UserError, match="categorical"):
        get_estimator("gumbel_softmax").sample(Normal(0.0, 1.0))
    est = get_estimator("rloo")
    s = est.sample(torch.zeros(4, 3), n=1)
    with pytest.raises(UserError, match="n >= 2"):
        est.loss(s, s.value.sum(-1))
    s = get_estimator("reinforce").sample(torch.zeros(4, 3), n=2)
    with pytest.raises(UserError, match=r"cost has shape \(4,\)"):
        get_estimator("reinforce").loss(s, torch.zeros(4))
    ex = get_estimator("expectation")
    s = ex.sample(torch.zeros(4, 2, 3))  # B = (4, 2)
    with pytest.raises(UserError, match="one cost per categorical"):
        ex.loss(s, torch.zeros(3, 4))
    learned = get_estimator("reinforce", baseline="learned")
    s = learned.sample(torch.zeros(4, 3))
    with pytest.raises(UserError, match="context=features"):
        learned.loss(s, s.value.sum(-1))


def test_sample_shapes_and_values():
    logits = torch.randn(5, 2, 4)
    for name in ["reinforce", "gumbel_softmax", "straight_through"]:
        s = get_estimator(name).sample(logits, n=3)
        assert isinstance(s, StochasticSample)
        assert s.value.shape == (3, 5, 2, 4) and s.index.shape == (3, 5, 2) and s.log_prob.shape == (3, 5, 2)
        assert torch.equal(s.value.argmax(-1), s.index)
    st = get_estimator("straight_through").sample(logits, n=3).value
    assert torch.equal(st, torch.nn.functional.one_hot(st.argmax(-1), 4).float())  # hard forward
    s = get_estimator("reinforce").sample(OneHotCategorical(logits=logits))
    assert s.value.shape == (1, 5, 2, 4)
    s = get_estimator("reinforce").sample(Normal(torch.zeros(5), 1.0), n=2)
    assert s.index is None and s.value.shape == (2, 5)
    assert get_estimator("rloo").sample(logits).n == 2  # rloo's default n


def test_ema_baseline_state():
    est = get_estimator("reinforce", baseline="ema", decay=0.9)
    logits = torch.zeros(4, 3)
    for mean_cost in (10.0, 20.0):
        s = est.sample(logits)
        est.loss(s, torch.full((1, 4), mean_cost))
    assert math.isclose(float(est.baseline.value), 0.9 * 10 + 0.1 * 20, rel_tol=1e-6)
    assert "baseline.value" in est.state_dict()
    est.eval()  # evaluation does not move the baseline
    est.loss(est.sample(logits), torch.full((1, 4), 100.0))
    assert math.isclose(float(est.baseline.value), 11.0, rel_tol=1e-6)
    fresh = get_estimator("reinforce", baseline="ema")
    fresh.load_state_dict(est.state_dict())
    assert math.isclose(float(fresh.baseline.value), 11.0, rel_tol=1e-6)


def test_temperature_schedule():
    est = get_estimator("gumbel_softmax", tau=1.0, tau_min=0.5, anneal_rate=0.01)
    assert est.temperature == 1.0
    est.set_step(1)
    assert math.isclose(est.temperature, math.exp(-0.01))
    est.set_step(1000)
    assert est.temperature == 0.5
    fresh = get_estimator("gumbel_softmax", tau=1.0, tau_min=0.5, anneal_rate=0.01)
    fresh.load_state_dict(est.state_dict())
    assert fresh.temperature == 0.5
    with pytest.raises(UserError, match="tau_min"):
        get_estimator("gumbel_softmax", tau=0.3, anneal_rate=0.1)


def test_loss_value_is_the_mean_cost():
    """The score-function surrogate's value is the mean cost (so logging the loss logs the cost)."""
    logits = torch.randn(6, 3, requires_grad=True)
    for spec in ["reinforce", "rloo", {"name": "reinforce", "baseline": "learned", "context_dim": 0}]:
        est = get_estimator(spec)
        s = est.sample(logits, n=2)
        cost = (s.value * torch.tensor([1.0, 2.0, 3.0])).sum(-1)
        assert torch.allclose(est.loss(s, cost), cost.mean())


def test_observe_scores_samples_drawn_elsewhere():
    """SeqGAN / beam-search use: tokens drawn elsewhere, log-probs by teacher forcing, a cost per token."""
    logits = torch.randn(2, 3, 5, requires_grad=True)  # (batch, T, V)
    tokens = torch.tensor([[[1, 4, 0], [2, 2, 3]]])  # (n=1, batch, T)
    cost = torch.tensor([[[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]]])  # (1, batch, T): C = B
    est = get_estimator("reinforce")
    s = est.observe(logits, tokens)
    assert torch.equal(s.index, tokens) and s.value.shape == (1, 2, 3, 5)
    (g,) = torch.autograd.grad(est.loss(s, cost), logits)
    lp = torch.log_softmax(logits, -1).gather(-1, tokens[0].unsqueeze(-1)).squeeze(-1)
    (expected,) = torch.autograd.grad((cost[0] * lp).mean(), logits)
    assert torch.allclose(g, expected, atol=1e-6)
    with pytest.raises(UserError, match="observe"):
        est.observe(logits, tokens[:, :1])


def test_the_readme_table_names_every_registered_estimator():
    """README's estimator table is where users first see what the registry holds: no entry left out."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme[readme.index("## Gradient estimators"):readme.index("### Your own estimator")]
    named = {name for line in table.splitlines() if line.startswith("| `")
             for name in re.findall(r"`(\w+)`", line.split("|")[1])}
    builtin = {n for n in list_estimators() if ESTIMATORS.entry(n).obj.__module__.startswith("zoo.")}  # not tests'
    assert len(builtin) >= 13 and builtin <= named, f"README's estimator table lacks {builtin - named}"
