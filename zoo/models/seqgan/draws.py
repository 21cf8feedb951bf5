"""How G's tokens reach the estimator: the group layout, the rewards, and the draw by the estimator.

- ``group_layout``: an estimator that needs n >= 2 samples per input (rloo, reinforce with baseline
  rloo) gets the ``group_size`` sequences of a start as its sample dim, cost (n, B, T); every other
  estimator gets them folded into the batch, cost (1, n B, T) (n independent sequences per start).
- ``sequence_rewards``: Q (R, T) from the paper's Monte Carlo rollouts, or with ``rollouts=0`` the
  sequence's final D score for every token (the rollout-free reward of group baselines).
- ``draw_with_estimator``: estimators that draw their samples themselves (``own_samples``: relax keeps
  the Gumbel noise of each draw; ``differentiable_cost``: gumbel_softmax and straight_through relax the
  token) draw G's tokens one by one with ``est.sample``; G reads each drawn row through its embedding
  (``value @ E``, which is E[y] for a one-hot), so the next token's logits follow the relaxed path, and D
  reads the whole (T, V) rows the same way (``Discriminator.forward_onehot``). Relaxed estimators then
  backpropagate through D's score of the sequence (Kusner & Hernandez-Lobato 2016, "GANs for sequences of
  discrete elements with the Gumbel-softmax distribution"), so rollouts are not used; relax scores the
  hard tokens with the rewards above, one cost per token, its control variate reading one token's relaxed
  value and G's state h_t. RELAX stays unbiased there: token t's logits depend only on the hard prefix,
  which the estimate for token t holds fixed, and the per-token terms sum to the policy gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Categorical

from zoo.estimators import StochasticSample
from zoo.models.seqgan.nets import LSTMLM, Discriminator
from zoo.models.seqgan.rollout import rollout_rewards


def requirements(est: Any):
    """The estimator's capabilities for its options (None: a user's estimator that declares none)."""
    caps = getattr(est, "capabilities", None)
    options = getattr(est, "options", None)
    if caps is not None and dataclasses.is_dataclass(options) and hasattr(type(est), "requirements"):
        return type(est).requirements(options)
    return caps


def estimator_draws(est: Any) -> bool:
    """True when the estimator must draw G's tokens itself (its noise, or a relaxed value D reads)."""
    caps = requirements(est)
    return caps is not None and (caps.own_samples or caps.differentiable_cost)


def group_layout(est: Any, group_size: int) -> int:
    """The sample dim n of the cost: the group for estimators that need n >= 2 per input, else 1."""
    caps = requirements(est)
    return group_size if caps is not None and caps.min_samples >= 2 else 1


@torch.no_grad()
def sequence_rewards(rollout: LSTMLM, dis: Discriminator, seqs: Tensor, rollouts: int, batched: bool,
                     generator: torch.Generator | None, chunk: int) -> Tensor:
    """Q (R, T) for sequences (R, T): the rollout estimate, or (``rollouts=0``) D(Y) for every token."""
    if rollouts:
        return rollout_rewards(rollout, dis, seqs, rollouts, batched=batched, generator=generator, chunk=chunk)
    was_training = dis.training
    dis.eval()  # D scores without dropout
    try:
        return dis.prob_real(seqs, chunk).unsqueeze(1).expand(seqs.shape).clone()  # (R, T)
    finally:
        dis.train(was_training)


def _stack_extras(steps: list[dict]) -> dict:
    """Per-token extras (tensors (1, R, ...), or tuples of them) stacked along a new token dim 2."""
    out = {}
    for key, first in steps[0].items():
        if isinstance(first, Tensor):
            out[key] = torch.stack([e[key] for e in steps], 2)
        elif isinstance(first, tuple) and all(isinstance(x, Tensor) for x in first):
            out[key] = tuple(torch.stack([e[key][i] for e in steps], 2) for i in range(len(first)))
        else:
            out[key] = steps[-1][key]  # a number, e.g. the temperature
    return out


def draw_sequences(gen: LSTMLM, est: Any, rows: int, seq_len: int) -> tuple[StochasticSample, Tensor]:
    """``rows`` sequences drawn token by token with ``est.sample``; G reads each drawn row as ``value @ E``.
    Returns the sample (value (1, R, T, V), log_prob / index (1, R, T), dist of batch (R, T)) and the
    states h_t (R, T, H) each token was drawn from."""
    emb = gen.embed.weight  # (V, E)
    h, c = gen.start(rows)  # (R, H) each
    logits, values, index, extras, states = [], [], [], [], []
    for t in range(seq_len):
        lg = gen.head(h).log_softmax(-1)  # (R, V)
        s = est.sample(Categorical(logits=lg), n=1)
        logits.append(lg)
        values.append(s.value[0])  # (R, V): one-hot, relaxed, or straight-through
        index.append(s.index[0])  # (R,)
        extras.append(s.extras)
        states.append(h)
        if t + 1 < seq_len:
            x = (s.value[0].to(emb.dtype) @ emb).unsqueeze(1)  # (R, 1, E)
            _, (hh, cc) = gen.lstm(x, (h.unsqueeze(0), c.unsqueeze(0)))
            h, c = hh.squeeze(0), cc.squeeze(0)
    dist = Categorical(logits=torch.stack(logits, 1))  # batch (R, T)
    idx = torch.stack(index, 1).unsqueeze(0)  # (1, R, T)
    sample = StochasticSample(value=torch.stack(values, 1).unsqueeze(0), log_prob=dist.log_prob(idx), dist=dist,
                              index=idx, extras=_stack_extras(extras))
    return sample, torch.stack(states, 1)


def draw_with_estimator(model: Any, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """(G's surrogate loss, rewards Q (R, T)) when the estimator draws the tokens (see the module doc)."""
    c, est = model.cfg, model.estimator
    sample, states = draw_sequences(model.gen, est, c.group_size * c.adv_batch_size, model.seq_len)
    caps = requirements(est)
    if caps.differentiable_cost:
        was_training = model.dis.training
        model.dis.eval()  # D scores without dropout, as the rollouts do
        try:
            prob = torch.sigmoid(model.dis.forward_onehot(sample.value[0]))  # (R,), differentiable in the rows
        finally:
            model.dis.train(was_training)
        q = prob.detach().unsqueeze(1).expand(sample.index.shape[1:])  # (R, T), for logging
        # cost (1, R), one per sequence: -D / T, so the gradient estimates grad E[-D(Y)] / T as the score path's
        # per-token mean does: the estimator matrix's rows compare gradient variances on one scale
        return est.loss(sample, -prob.unsqueeze(0) / sample.index.shape[-1]), q
    q = model.rewards(sample.index[0], generator)  # (R, T)
    return est.loss(sample, -q.unsqueeze(0), context=states.detach()), q  # cost (1, R, T): -Q per token
