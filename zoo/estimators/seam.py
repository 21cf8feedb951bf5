"""The typed seam between a model's stochastic node and the estimator that trains it.

A model declares its node in one line, as a class attribute:

    stochastic_node = StochasticNode(kind="categorical", differentiable_cost=False,
                                     context_dim_from="gen_hidden_dim")

and types the option that names the estimator (``estimator: EstimatorSpec = estimator_option("reinforce")``
in its config). Every estimator declares its ``Capabilities`` (``base.py``). The recipe loader calls
``check_spec`` before any data is touched: the estimator's name, every one of its options, and its
fit to the node; a mismatch is a ``UserError`` that lists the estimators that do fit. The model
then builds its estimator with ``build_for_node`` (``ZooModule.build_estimator`` does it), which
also hands the node's context size to estimators that read a context (and the sample's size to a
control variate's input): no model names or patches an estimator.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.errors import UserError
from zoo.estimators.base import ESTIMATORS, Capabilities, Estimator, build_options, check_estimator_class
from zoo.estimators.options import split_spec
from zoo.options import EstimatorSpec, estimator_option  # noqa: F401  (light, for configs that import no torch)

NODE_KINDS = ("continuous", "categorical", "discrete")


@dataclass(frozen=True)
class StochasticNode:
    """Where a model samples, and what the cost downstream of the sample allows."""

    kind: str  # continuous (has rsample) | categorical (logits) | discrete (any other log_prob)
    differentiable_cost: bool  # the cost is a differentiable function of the sample's value
    per_variable_cost: bool = False  # each categorical variable has its own cost (exact enumeration works)
    multi_sample: bool = True  # the model can draw n >= 2 samples per input (leave-one-out baselines)
    own_samples: bool = True  # the model hands est.sample's StochasticSample to est.loss as it is (False: it
    # draws or assembles its samples itself, e.g. token by token)
    cost_function: bool = False  # the model passes cost_fn(value) -> (n, *C), its cost at any (relaxed) value,
    # to est.loss when the estimator asks (est.wants_cost_fn): REBAR's term
    context_dim_from: str | None = None  # features for a learned baseline: a model option ("hidden_dim"),
    # or "data_info.KEY" (a list: its product); None: the model passes no context
    variables_from: str | None = None  # the model option giving the number of categorical variables one cost
    # scores (a discrete VAE's "n_latents"): with 1, that cost is the variable's own (per-variable estimators fit)
    categories_from: str | None = None  # the model option giving each categorical variable's number of
    # categories ("n_classes"): binary-only estimators (arm, disarm) fit when it is 2; None: not declared
    sample_size_from: tuple = ()  # model options whose product is how many values of the sample one cost
    # scores (a discrete VAE's ("n_latents", "n_classes")): sizes a control variate's input (relax) up front
    option: str = "estimator"  # the model option that names the estimator
    samples_option: str | None = None  # a model option overriding the estimator's n (0: the estimator's)
    active_when: tuple = ()  # (option, value, ...): the node exists only when the option has one of the
    # values (e.g. ("attention", "hard"), ("mode", "joint", "boundary_gan"))
    hint: str = ""  # appended to misfit errors, e.g. a model option that avoids sampling altogether

    def __post_init__(self):
        if self.kind not in NODE_KINDS:
            raise ValueError(f"StochasticNode.kind must be one of {NODE_KINDS}, got {self.kind!r}")

    def active(self, options: Mapping) -> bool:
        return not self.active_when or options.get(self.active_when[0]) in self.active_when[1:]

    def context_dim(self, options: Mapping, data_info: Mapping | None) -> int | None:
        """The size of the features the model passes as ``context`` (None: it passes none)."""
        src = self.context_dim_from
        if src is None:
            return None
        if src.startswith("data_info."):
            value = (data_info or {}).get(src[len("data_info."):])
            if value is None:
                return None
            return int(math.prod(value)) if isinstance(value, (list, tuple)) else int(value)
        return int(options[src])

    def variables(self, options: Mapping | None) -> int | None:
        """How many categorical variables one cost scores (None: undeclared, or not in ``options``)."""
        return _int_option(self.variables_from, options)

    def categories(self, options: Mapping | None) -> int | None:
        """Each categorical variable's number of categories (None: undeclared, or not in ``options``)."""
        return _int_option(self.categories_from, options)

    def sample_size(self, options: Mapping) -> int | None:
        """How many values of the sample one cost scores (None: the node does not say)."""
        return int(math.prod(int(options[name]) for name in self.sample_size_from)) if self.sample_size_from else None


def _int_option(name: str | None, options: Mapping | None) -> int | None:
    """The model option ``name`` as an int; None where the node names none or ``options`` lack it."""
    value = options.get(name) if name and options else None
    return None if value is None else int(value)


def resolve(spec: Any, where: str = "") -> tuple[str, type, Any]:
    """(name, class, validated options object) of an estimator spec; every mistake a UserError."""
    name, options = split_spec(spec, where)
    entry = ESTIMATORS.entry(name)
    check_estimator_class(name, entry.obj)
    config_cls = entry.config or getattr(entry.obj, "Config", None)
    opts = build_options(config_cls, name, options) if config_cls is not None else options
    return name, entry.obj, opts


