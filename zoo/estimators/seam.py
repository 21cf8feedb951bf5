"""The typed seam between a model's stochastic node and the estimator that trains it.

A model states its node from its validated options, as a class method (None: the options leave
nothing to sample, e.g. soft attention)::

    @classmethod
    def stochastic_node(cls, cfg: DVAEConfig, data_info: dict | None = None) -> StochasticNode | None:
        return StochasticNode(kind="categorical", differentiable_cost=True,
                              variables=cfg.n_latents, categories=cfg.n_classes, samples=cfg.n_samples or None)

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
from dataclasses import dataclass
from typing import Any

from zoo.errors import UserError
from zoo.estimators.base import ESTIMATORS, Capabilities, Estimator, build_options, check_estimator_class
from zoo.estimators.options import split_spec
from zoo.options import EstimatorSpec, estimator_option  # noqa: F401  (light, for configs that import no torch)

NODE_KINDS = ("continuous", "categorical", "discrete")


@dataclass(frozen=True)
class StochasticNode:
    """Where a model samples, and what the cost downstream of the sample allows: stated by the model from
    its validated options (``stochastic_node(cfg, data_info)``), so every number is concrete."""

    kind: str  # continuous (has rsample) | categorical (logits) | discrete (any other log_prob)
    differentiable_cost: bool  # the cost is a differentiable function of the sample's value
    per_variable_cost: bool = False  # each categorical variable has its own cost (exact enumeration works)
    multi_sample: bool = True  # the model can draw n >= 2 samples per input (leave-one-out baselines)
    own_samples: bool = True  # what est.loss scores carries what est.sample drew, its extras (the noise) included:
    # the model hands the sample on as it is, or stacks the per-step samples' extras (False: it draws or assembles
    # its samples itself, e.g. token by token, and keeps only values and log-probs)
    sequential: bool = False  # the variables one cost scores are drawn one after another, each distribution
    # depending on the earlier draws (a caption's attention locations): a control variate that reads them all at
    # once (relax's joint one) is biased there
    coupling: str = ""  # why the cost couples the variables, when it does (the reason a per-variable estimator
    # cannot fit, said in its refusal)
    cost_function: bool = False  # the model passes cost_fn(value) -> (n, *C), its cost at any (relaxed) value,
    # to est.loss when the estimator asks (est.wants_cost_fn): REBAR's term
    context: bool = False  # the model passes features as est.loss(..., context=) (a learned baseline reads them)
    context_dim: int | None = None  # their size (None: not known until the data are read)
    variables: int | None = None  # categorical variables one cost scores (1: that cost is the variable's own,
    # so per-variable estimators fit); None: not stated
    categories: int | None = None  # categories of each categorical variable (binary-only estimators fit 2)
    samples: int | None = None  # samples per input the model asks for (None: the estimator's own n)
    sample_size: int | None = None  # values of the sample one cost scores: a control variate's input (relax)
    hint: str = ""  # appended to misfit errors, e.g. a model option that avoids sampling altogether

    def __post_init__(self):
        if self.kind not in NODE_KINDS:
            raise ValueError(f"StochasticNode.kind must be one of {NODE_KINDS}, got {self.kind!r}")


def resolve(spec: Any, where: str = "") -> tuple[str, type, Any]:
    """(name, class, validated options object) of an estimator spec; every mistake a UserError."""
    name, options = split_spec(spec, where)
    entry = ESTIMATORS.entry(name)
    check_estimator_class(name, entry.obj)
    config_cls = entry.config or getattr(entry.obj, "Config", None)
    opts = build_options(config_cls, name, options) if config_cls is not None else options
    return name, entry.obj, opts


def mismatch(req: Capabilities | None, node: StochasticNode, n: int | None = None) -> str | None:
    """Why an estimator with requirements ``req`` cannot train ``node`` (None: it can). ``n``: the
    samples per input the model will draw (None: unknown)."""
    if req is None:
        return None  # undeclared (a user's own estimator): the user's responsibility
    if req.distributions == "continuous" and node.kind != "continuous":
        return f"it needs a continuous distribution with rsample, and this node is {node.kind}"
    if req.distributions == "categorical" and node.kind != "categorical":
        return f"it handles categorical distributions, and this node is {node.kind}"
    if req.differentiable_cost and not node.differentiable_cost:
        return "it backpropagates through the sample into the cost, and this node's cost is not differentiable"
    if req.per_variable_cost and not node.per_variable_cost and node.variables != 1:
        if node.variables is not None:
            return (f"it needs one cost per categorical variable, and this node's cost couples its {node.variables} "
                    "variables (1 would fit)")
        why = f" ({node.coupling})" if node.coupling else ""
        return f"it needs one cost per categorical variable, and this node's cost couples its variables{why}"
    if req.min_samples > 1 and not node.multi_sample:
        return f"it needs n >= {req.min_samples} samples per input, and this model draws one"
    if req.min_samples > 1 and n is not None and n < req.min_samples:
        return f"it needs n >= {req.min_samples} samples per input, got n={n}"
    if req.paired_samples and n is not None and n % 2:
        return f"it draws its samples in antithetic pairs, so n must be even, got n={n}"
    if req.max_categories is not None and node.categories is None:
        return (f"it handles variables of at most {req.max_categories} categories, and this node does not state "
                "how many its variables have")
    if req.max_categories is not None and node.categories > req.max_categories:
        return (f"it handles variables of at most {req.max_categories} categories, and this node's have "
                f"{node.categories} ({req.max_categories} would fit)")
    if req.cost_function and not node.cost_function:
        return "it evaluates the cost at relaxed samples (REBAR's term), and this model gives no cost function"
    if req.own_samples and not node.own_samples:
        return ("it scores only samples from its own sample() (it keeps their Gumbel noise), and this model "
                "draws or assembles its samples itself")
    if not req.sequential and node.sequential:
        return ("its control variate reads all the variables of a cost at once, which is biased when each is drawn "
                "given the earlier draws, as this node's are (relax: control: per_variable fits)")
    if req.context and not node.context:
        return "its learned baseline reads features this model does not give (set context_dim: 0 for a constant)"
    return None


def default_requirements(cls: Any) -> Capabilities | None:
    """An estimator class's requirements with its default options."""
    if not (isinstance(cls, type) and issubclass(cls, Estimator)):
        return None
    return cls.requirements(cls.Config()) if dataclasses.is_dataclass(cls.Config) else cls.capabilities


