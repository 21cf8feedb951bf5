"""Gradient estimators for stochastic nodes, behind one registry.

    from zoo.estimators import get_estimator
    est = get_estimator("reinforce", baseline="ema", decay=0.9)   # or {"name": ..., **options}
    s = est.sample(dist, n=1)       # dist: torch.distributions object or logits (Categorical)
    loss = est.loss(s, cost)        # cost (n, *C); grad loss estimates grad E[cost]

Each estimator declares its ``Capabilities``; a model declares its ``StochasticNode`` and the recipe
loader checks the pair (``seam.py``).

Registered: reparam, reinforce, rloo, grpo, dr_grpo, reinforce_pp, gumbel_softmax, straight_through, expectation,
unordered_set, relax, arm, disarm.
The built-ins are declared in ``config.py`` with their options (no torch). Your own:
``@register_estimator("mine", config=MyOptions)`` on an ``Estimator`` subclass, a dotted
path ``"pkg.mod:MyEstimator"``, or the entry point group ``zoo.estimators``.
See the README section "Gradient estimators".
"""

import importlib

# where each public name lives; the package imports a module (and torch) only when a name is used,
# so that ``zoo.estimators.config`` (no torch) serves the recipe checks before torch is imported
_EXPORTS = {
    "arm": ("ARM", "DisARM"),
    "base": ("ESTIMATORS", "Capabilities", "Estimator", "StochasticSample", "describe", "get_estimator",
             "list_estimators", "register_estimator"),
    "beam": ("BeamResult", "beam_search", "stochastic_beam_search"),
    "expectation": ("Expectation",),
    "gumbel": ("gumbel_max_sample", "gumbel_topk", "gumbel_with_maximum", "sample_gumbel",
               "shift_gumbel_maximum", "truncated_gumbel"),
    "options": ("EstimatorOptions",),
    "reinforce": ("DrGRPO", "GRPO", "RLOO", "Reinforce", "ReinforcePP", "reward_to_go"),
    "relax": ("Relax",),
    "relaxed": ("GumbelSoftmax", "StraightThrough"),
    "reparam": ("Reparam",),
    "seam": ("EstimatorSpec", "StochasticNode", "build_for_node", "check_spec", "compatible", "estimator_option"),
    "unordered_set": ("UnorderedSet",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def declare_all() -> None:
    """Import ``config.py``, which declares the built-ins (the registry does it on its first lookup)."""
    importlib.import_module(f"{__name__}.config")


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    if name in _EXPORTS or name in ("baselines", "compare"):  # a submodule as an attribute: zoo.estimators.arm
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
