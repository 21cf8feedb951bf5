"""RELAX (Grathwohl, Choi, Wu, Roeder & Duvenaud, ICLR 2018) for categorical variables.

A score-function estimator whose control variate c_phi is a learned function of the *relaxed*
sample, corrected so that it stays unbiased for every phi. With z = logits + G the Gumbel-perturbed
logits (G iid Gumbel(0)), b = argmax z the categorical sample, and z~ ~ p(z | b) a second,
independent draw of the perturbed logits given the same b:

    g = [f(b) - c(z~)] grad log p(b) + grad c(z) - grad c(z~)

E[grad c(z)] = grad E[c(z)] (z is reparameterised) = E[c(z~) grad log p(b) + grad c(z~)] (the same
expectation taken over b first, then z~ given b, also reparameterised), so the two correction
terms cancel the control variate's bias exactly, whatever c is. f needs no gradient: it is only
evaluated at the hard sample, so RELAX fits the nodes REINFORCE fits (the categorical latents of
"Deep Learning" (Goodfellow et al.), 20.9.1 "Back-Propagating through Discrete Stochastic Operations";
the CS 182/282A notes' policy gradient), and c can be far better than a constant baseline because
it sees the sample itself.

c_phi is trained to minimise the estimator's variance: d/dphi E[g^2] (E[g] does not depend on
phi), with g the gradient with respect to the node's logits, per input; computing it
differentiates g, a gradient, once more (``torch.autograd.grad(create_graph=True)``) but only
through the control variate and the logits, not the model. The control variate reads
softmax(z / tau) (tau learned with phi, as in the paper), flattened over the variables that share
one cost, and the model's features when it passes some (``context``): an MLP with one hidden layer
whose output layer starts at zero, measured from a running mean of the cost in units of its running
spread (the first steps are REINFORCE with a moving-average baseline).
With ``rebar: true`` the control variate also holds REBAR's term (Tucker et al. 2017), as the
paper's discrete VAE does: c(z) = eta * f(softmax(z / tau)) + MLP, f the model's own cost evaluated
at the relaxed sample (the model passes ``cost_fn``; its node declares ``cost_function``), eta
learned. Its gradient to the logits runs through the cost, so that estimate is taken explicitly
(``torch.autograd.grad`` on a copy of the logits) and handed to the logits alone: the model's own
parameters inside f get only the pathwise gradient of the cost at the hard sample, as without it.

Sequential draws (``control: per_variable``): where each variable is drawn given the earlier draws
(b_t ~ p(b_t | b_<t), e.g. an attention location per word), z_t depends on b_<t through a step
function, so E[grad c(z)] = grad E[c(z)] fails for a c of all the variables at once. Conditioned on
b_<t the identity holds for one variable, so the control variate is a sum of per-variable ones,
sum_t c(z_t), each scored against its own variable's log-prob:

    g = f(b) grad log p(b) + sum_t [- c(z~_t) grad log p(b_t | b_<t) + grad c(z_t) - grad c(z~_t)]

with every per-step term zero in expectation given b_<t (the tower rule), so the estimate stays unbiased.

z~ given b (the paper's appendix): z~_b ~ Gumbel(0) (the maximum of Gumbels with locations
logits, which sum to 1 in probability), and for i != b a Gumbel with location logits_i truncated
below z~_b (``gumbel.truncated_gumbel``'s formula, with its exponential noise kept so that z~ can
be recomputed from the logits).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import Distribution
from torch.func import functional_call
from torch.nn.parameter import is_lazy

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
from zoo.estimators.config import RELAX
from zoo.estimators.gumbel import sample_exponential, sample_gumbel, truncated_gumbel


def per_sample(logits: Tensor, index: Tensor) -> Tensor:
    """The logits (n, *B, K) of each of the n samples ``index`` (n, *B): logits (*B, K) shared by the samples
    are expanded; logits that are already per sample (a sequence's, which depend on its earlier draws) are
    returned as they are."""
    if logits.dim() == index.dim() + 1:
        return logits
    return logits.expand(len(index), *logits.shape)


def per_variable_cost(cost: Tensor, index: Tensor) -> Tensor:
    """cost (n, *C) broadcast to the variables it scores (n, *B) (C a prefix of B)."""
    return cost.reshape(*cost.shape, *([1] * (index.dim() - cost.dim()))).expand_as(index)


def conditional_gumbel(phi: Tensor, index: Tensor, top: Tensor, exponential: Tensor) -> Tensor:
    """Gumbel-perturbed logits z~ ~ p(z | argmax z = index) from noise drawn beforehand.

    phi (..., K) normalised logits; index (...) the argmax; top (...) standard Gumbel noise, the
    maximum; exponential (..., K) Exp(1) noise. The others are Gumbel(phi_i) truncated at ``top``.
    Differentiable in phi."""
    top = top.unsqueeze(-1)  # (..., 1)
    below = truncated_gumbel(phi, top, exponential=exponential)  # (..., K)
    at_max = F.one_hot(index, phi.shape[-1]).bool()
    return torch.where(at_max, top.expand_as(below), below)


class ControlVariate(nn.Module):
    """c_phi = m + s * MLP(softmax(z / tau), context) -> one value per cost, with m and s a running mean
    and spread of the cost (from earlier batches: constants for this one, so the estimate stays
    unbiased). In those units the MLP learns at the model's learning rate whatever the cost's scale;
    its output layer starts at zero, so the first steps are REINFORCE with a moving-average baseline."""

    def __init__(self, tau: float, hidden: int, input_dim: int | None, decay: float, eta: float | None = None):
        super().__init__()
        if eta is not None:  # REBAR's scale; absent without rebar, so that a checkpoint saved without it loads as it is
            self.eta = nn.Parameter(torch.tensor(float(eta)))
        first = nn.LazyLinear(hidden) if input_dim is None else nn.Linear(input_dim, hidden)
        self.net = nn.Sequential(first, nn.Tanh(), nn.Linear(hidden, 1))
        nn.init.zeros_(self.net[2].weight)
        nn.init.zeros_(self.net[2].bias)
        self.log_tau = nn.Parameter(torch.tensor(math.log(tau)))
        self.decay = decay
        # the control variate's origin m and unit s: m <- decay * m + (1 - decay) * batch mean (as the EMA
        # baseline), s likewise with the batch's spread
        self.register_buffer("cost_mean", torch.zeros(()))  # m (saved in checkpoints)
        self.register_buffer("cost_scale", torch.ones(()))  # s
        self.register_buffer("count", torch.zeros((), dtype=torch.long))  # updates so far

    @torch.no_grad()
    def observe(self, cost: Tensor) -> None:
        """Update m and s with this batch's costs, after they were used (training only)."""
        mean, spread = cost.mean().to(self.cost_mean), cost.std(unbiased=False).to(self.cost_mean)
        first = self.count == 0  # the first update takes the batch's own; torch.where: no host sync
        self.cost_mean.copy_(torch.where(first, mean, self.decay * self.cost_mean + (1 - self.decay) * mean))
        spread = torch.where(first, spread, self.decay * self.cost_scale + (1 - self.decay) * spread)
        self.cost_scale.copy_(spread.clamp_min(1e-6))
        self.count += 1

    def relaxed(self, z: Tensor) -> Tensor:
        """softmax(z / tau) (n, *B, K); a masked category (-inf) gives 0, not NaN, in tau's gradient."""
        return torch.softmax(z.clamp_min(-1e4) / self.log_tau.exp().to(z.dtype), dim=-1)

    def forward(self, z: Tensor, cost_dims: int, context: Tensor | None) -> Tensor:
        """z (n, *B, K) perturbed logits; the first ``cost_dims`` dims are the cost's (n, *C);
        context (*C, F) or None -> (n, *C)."""
        dtype = self.log_tau.dtype  # the module's (float64 under trainer.precision=64)
        x = self.relaxed(z.to(dtype)).flatten(cost_dims)  # (n, *C, values per cost)
        values = x.shape[-1]
        if context is not None:
            x = torch.cat([x, context.detach().to(dtype).expand(*x.shape[:cost_dims], -1)], -1)
        first = self.net[0]
        if not is_lazy(first.weight) and first.weight.shape[1] != x.shape[-1]:  # a loaded lazy one: in_features 0
            raise UserError(f"estimator 'relax': input_dim={first.weight.shape[1]}, but its control variate reads "
                            f"{x.shape[-1]} values per cost ({values} of the relaxed sample + "
                            f"{x.shape[-1] - values} of the model's features): give input_dim={x.shape[-1]}, or "
                            "leave it out to size it at the first batch")
        # copies: observe() updates the buffers in place while this graph still needs them
        out = self.cost_mean.clone() + self.cost_scale.clone() * self.net(x).squeeze(-1)  # (n, *C)
        return out.to(z.dtype)  # in the sample's dtype


class Relax(Estimator):
    """Score function, learned control variate of the relaxed sample (unbiased; Grathwohl et al. 2018; categoricals)."""

    spec = RELAX

    def __init__(self, options=None, **kwargs):
        super().__init__(options, **kwargs)
        o = self.options
        if o.rebar and o.control == "per_variable":
            raise UserError("estimator 'relax': rebar: true evaluates the cost at a relaxed sample of every variable "
                            "at once, so it needs control: joint (or auto on a node whose draws are independent)")
        self.control = ControlVariate(o.tau, o.hidden, o.input_dim, o.decay, o.eta if o.rebar else None)
        # per_variable: one control variate per categorical variable, read from its own relaxed sample
        self.per_variable = o.control == "per_variable"
        self.stats: dict[str, Tensor] = {}  # last call's diagnostics

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        dist = as_distribution(dist)
        logits = categorical_logits(dist)  # (*B, K), normalised
        if logits is None:
            raise UserError(f"estimator 'relax' needs a categorical distribution (or logits), got "
                            f"{type(dist).__name__}")
        n = self._n(n)
        phi = logits.expand(n, *logits.shape)  # (n, *B, K)
        with torch.no_grad():
            gumbel = sample_gumbel(phi)  # (n, *B, K): z = phi + gumbel
            top = sample_gumbel(phi[..., 0])  # (n, *B): z~'s maximum
            exponential = sample_exponential(phi)  # (n, *B, K): z~'s other values
        index = (phi.detach() + gumbel).argmax(-1)  # (n, *B)
        return one_hot_sample(dist, logits, index, extras={"relax_noise": (gumbel, top, exponential)})

    def _relaxed_pair(self, logits: Tensor, index: Tensor, noise: tuple) -> tuple[Tensor, Tensor]:
        gumbel, top, exponential = noise
        phi = per_sample(logits, index)  # (n, *B, K)
        return phi + gumbel, conditional_gumbel(phi, index, top, exponential)  # z, z~

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None, cost_fn=None) -> Tensor:
        """cost_fn (``rebar`` only): value (n, *B, K) -> (n, *C), the model's cost at a relaxed sample."""
        cost = check_cost(s, cost, self.name)  # (n, *C)
        noise = s.extras.get("relax_noise")
        if noise is None or s.index is None:
            raise UserError("estimator 'relax' scores only samples from its own sample(): it needs the Gumbel "
                            "noise behind each one (a model that assembles its samples itself cannot use it)")
        # (*B, K) or, a sequence's, (n, *B, K); normalised: what sample() drew from
        logits, c_dims = categorical_logits(s.dist), cost.dim()
        v_dims = s.index.dim() if self.per_variable else c_dims  # the control variate's outputs: (n, *B) or (n, *C)
        if is_lazy(self.control.net[0].weight):  # build the first layer before a parameter-free call
            with torch.no_grad():
                self.control(self._relaxed_pair(logits.detach(), s.index, noise)[0], v_dims, context)
        if self.options.rebar:
            if cost_fn is None:
                raise UserError("estimator 'relax' with rebar: true needs the model's cost at relaxed samples: "
                                "the model passes cost_fn= to loss() (a node with cost_function, e.g. the discrete "
                                "VAE)")
            return self._rebar_loss(s, logits, cost, context, noise, cost_fn)
        # the estimate, for the model: the control variate's parameters held fixed
        frozen = {k: v.detach() for k, v in self.control.named_parameters()}
        z, z_tilde = self._relaxed_pair(logits, s.index, noise)
        c_z = functional_call(self.control, frozen, (z, v_dims, context))  # (n, *C), per variable (n, *B)
        c_tilde = functional_call(self.control, frozen, (z_tilde, v_dims, context))
        log_prob = s.log_prob if self.per_variable else sum_trailing(s.log_prob, c_dims)  # as c_z
        f = per_variable_cost(cost.detach(), s.index) if self.per_variable else cost.detach()
        adv = f - c_tilde.detach()  # each variable's score against its own control variate
        # zero in expectation (per variable: given the earlier draws); its gradient cancels the control's bias
        correction = sum_trailing(c_z - c_tilde, c_dims)  # (n, *C)
        score = sum_trailing(adv * (log_prob - log_prob.detach()), c_dims)
        surrogate = cost + score + correction - correction.detach()
        loss = surrogate.mean(0).mean()  # value: the mean cost
        self.stats = {"control_variate": c_tilde.detach().float().mean(),
                      "advantage_std": adv.float().std(unbiased=False),
                      "tau": self.control.log_tau.detach().exp()}
        if self.training and torch.is_grad_enabled():
            variance = self._variance(s, logits, cost.detach(), context, noise)
            self.stats["estimate_sq_norm"] = variance.detach()
            loss = loss + self.options.variance_weight * (variance - variance.detach())  # gradient to phi only
        if self.training:  # as the EMA baseline: after use, in training mode only
            self.control.observe(cost.detach())
        return loss

    def _variance(self, s: StochasticSample, logits: Tensor, f: Tensor, context: Tensor | None,
                  noise: tuple) -> Tensor:
        """Mean over inputs of |g|^2, g the estimate's gradient to the logits (``_logit_estimate``),
        differentiable in phi (and only in phi: the logits are a detached copy)."""
        v_dims = s.index.dim() if self.per_variable else f.dim()
        g, _, _ = self._logit_estimate(s, logits, f, noise, lambda z: self.control(z, v_dims, context), True)
        return g.pow(2).sum() / max(f[0].numel(), 1)

    def _logit_estimate(self, s: StochasticSample, logits: Tensor, f: Tensor, noise: tuple, c,
                        create_graph: bool) -> tuple[Tensor, Tensor, Tensor]:
        """(g (*B, K), c(z~) (n, *C), f - c(z~)): g the estimate's gradient to the logits, each input's own,
        with control variate c (z (n, *B, K) -> (n, *C)), taken on a detached copy of the logits (with
        ``create_graph``: differentiable in c's parameters). It is taken through the normalisation, as the
        model's own logits get it: to the normalised ones, d log p(b) would be onehot(b), not onehot(b) - p."""
        cost_dims = f.dim()
        raw = logits.detach().requires_grad_()  # (*B, K): stands for the node's logits
        normalised = raw.log_softmax(-1)  # the same values, with the normalisation's gradient
        z, z_tilde = self._relaxed_pair(normalised, s.index, noise)
        phi = per_sample(normalised, s.index)  # (n, *B, K)
        log_prob = torch.gather(phi, -1, s.index.unsqueeze(-1)).squeeze(-1)  # (n, *B)
        if self.per_variable:
            f = per_variable_cost(f, s.index)  # (n, *B): each variable's score against its own c
        else:
            log_prob = sum_trailing(log_prob, f.dim())  # (n, *C)
        c_z, c_tilde = c(z), c(z_tilde)
        coefficient = f - c(z_tilde.detach())  # phi's path only: not differentiated to the logits
        terms = sum_trailing(coefficient * log_prob + c_z - c_tilde, cost_dims)  # (n, *C)
        per_input = terms.mean(0)  # (*C): mean over the n samples
        (g,) = torch.autograd.grad(per_input.sum(), raw, create_graph=create_graph)
        return g, c_tilde, coefficient

    def _rebar_loss(self, s: StochasticSample, logits: Tensor, cost: Tensor, context: Tensor | None, noise: tuple,
                    cost_fn) -> Tensor:
        """The estimate with c(z) = eta * f(softmax(z / tau)) + MLP, taken explicitly to the logits: g from
        ``torch.autograd.grad`` on a copy of them, handed to the model's logits by a linear surrogate (so the
        model's parameters inside f get nothing from the control variate), and |g|^2 differentiated to the
        control variate's parameters only."""
        control, c_dims, f = self.control, cost.dim(), cost.detach()

        def c(z: Tensor) -> Tensor:  # (n, *B, K) -> (n, *C)
            mlp = control(z, c_dims, context)
            return mlp + control.eta.to(mlp.dtype) * cost_fn(control.relaxed(z).to(z.dtype)).to(mlp.dtype)

        train_control = self.training and torch.is_grad_enabled()
        with torch.enable_grad():  # g is a gradient, also where the caller's loss needs none
            g, c_tilde, coefficient = self._logit_estimate(s, logits, f, noise, c, train_control)
        per_cost = max(f[0].numel(), 1)  # the loss averages over the inputs (the cost's C dims)
        to_logits = (g.detach() * logits).sum() / per_cost  # gradient g / per_cost to the (normalised) logits
        loss = cost.mean(0).mean() + (to_logits - to_logits.detach())  # value: the mean cost
        self.stats = {"control_variate": c_tilde.detach().float().mean(),
                      "advantage_std": coefficient.detach().float().std(unbiased=False),
                      "tau": control.log_tau.detach().exp(), "eta": control.eta.detach()}
        if train_control:
            variance = g.pow(2).sum() / per_cost
            self.stats["estimate_sq_norm"] = variance.detach()
            params = [p for p in control.parameters() if p.requires_grad]
            grads = torch.autograd.grad(variance, params, allow_unused=True)
            signal = sum((gp.detach() * p).sum() for gp, p in zip(grads, params) if gp is not None)
            loss = loss + self.options.variance_weight * (signal - signal.detach())  # to phi only
        if self.training:
            control.observe(f)
        return loss