def compatible(node: StochasticNode) -> list[str]:
    """Registered estimators that can train ``node`` with their default options."""
    return [name for name in ESTIMATORS.list() if mismatch(default_requirements(ESTIMATORS.get(name)), node) is None]


def check_spec(spec: Any, node: StochasticNode, where: str, model: str = "model") -> tuple[str, type, Any]:
    """Validate an estimator spec for ``node``: name, every option, and the fit. Returns ``resolve``'s
    triple. A misfit is a UserError naming the reason and the estimators that fit."""
    name, cls, opts = resolve(spec, where)
    requirements = cls.requirements(opts) if isinstance(cls, type) and issubclass(cls, Estimator) else None
    why = mismatch(requirements, node, node.samples or getattr(opts, "n", None))
    if why:
        fits = ", ".join(compatible(node))
        raise UserError(f"estimator '{name}' cannot train {model}'s {node.kind} node in {where}: {why}. "
                        f"Estimators that fit: {fits}{'; ' + node.hint if node.hint else ''}")
    return name, cls, opts


def build_for_node(spec: Any, node: StochasticNode, where: str = "the model", model: str = "model") -> Estimator:
    """The estimator for ``node``: checked as ``check_spec`` does, given the node's context size if it
    reads a context and its options leave the size open (so no layer is built lazily: DDP-safe)."""
    name, cls, opts = check_spec(spec, node, where, model)
    dim = node.context_dim if node.context else None
    if dataclasses.is_dataclass(opts) and getattr(opts, "context_dim", 0) is None and dim is not None:
        opts = dataclasses.replace(opts, context_dim=dim)
    if dataclasses.is_dataclass(opts) and getattr(opts, "control", "") == "auto":
        # relax's control variate: one per variable where the draws are sequential, else one per cost
        opts = dataclasses.replace(opts, control="per_variable" if node.sequential else "joint")
    # a control variate's input: the values it reads (one variable's categories, or the whole sample's) + the context's
    size = node.categories if getattr(opts, "control", "") == "per_variable" else node.sample_size
    if dataclasses.is_dataclass(opts) and getattr(opts, "input_dim", 0) is None and size is not None:
        opts = dataclasses.replace(opts, input_dim=size + (dim or 0))
    est = cls(opts) if dataclasses.is_dataclass(opts) else cls(**opts)
    if isinstance(est, Estimator):
        est.name = name
    return est
