"""What an estimator can do (``Capabilities``) and its spec (``EstimatorDef``), where a model samples
(``StochasticNode``), and whether the two fit (``mismatch``): plain dataclasses, no torch, so a recipe's estimator
is checked against its model's node before torch and Lightning are imported (``zoo.config``); ``seam.py`` builds
the estimator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zoo.registry import Spec

DISTRIBUTIONS = ("continuous", "categorical", "any")


@dataclass(frozen=True)
class Capabilities:
    """What an estimator can do, declared on its class (``capabilities = Capabilities(...)``) and
    checked against a model's ``StochasticNode`` when a recipe is loaded (``zoo.estimators.seam``): a
    misfit is refused with a message that names the reason and the estimators that fit.

    Attributes:
        distributions: ``"continuous"``: needs ``rsample``; ``"categorical"``: needs logits; ``"any"``: needs
            ``log_prob`` only.
        differentiable_cost: True: the gradient goes through the sample into the cost.
        per_variable_cost: True: needs one cost per categorical variable (exact enumeration).
        min_samples: Samples per input it needs (a leave-one-out baseline: 2).
        paired_samples: True: draws its samples in antithetic pairs, so n must be even.
        max_categories: The most categories a variable may have (binary-only estimators: 2); None: any.
        unbiased: Whether ``E[grad of the surrogate] == grad E[cost]``.
        context: Reads per-position features from the model (a learned baseline).
        own_samples: True: scores only samples from its own ``sample()``, whose noise it keeps.
        cost_function: True: needs the cost at any (relaxed) value: the model passes ``cost_fn=`` to ``loss``.
        sequential: False: unbiased only when the variables one cost scores are drawn independently given the
            input (a control variate that reads them all at once).

    Examples:
        ```python
        from zoo.estimators import Capabilities

        caps = Capabilities(distributions="categorical", min_samples=2)   # e.g. a leave-one-out estimator
        assert caps.describe() == "unbiased, categorical, n >= 2"
        ```
    """

    distributions: str = "any"  # continuous: needs rsample | categorical: logits | any: needs log_prob only
    differentiable_cost: bool = False  # True: the gradient goes through the sample into the cost
    per_variable_cost: bool = False  # True: needs one cost per categorical variable (exact enumeration)
    min_samples: int = 1  # samples per input it needs (leave-one-out baselines: 2)
    paired_samples: bool = False  # draws its samples in antithetic pairs: n must be even
    max_categories: int | None = None  # the most categories a variable may have (binary-only estimators: 2)
    unbiased: bool = True  # E[grad of the surrogate] == grad E[cost]
    context: bool = False  # reads per-position features from the model (a learned baseline)
    own_samples: bool = False  # True: scores only samples from its own sample(), whose noise it keeps
    cost_function: bool = False  # True: needs the cost at any (relaxed) value: the model passes cost_fn= to loss()
    sequential: bool = True  # False: unbiased only when the variables one cost scores are drawn independently given
    # the input (a control variate that reads them all at once: relax's joint one)

    def __post_init__(self):
        if self.distributions not in DISTRIBUTIONS:
            raise ValueError(f"distributions must be one of {DISTRIBUTIONS}, got {self.distributions!r}")

    def describe(self) -> str:
        parts = ["unbiased" if self.unbiased else "biased", self.distributions]
        parts += ["differentiable cost"] if self.differentiable_cost else []
        parts += ["cost per variable"] if self.per_variable_cost else []
        parts += [f"n >= {self.min_samples}"] if self.min_samples > 1 else []
        parts += ["n even (antithetic pairs)"] if self.paired_samples else []
        parts += [f"at most {self.max_categories} categories"] if self.max_categories else []
        parts += ["may read model features"] if self.context else []  # an option, not a need
        parts += ["its own samples only"] if self.own_samples else []
        parts += ["the model's cost function"] if self.cost_function else []
        parts += ["independent draws only"] if not self.sequential else []
        return ", ".join(parts)


@dataclass(frozen=True)
class EstimatorDef(Spec):
    """An estimator's spec: its name, class, options and what it can train, declared once (the built-ins:
    ``zoo/estimators/config.py``); its class points to it (``spec = REINFORCE``)."""

    capabilities: Capabilities | None = None  # what it can train (None: undeclared, never refused)
    refine: Callable | None = None  # (capabilities, options) -> the capabilities with these options (a
    # leave-one-out baseline needs n >= 2); None: the same for every option

    def requirements(self, options: Any) -> Capabilities | None:
        """What the estimator needs with ``options`` (an instance of its options dataclass)."""
        if self.capabilities is None or self.refine is None:
            return self.capabilities
        return self.refine(self.capabilities, options)

    @staticmethod
    def facts_of(obj: Any) -> dict:
        """A class that declares no spec states its ``capabilities`` and a ``requirements(options)`` classmethod
        (a duck-typed one without both is undeclared)."""
        caps, needs = getattr(obj, "capabilities", None), getattr(obj, "requirements", None)
        if caps is None or not callable(needs):
            return {}
        return {"capabilities": caps, "refine": lambda _capabilities, options: needs(options)}


NODE_KINDS = ("continuous", "categorical", "discrete")


@dataclass(frozen=True)
class StochasticNode:
    """Where a model samples, and what the cost downstream of the sample allows: stated by the model from
    its validated options (``stochastic_node(cfg, data_info)``), so every number is concrete. The recipe
    loader checks the recipe's estimator against it (its ``Capabilities``) before torch is imported.

    Attributes:
        kind: ``"continuous"`` (has ``rsample``), ``"categorical"`` (logits) or ``"discrete"`` (any other
            ``log_prob``).
        differentiable_cost: The cost is a differentiable function of the sample's value.
        per_variable_cost: Each categorical variable has its own cost (exact enumeration works).
        multi_sample: The model can draw n >= 2 samples per input (leave-one-out baselines).
        own_samples: What ``est.loss`` scores carries what ``est.sample`` drew, its extras (the noise) included;
            False: the model draws or assembles its samples itself (e.g. token by token).
        sequential: The variables one cost scores are drawn one after another, each distribution depending on
            the earlier draws (a caption's attention locations).
        coupling: Why the cost couples the variables, when it does (said in a per-variable estimator's refusal).
        cost_function: The model passes ``cost_fn(value) -> (n, *C)``, its cost at any (relaxed) value, to
            ``est.loss`` when the estimator asks (REBAR's term).
        context: The model passes features as ``est.loss(..., context=)`` (a learned baseline reads them).
        context_dim: Their size (None: not known until the data are read).
        variables: Categorical variables one cost scores (1: per-variable estimators fit); None: not stated.
        categories: Categories of each categorical variable (binary-only estimators fit 2).
        samples: Samples per input the model asks for (None: the estimator's own n).
        sample_size: Values of the sample one cost scores: a control variate's input (relax).
        hint: Appended to misfit errors, e.g. a model option that avoids sampling altogether.

    Examples:
        A model class states its node from its options; ``compatible`` lists the estimators that fit it:

        ```python
        from zoo.estimators import StochasticNode, compatible

        node = StochasticNode(kind="categorical", differentiable_cost=False, variables=1, categories=3)
        assert "rloo" in compatible(node) and "gumbel_softmax" not in compatible(node)
        ```
    """

    kind: str  # continuous (has rsample) | categorical (logits) | discrete (any other log_prob)
    differentiable_cost: bool  # the cost is a differentiable function of the sample's value
    per_variable_cost: bool = False  # each categorical variable has its own cost (exact enumeration works)
    multi_sample: bool = True  # the model can draw n >= 2 samples per input (leave-one-out baselines)
    own_samples: bool = True  # est.loss gets what est.sample drew, extras (the noise) included (False: the model
    # assembles its samples itself, e.g. token by token, and keeps only values and log-probs)
    sequential: bool = False  # the variables one cost scores are drawn each given the earlier ones (a caption's
    # attention locations): a control variate that reads them all at once (relax's joint one) is biased there
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
    # the variables' own kind first: no sample count fixes it
    if req.max_categories is not None and node.categories is None:
        return (f"it handles variables of at most {req.max_categories} categories, and this node does not state "
                "how many its variables have")
    if req.max_categories is not None and node.categories > req.max_categories:
        return (f"it handles variables of at most {req.max_categories} categories, and this node's have "
                f"{node.categories} ({req.max_categories} would fit)")
    if req.min_samples > 1 and not node.multi_sample:
        return f"it needs n >= {req.min_samples} samples per input, and this model draws one"
    if req.min_samples > 1 and n is not None and n < req.min_samples:
        return f"it needs n >= {req.min_samples} samples per input, got n={n}"
    if req.paired_samples and n is not None and n % 2:
        return f"it draws its samples in antithetic pairs, so n must be even, got n={n}"
    if req.cost_function and not node.cost_function:
        return "it evaluates the cost at relaxed samples (REBAR's term), and this model gives no cost function"
    if req.own_samples and not node.own_samples:
        return ("it scores only samples from its own sample() (it keeps their Gumbel noise), and this model "
                "draws or assembles its samples itself")
    if not req.sequential and node.sequential and req.paired_samples:
        return ("its antithetic pairs share one uniform per variable under the same logits, so the variables must be "
                "drawn independently given the input, and this node draws each given the earlier draws")
    if not req.sequential and node.sequential:
        return ("its control variate reads all the variables of a cost at once, which is biased when each is drawn "
                "given the earlier draws, as this node's are (relax: control: per_variable fits)")
    if req.context and not node.context:
        return "its learned baseline reads features this model does not give (set context_dim: 0 for a constant)"
    return None
