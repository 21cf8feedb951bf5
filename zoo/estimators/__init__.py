"""Gradient estimators for stochastic nodes, behind one registry.

    from zoo.estimators import get_estimator
    est = get_estimator("reinforce", baseline="ema", decay=0.9)   # or {"name": ..., **options}
    s = est.sample(dist, n=1)       # dist: torch.distributions object or logits (Categorical)
    loss = est.loss(s, cost)        # cost (n, *C); grad loss estimates grad E[cost]

Each estimator declares its ``Capabilities``; a model declares its ``StochasticNode`` and the recipe
loader checks the pair (``seam.py``).

Registered: reparam, reinforce, rloo, gumbel_softmax, straight_through, expectation, unordered_set, relax,
arm, disarm.
Your own: ``@register_estimator("mine", config=MyOptions)`` on an ``Estimator`` subclass, a dotted
path ``"pkg.mod:MyEstimator"``, or the entry point group ``zoo.estimators``.
See the README section "Gradient estimators".
"""

from zoo.estimators.arm import ARM, DisARM
from zoo.estimators.base import (
    ESTIMATORS,
    Capabilities,
    Estimator,
    EstimatorOptions,
    StochasticSample,
    describe,
    get_estimator,
    list_estimators,
    register_estimator,
)
from zoo.estimators.beam import BeamResult, beam_search, stochastic_beam_search
from zoo.estimators.expectation import Expectation
from zoo.estimators.gumbel import (
    gumbel_max_sample,
    gumbel_softmax_sample,
    gumbel_topk,
    gumbel_with_maximum,
    sample_gumbel,
    shift_gumbel_maximum,
    truncated_gumbel,
)
from zoo.estimators.reinforce import RLOO, Reinforce, reward_to_go
from zoo.estimators.relax import Relax
from zoo.estimators.relaxed import GumbelSoftmax, StraightThrough
from zoo.estimators.reparam import Reparam
from zoo.estimators.seam import (
    EstimatorSpec,
    StochasticNode,
    build_for_node,
    check_spec,
    compatible,
    estimator_option,
)
from zoo.estimators.unordered_set import UnorderedSet

__all__ = [
    "ESTIMATORS", "Capabilities", "Estimator", "EstimatorSpec", "StochasticNode", "build_for_node", "check_spec",
    "compatible",
    "estimator_option", "EstimatorOptions", "StochasticSample", "describe", "get_estimator",
    "list_estimators", "register_estimator", "BeamResult", "beam_search", "stochastic_beam_search",
    "Expectation", "gumbel_max_sample", "gumbel_softmax_sample", "gumbel_topk", "gumbel_with_maximum",
    "sample_gumbel", "shift_gumbel_maximum", "truncated_gumbel", "RLOO", "Reinforce", "reward_to_go",
    "GumbelSoftmax", "StraightThrough", "Reparam", "UnorderedSet", "Relax", "ARM", "DisARM",
]
