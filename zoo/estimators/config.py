"""Every built-in estimator's options and its spec (name, class, options, capabilities), importing no torch,
so that a recipe's estimator name and options are checked before torch and Lightning are imported
(``zoo.config.load_config``); the estimator's module is imported when it is first used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.errors import UserError
from zoo.estimators.capabilities import Capabilities, EstimatorDef
from zoo.registry import ESTIMATORS
from zoo.schema import between, choice, positive

BASELINES = ("none", "ema", "batch_mean", "rloo", "learned", "grpo", "dr_grpo", "reinforce_pp")  # REINFORCE's
# baselines (baselines.py)
GROUP_BASELINES = ("rloo", "grpo", "dr_grpo")  # need n >= 2 samples per input: a group
BIASED_BASELINES = ("grpo", "dr_grpo", "reinforce_pp")  # rescale the advantage: biased for grad E[cost]


@dataclass
class EstimatorOptions:
    """No options."""


@dataclass
class ReinforceOptions:
    """Checked by ``zoo.schema.validate`` (choices, ranges; numbers without a range are >= 0)."""

    baseline: str = choice("none", list(BASELINES))  # none | ema | batch_mean | rloo | learned | grpo | dr_grpo |
    # reinforce_pp (baselines.py; the last three are biased)
    decay: float = between(0.9, 0.0, 1.0, high_open=True)  # EMA baseline: b <- decay * b + (1 - decay) * mean cost
    entropy_weight: float = 0.0  # entropy bonus: loss -= weight * mean entropy of the distribution
    n: int = positive(1)  # samples per input when sample() is called without n (rloo, grpo, dr_grpo need >= 2)
    context_dim: int | None = None  # learned baseline input size; None: the node's (seam) or lazily, 0: a constant
    hidden: int = positive(64)  # learned baseline MLP hidden width
    baseline_weight: float = 1.0  # weight of the learned baseline's MSE regression loss


@dataclass
class RLOOOptions(ReinforceOptions):
    baseline: str = choice("rloo", list(BASELINES))  # leave-one-out over the n samples of each input
    n: int = positive(2)  # samples per input when sample() is called without n (>= 2: requirements())


@dataclass
class GRPOOptions(ReinforceOptions):
    baseline: str = choice("grpo", list(BASELINES))  # (f - the group's mean) / the group's std (biased)
    n: int = positive(2)  # samples per input when sample() is called without n: the group (>= 2)


@dataclass
class DrGRPOOptions(ReinforceOptions):
    baseline: str = choice("dr_grpo", list(BASELINES))  # f - the group's mean, its own cost included (biased)
    n: int = positive(2)  # samples per input when sample() is called without n: the group (>= 2)


@dataclass
class ReinforcePPOptions(ReinforceOptions):
    baseline: str = choice("reinforce_pp", list(BASELINES))  # (f - the batch's mean) / the batch's std (biased)


@dataclass
class ARMOptions:
    """Checked by ``zoo.schema.validate``, then the cross-option check below."""

    n: int = positive(2)  # samples per input when sample() is called without n: n / 2 antithetic pairs

    def __post_init__(self):
        if self.n % 2:
            raise ValueError(f"n must be even (the samples come in antithetic pairs), got {self.n}")


@dataclass
class GumbelSoftmaxOptions:
    """Checked by ``zoo.schema.validate`` (ranges; numbers without a range are >= 0), then the
    cross-option check below."""

    tau: float = positive(1.0)  # temperature at step 0 (> 0); lower: less bias, more variance
    tau_min: float = 0.5  # floor of the annealed temperature (used when anneal_rate > 0)
    anneal_rate: float = 0.0  # tau(step) = max(tau_min, tau * exp(-anneal_rate * step)); 0: constant
    n: int = positive(1)  # samples per input when sample() is called without n

    def __post_init__(self):
        if self.anneal_rate > 0 and not 0 < self.tau_min <= self.tau:
            raise ValueError(f"tau_min must be in (0, tau={self.tau}] when annealing, got {self.tau_min}")


@dataclass
class StraightThroughOptions(GumbelSoftmaxOptions):
    """Same options as gumbel_softmax (tau is the temperature of the backward relaxation)."""


@dataclass
class RelaxOptions:
    """Checked by ``zoo.schema.validate`` (ranges; numbers without a range are >= 0)."""

    n: int = positive(1)  # samples per input when sample() is called without n
    tau: float = positive(1.0)  # starting temperature of softmax(z / tau), the control variate's input (learned)
    hidden: int = positive(64)  # control variate MLP hidden width
    input_dim: int | None = None  # control variate input size: the relaxed sample's values per cost (+ the
    # context's features); None: found at the first batch (nn.LazyLinear; give it under DDP)
    variance_weight: float = positive(1.0)  # scale of the control variate's training signal d/dphi E[g^2]
    rebar: bool = False  # add REBAR's eta * f(softmax(z / tau)) to the control variate: needs the model's cost at
    # relaxed samples (a node with cost_function; the discrete VAE) and 3 more cost evaluations per sample
    eta: float = 1.0  # REBAR term's starting scale (learned)
    decay: float = between(0.9, 0.0, 1.0, high_open=True)  # EMA of the cost's mean and spread (the control's m, s)
    control: str = choice("auto", ["auto", "joint", "per_variable"])  # joint: one c(z) of all a cost scores
    # (independent draws only); per_variable: one c(z_i) each, summed; auto: per_variable if sequential, else joint


@dataclass
class UnorderedSetOptions:
    n: int = positive(2)  # k, samples without replacement per input (<= number of categories; <= ~6)
    baseline: bool = True  # built-in leave-one-out baseline (needs n >= 2)


# what each built-in can do, and how its options refine that (``EstimatorDef.requirements``)
def reinforce_requirements(capabilities: Capabilities, options: ReinforceOptions) -> Capabilities:
    return dataclasses.replace(capabilities, min_samples=2 if options.baseline in GROUP_BASELINES else 1,
                               context=options.baseline == "learned" and options.context_dim != 0,
                               unbiased=options.baseline not in BIASED_BASELINES)


def relax_requirements(capabilities: Capabilities, options: RelaxOptions) -> Capabilities:
    # rebar: the cost at relaxed samples, differentiated through them; a joint control variate: independent draws
    return dataclasses.replace(capabilities, context=False, cost_function=options.rebar,
                               differentiable_cost=options.rebar, sequential=options.control != "joint")


def unordered_set_requirements(capabilities: Capabilities, options: UnorderedSetOptions) -> Capabilities:
    return dataclasses.replace(capabilities, min_samples=2 if options.baseline else 1)


GRPO_CAPABILITIES = Capabilities(distributions="any", min_samples=2, context=True, unbiased=False)  # dr_grpo's too
GUMBEL_CAPABILITIES = Capabilities(distributions="categorical", differentiable_cost=True, unbiased=False)
# own_samples: the estimate needs the uniform noise behind each pair; sequential=False: a pair shares one uniform
# per variable under the same logits, so the variables must be drawn independently given the input
ARM_CAPABILITIES = Capabilities(distributions="categorical", max_categories=2, min_samples=2, paired_samples=True,
                                own_samples=True, sequential=False)

# the built-in estimators, each declared once: name, class (imported when first used), options, capabilities;
# the class points to its spec (``spec = REINFORCE``)
REPARAM = ESTIMATORS.declare(EstimatorDef(
    "reparam", "zoo.estimators.reparam:Reparam", EstimatorOptions,
    capabilities=Capabilities(distributions="continuous", differentiable_cost=True)))
EXPECTATION = ESTIMATORS.declare(EstimatorDef(
    "expectation", "zoo.estimators.expectation:Expectation", EstimatorOptions,
    capabilities=Capabilities(distributions="categorical", per_variable_cost=True)))
REINFORCE = ESTIMATORS.declare(EstimatorDef(
    "reinforce", "zoo.estimators.reinforce:Reinforce", ReinforceOptions,
    capabilities=Capabilities(distributions="any", context=True),  # context: the learned baseline's
    refine=reinforce_requirements))
RLOO = ESTIMATORS.declare(EstimatorDef(
    "rloo", "zoo.estimators.reinforce:RLOO", RLOOOptions,
    capabilities=Capabilities(distributions="any", min_samples=2, context=True), refine=reinforce_requirements))
GRPO = ESTIMATORS.declare(EstimatorDef(
    "grpo", "zoo.estimators.reinforce:GRPO", GRPOOptions, capabilities=GRPO_CAPABILITIES,
    refine=reinforce_requirements))
DR_GRPO = ESTIMATORS.declare(EstimatorDef(
    "dr_grpo", "zoo.estimators.reinforce:DrGRPO", DrGRPOOptions, capabilities=GRPO_CAPABILITIES,
    refine=reinforce_requirements))
REINFORCE_PP = ESTIMATORS.declare(EstimatorDef(
    "reinforce_pp", "zoo.estimators.reinforce:ReinforcePP", ReinforcePPOptions,
    capabilities=Capabilities(distributions="any", context=True, unbiased=False), refine=reinforce_requirements))
GUMBEL_SOFTMAX = ESTIMATORS.declare(EstimatorDef(
    "gumbel_softmax", "zoo.estimators.relaxed:GumbelSoftmax", GumbelSoftmaxOptions,
    capabilities=GUMBEL_CAPABILITIES))
STRAIGHT_THROUGH = ESTIMATORS.declare(EstimatorDef(
    "straight_through", "zoo.estimators.relaxed:StraightThrough", StraightThroughOptions,
    capabilities=GUMBEL_CAPABILITIES))
# context: reads the model's features when given (never needs them); own_samples: needs the Gumbel noise behind
# each sample, so the sample must come from its own sample()
RELAX = ESTIMATORS.declare(EstimatorDef(
    "relax", "zoo.estimators.relax:Relax", RelaxOptions,
    capabilities=Capabilities(distributions="categorical", context=True, own_samples=True),
    refine=relax_requirements))
UNORDERED_SET = ESTIMATORS.declare(EstimatorDef(
    "unordered_set", "zoo.estimators.unordered_set:UnorderedSet", UnorderedSetOptions,
    capabilities=Capabilities(distributions="categorical", per_variable_cost=True, min_samples=2),
    refine=unordered_set_requirements))
ARM = ESTIMATORS.declare(EstimatorDef("arm", "zoo.estimators.arm:ARM", ARMOptions, capabilities=ARM_CAPABILITIES))
DISARM = ESTIMATORS.declare(EstimatorDef("disarm", "zoo.estimators.arm:DisARM", ARMOptions,
                                         capabilities=ARM_CAPABILITIES))


def split_spec(spec: Any, where: str = "") -> tuple[str, dict]:
    """``"reinforce"`` or ``{name: reinforce, baseline: ema}`` -> (name, options)."""
    if isinstance(spec, str):
        return spec, {}
    if isinstance(spec, Mapping):
        options = {str(k): v for k, v in spec.items()}
        name = options.pop("name", None)
        if not isinstance(name, str):
            raise UserError(f"estimator {dict(spec)} in {where} has no 'name' (e.g. {{name: reinforce, "
                            "baseline: ema})")
        return name, options
    raise UserError(f"estimator in {where} must be a name or a mapping with 'name', got {spec!r}")
