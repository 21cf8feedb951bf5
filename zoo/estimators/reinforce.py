"""Score-function estimator (REINFORCE, Williams 1992; Xu's softmax lecture notes "REINFORCE trick"; the "Hard
Attention" notes).

grad E_p[f(z)] = E_p[f(z) grad log p(z)]  because  f(z) grad p(z) = p(z) f(z) grad log p(z).
Works for any distribution with a differentiable log_prob (discrete ones included) and any cost,
even a non-differentiable one, but its variance is high, hence the baselines (``baselines.py``).

The surrogate returned by ``loss`` is  cost + (cost - b).detach() * (log p - (log p).detach()):
its value is the cost (so logging the loss logs the mean cost), its gradient is the pathwise
gradient of the cost (e.g. to a decoder: the "Hard Attention" notes' first term dlog p(y|s,a)/dW) plus the
score-function term (their second term log p(y|s,a) dlog p(s|a)/dW with f = -log p(y|s,a)).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Categorical, Distribution

from zoo.errors import UserError
from zoo.estimators.base import (
    Estimator,
    StochasticSample,
    as_distribution,
    categorical_logits,
    check_cost,
    one_hot_sample,
    sum_trailing,
)
from zoo.estimators.baselines import make_baseline
from zoo.estimators.config import DR_GRPO, GRPO, REINFORCE, REINFORCE_PP, RLOO


def reward_to_go(rewards: Tensor, gamma: float = 1.0, dim: int = -1) -> Tensor:
    """G_t = sum_{t' >= t} gamma^(t' - t) r_t' along ``dim`` (reverse discounted cumulative sum).

    Policy-gradient for sequences (the CS 182/282A notes, "Reward to Go"): the action at t cannot
    change rewards before t, so weighting grad log pi(a_t) by the reward-to-go instead of the full return
    removes variance without bias. ``rewards`` (..., T) -> (..., T).
    """
    r = rewards.movedim(dim, -1)
    if gamma == 1.0:
        out = r.flip(-1).cumsum(-1).flip(-1)
    else:
        T = r.shape[-1]
        t = torch.arange(T, device=r.device)
        power = (t[:, None] - t[None, :]).to(r.dtype)  # (T', T): t' - t
        disc = torch.where(power >= 0, torch.as_tensor(gamma, dtype=r.dtype, device=r.device) ** power, 0.0)
        out = r @ disc  # out[..., t] = sum_t' r[..., t'] gamma^(t'-t) [t' >= t]
    return out.movedim(-1, dim)


class Reinforce(Estimator):
    """Score function cost * grad log p with a baseline (unbiased with none, ema, batch_mean, rloo or learned; high
    variance; any distribution)."""

    spec = REINFORCE

    def __init__(self, options=None, **kwargs):
        super().__init__(options, **kwargs)
        o = self.options
        self.baseline = make_baseline(o.baseline, o.decay, o.context_dim, o.hidden)
        self.unbiased = self.requirements(o).unbiased  # False with a baseline that rescales the advantage
        self.stats: dict[str, Tensor] = {}  # last call's diagnostics (baseline, advantage std)

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        n = self._n(n)
        logits = categorical_logits(dist)
        with torch.no_grad():
            raw = dist.sample((n,)) if logits is None else Categorical(logits=logits).sample((n,))
        return self.observe(dist, raw)  # raw: (n, *B) categories, or (n, *B, *E) values

    def observe(self, dist: Distribution | Tensor, sample: Tensor) -> StochasticSample:
        """Wrap a sample drawn elsewhere (autoregressive generation, stochastic beam search) so that
        ``loss`` can score it: ``sample`` is (n, *B) integer categories for a categorical (its
        log-probs recomputed under ``dist``, e.g. by teacher forcing, carry the gradient), else values."""
        dist = as_distribution(dist)
        logits = categorical_logits(dist)
        if logits is None:
            return StochasticSample(value=sample, log_prob=dist.log_prob(sample), dist=dist)
        index = sample.long()  # (n, *B)
        if tuple(index.shape[1:]) != tuple(logits.shape[:-1]):
            raise UserError(f"observe: sample must be (n, *B) with B={tuple(logits.shape[:-1])}, "
                            f"got {tuple(index.shape)}")
        return one_hot_sample(dist, logits, index)

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        cost = check_cost(s, cost, self.name)  # (n, *C)
        log_prob = sum_trailing(s.log_prob, cost.dim())  # (n, *C): joint log-prob of what each cost scores
        c = cost.detach()
        adv, b, aux = self.baseline.advantage(c, context)  # (n, *C); b broadcastable to it; no grad
        surrogate = cost + adv * (log_prob - log_prob.detach())  # value = cost, grad = pathwise + score
        loss = surrogate.mean(0).mean()
        if aux is not None:  # learned baseline regression: gradient only, zero value
            w = self.options.baseline_weight
            loss = loss + w * (aux - aux.detach())
        if self.options.entropy_weight:
            loss = loss - self.options.entropy_weight * _entropy(s.dist).mean()
        # diagnostics for logging, as detached tensors (no GPU sync here)
        self.stats = {"baseline": b.detach().float().mean(), "advantage_std": adv.float().std(unbiased=False)}
        if aux is not None:
            self.stats["baseline_mse"] = aux.detach()
        return loss


def _entropy(dist: Distribution) -> Tensor:
    try:
        return dist.entropy()
    except NotImplementedError:
        raise UserError(f"entropy_weight needs dist.entropy(), which {type(dist).__name__} lacks") from None


class RLOO(Reinforce):
    """REINFORCE with the leave-one-out baseline over n >= 2 samples (unbiased; Kool et al. 2019)."""

    spec = RLOO


class GRPO(Reinforce):
    """REINFORCE with GRPO's group-normalised advantage (f - mean) / std over n >= 2 samples per input (biased;
    "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models")."""

    spec = GRPO


class DrGRPO(Reinforce):
    """REINFORCE with Dr. GRPO's advantage f - the group's mean, its own cost included: (n - 1) / n times rloo's
    (biased by that factor; "Understanding R1-Zero-Like Training: A Critical Perspective")."""

    spec = DR_GRPO


class ReinforcePP(Reinforce):
    """REINFORCE with REINFORCE++'s batch-normalised advantage (f - batch mean) / batch std (biased; "REINFORCE++:
    A Simple and Efficient Approach for Aligning Large Language Models")."""

    spec = REINFORCE_PP