def mismatch(req: Capabilities | None, node: StochasticNode, n: int | None = None,
             has_context: bool = True, categories: int | None = None, variables: int | None = None) -> str | None:
    """Why an estimator with requirements ``req`` cannot train ``node`` (None: it can).
    ``n``: the samples per input the model will draw; ``categories``: per variable; ``variables``: how
    many one cost scores (None: unknown)."""
    if req is None:
        return None  # undeclared (a user's own estimator): the user's responsibility
    if req.distributions == "continuous" and node.kind != "continuous":
        return f"it needs a continuous distribution with rsample, and this node is {node.kind}"
    if req.distributions == "categorical" and node.kind != "categorical":
        return f"it handles categorical distributions, and this node is {node.kind}"
    if req.differentiable_cost and not node.differentiable_cost:
        return "it backpropagates through the sample into the cost, and this node's cost is not differentiable"
    if req.per_variable_cost and not node.per_variable_cost and variables != 1:
        if node.variables_from and variables is not None:
            option = node.variables_from
            return (f"it needs one cost per categorical variable, and this node's cost couples its {variables} "
                    f"variables ({option}={variables}; {option}=1 would fit)")
        return "it needs one cost per categorical variable, and this node's cost couples its variables"
    if req.min_samples > 1 and not node.multi_sample:
        return f"it needs n >= {req.min_samples} samples per input, and this model draws one"
    if req.min_samples > 1 and n is not None and n < req.min_samples:
        return f"it needs n >= {req.min_samples} samples per input, got n={n}"
    if req.paired_samples and n is not None and n % 2:
        return f"it draws its samples in antithetic pairs, so n must be even, got n={n}"
    if req.max_categories is not None and node.categories_from is None:
        return (f"it handles variables of at most {req.max_categories} categories, and this node does not declare "
                "how many its variables have")
    if req.max_categories is not None and categories is not None and categories > req.max_categories:
        option = node.categories_from
        return (f"it handles variables of at most {req.max_categories} categories, and this node's have "
                f"{categories} ({option}={categories}; {option}={req.max_categories} would fit)")
    if req.cost_function and not node.cost_function:
        return "it evaluates the cost at relaxed samples (REBAR's term), and this model gives no cost function"
    if req.own_samples and not node.own_samples:
        return ("it scores only samples from its own sample() (it keeps their Gumbel noise), and this model "
                "draws or assembles its samples itself")
    if req.context and (node.context_dim_from is None or not has_context):
        return "its learned baseline reads features this model does not give (set context_dim: 0 for a constant)"
    return None


def default_requirements(cls: Any) -> Capabilities | None:
    """An estimator class's requirements with its default options."""
    if not (isinstance(cls, type) and issubclass(cls, Estimator)):
        return None
    return cls.requirements(cls.Config()) if dataclasses.is_dataclass(cls.Config) else cls.capabilities


def compatible(node: StochasticNode, model_options: Mapping | None = None) -> list[str]:
    """Registered estimators that can train ``node`` with their default options (and the model's
    options, when given: a binary-only estimator fits a node of 2 categories only)."""
    categories, variables = node.categories(model_options), node.variables(model_options)
    return [name for name in ESTIMATORS.list()
            if mismatch(default_requirements(ESTIMATORS.get(name)), node, categories=categories,
                        variables=variables) is None]


def _samples(node: StochasticNode, model_options: Mapping, opts: Any) -> int | None:
    n = model_options.get(node.samples_option) if node.samples_option else None
    return int(n) if n else getattr(opts, "n", None)


def check_spec(spec: Any, node: StochasticNode, model_options: Mapping, where: str,
               model: str = "model") -> tuple[str, type, Any]:
    """Validate an estimator spec for ``node``: name, every option, and the fit. Returns ``resolve``'s
    triple. A misfit is a UserError naming the reason and the estimators that fit."""
    name, cls, opts = resolve(spec, where)
    requirements = cls.requirements(opts) if isinstance(cls, type) and issubclass(cls, Estimator) else None
    why = mismatch(requirements, node, _samples(node, model_options, opts),
                   categories=node.categories(model_options), variables=node.variables(model_options))
    if why:
        fits = ", ".join(compatible(node, model_options))
        raise UserError(f"estimator '{name}' cannot train {model}'s {node.kind} node in {where}: {why}. "
                        f"Estimators that fit: {fits}{'; ' + node.hint if node.hint else ''}")
    return name, cls, opts


def build_for_node(spec: Any, node: StochasticNode, model_options: Mapping, data_info: Mapping | None,
                   where: str = "the model", model: str = "model") -> Estimator:
    """The estimator for ``node``: checked as ``check_spec`` does, given the node's context size if it
    reads a context and its options leave the size open (so no layer is built lazily: DDP-safe)."""
    name, cls, opts = check_spec(spec, node, model_options, where, model)
    dim = node.context_dim(model_options, data_info)
    if dataclasses.is_dataclass(opts) and getattr(opts, "context_dim", 0) is None and dim is not None:
        opts = dataclasses.replace(opts, context_dim=dim)
    if dataclasses.is_dataclass(opts) and getattr(opts, "input_dim", 0) is None and node.sample_size_from:
        # a control variate's input: the sample's values + the context's
        opts = dataclasses.replace(opts, input_dim=node.sample_size(model_options) + (dim or 0))
    est = cls(opts) if dataclasses.is_dataclass(opts) else cls(**opts)
    if isinstance(est, Estimator):
        est.name = name
    return est
