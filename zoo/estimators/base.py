"""The estimator contract, the registry and option validation.

An estimator turns "a model that samples from a distribution and pays a cost" into a scalar
surrogate loss whose gradient estimates ``grad E[cost]``:

    est = get_estimator("reinforce", baseline="ema")
    s = est.sample(dist, n=1)      # s.value is what the model consumes
    loss = est.loss(s, cost)       # cost: (n, *C), C a prefix of the sample batch shape B

Estimators are ``nn.Module``s so that their state (EMA baseline, temperature step, learned
baseline network) is saved in checkpoints and trained by the model's own optimizer when the
model holds the estimator as an attribute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.distributions import Categorical, Distribution, OneHotCategorical

from zoo.errors import UserError
from zoo.estimators.capabilities import DISTRIBUTIONS, Capabilities, EstimatorDef  # noqa: F401  (zoo.estimators.base.Capabilities)
from zoo.estimators.config import EstimatorOptions  # noqa: F401  (zoo.estimators.base.EstimatorOptions)
from zoo.estimators.seam import build_options, check_estimator_class  # noqa: F401  (base's names too)
from zoo.registry import ESTIMATORS, doc_line

register_estimator = ESTIMATORS.register  # a user's own: @register_estimator("name", config=Options)


@dataclass
class StochasticSample:
    """What ``Estimator.sample`` returns: the sample the model consumes, and what ``Estimator.loss`` needs to
    score it. The leading dim of every tensor is the sample dim n; ``B`` is the distribution's batch shape,
    ``K`` a categorical's number of categories, ``E`` a continuous distribution's event shape.

    Attributes:
        value: What the model consumes: ``(n, *B, K)`` one-hot (or relaxed, for ``gumbel_softmax``) for a
            categorical; ``(n, *B, *E)`` for a continuous distribution (``rsample``, with the pathwise gradient).
        log_prob: ``(n, *B)`` log-probability of the (hard) sample, with its gradient to the distribution's
            parameters (what a score-function estimator multiplies by the cost).
        dist: The distribution sampled from (an entropy bonus reads it).
        index: ``(n, *B)`` integer category of each draw of a categorical; ``None`` for other distributions.
        weights: ``(n, *B)`` how ``loss`` combines the n samples: ``None`` is the Monte Carlo mean (1/n each);
            ``expectation`` sets the categories' exact probabilities.
        extras: Estimator-specific tensors that travel with the sample (e.g. the Gumbel noise RELAX keeps):
            a model that hands the sample on as it is keeps them.

    Examples:
        ```python
        import torch
        from zoo.estimators import get_estimator

        logits = torch.zeros(4, 3, requires_grad=True)       # B = (4,), K = 3: a Categorical
        s = get_estimator("reinforce").sample(logits, n=2)
        assert s.value.shape == (2, 4, 3) and s.log_prob.shape == s.index.shape == (2, 4)
        assert s.n == 2 and s.batch_shape == (4,)
        ```
    """

    value: Tensor  # what the model consumes: (n, *B, K) one-hot / relaxed, or (n, *B, *E) rsample
    log_prob: Tensor  # (n, *B) log-prob of the (hard) sample, with grad to the dist parameters
    dist: Distribution  # the distribution sampled from (for entropy bonuses)
    index: Tensor | None = None  # (n, *B) integer category for categoricals, else None
    weights: Tensor | None = None  # (n, *B) combine weights (None: Monte-Carlo 1/n)
    extras: dict = field(default_factory=dict)  # estimator-specific (e.g. Gumbel keys)

    @property
    def n(self) -> int:
        """The number of samples, ``log_prob.shape[0]``."""
        return self.log_prob.shape[0]

    @property
    def batch_shape(self) -> torch.Size:
        """``B``, the distribution's batch shape: ``log_prob.shape[1:]``."""
        return self.log_prob.shape[1:]


def as_distribution(dist: Distribution | Tensor) -> Distribution:
    """A logits tensor means a Categorical over its last dim."""
    if isinstance(dist, Tensor):
        return Categorical(logits=dist)
    if not isinstance(dist, Distribution):
        kind = type(dist).__name__
        raise UserError(f"expected a torch.distributions object or a logits tensor, got {kind}")
    return dist


def categorical_logits(dist: Distribution) -> Tensor | None:
    """Normalised logits (*B, K) of a categorical-type distribution, else None."""
    if isinstance(dist, (Categorical, OneHotCategorical)):
        return dist.logits
    return None


def one_hot_sample(dist: Distribution, logits: Tensor, index: Tensor, extras: dict | None = None) -> StochasticSample:
    """The sample of categories ``index`` (n, *B) under normalised ``logits`` (*B, K): one-hot values
    (n, *B, K) and log-probs (n, *B) that carry the gradient to the logits."""
    value = F.one_hot(index, logits.shape[-1]).to(logits.dtype)
    log_prob = torch.gather(logits.expand(len(index), *logits.shape), -1, index.unsqueeze(-1)).squeeze(-1)
    return StochasticSample(value=value, log_prob=log_prob, dist=dist, index=index, extras=extras or {})


def sum_trailing(log_prob: Tensor, ndim: int) -> Tensor:
    """Sum (n, *B) over the dims of B beyond the first ``ndim - 1`` (the cost's C dims)."""
    extra = log_prob.dim() - ndim
    return log_prob.sum(dim=tuple(range(ndim, log_prob.dim()))) if extra > 0 else log_prob


def check_cost(s: StochasticSample, cost: Tensor, name: str) -> Tensor:
    """Cost must be (n, *C) with C a prefix of the sample batch shape B."""
    if not isinstance(cost, Tensor):
        raise UserError(f"estimator '{name}': cost must be a tensor, got {type(cost).__name__}")
    b = tuple(s.batch_shape)
    c = tuple(cost.shape[1:])
    if cost.dim() == 0 or cost.shape[0] != s.n or c != b[: len(c)]:
        raise UserError(
            f"estimator '{name}': cost has shape {tuple(cost.shape)} but must be (n, *C) = ({s.n}, ...) with "
            f"C a prefix of the sample batch shape {b} (one cost per sample and per input)"
        )
    return cost


class Estimator(nn.Module):
    """The base class of every gradient estimator: it samples a stochastic node (``sample``) and turns the
    cost the model pays for the samples into a surrogate loss whose gradient estimates ``grad E[cost]``
    (``loss``). A subclass sets ``Config`` (its options, a dataclass) and ``capabilities`` (a built-in: its
    ``spec``, which gives both), and implements ``sample`` and ``loss``; ``requirements(options)`` refines the
    capabilities for given options.

    An estimator is an ``nn.Module``: its state (an EMA baseline, a learned baseline or control variate, a
    temperature schedule) is saved in checkpoints, and trained by the model's optimizer when the model holds
    the estimator as an attribute. Build one by name with ``get_estimator``; register your own with
    ``@register_estimator("name", config=Options)``.

    Attributes:
        Config: The options dataclass; ``get_estimator`` validates a recipe's options against it and passes
            the instance as ``options``.
        capabilities: What the estimator can train (``Capabilities``), checked against a model's
            ``StochasticNode`` when a recipe loads; ``None``: undeclared, never refused.
        unbiased: Whether ``E[grad loss] == grad E[cost]``; set from ``capabilities.unbiased``.
        name: The registry name, set by ``get_estimator``.
        options: The validated options (an instance of ``Config``).

    Examples:
        A pathwise estimator, scaled (the README's "your own estimator in ~10 lines"):

        ```python
        from dataclasses import dataclass

        import torch
        from torch.distributions import Normal
        from zoo.estimators import Capabilities, Estimator, StochasticSample, get_estimator, register_estimator

        @dataclass
        class ScaledOptions:
            scale: float = 1.0  # multiplies the pathwise gradient

        @register_estimator("scaled_reparam_example", config=ScaledOptions)
        class ScaledReparam(Estimator):
            Config = ScaledOptions
            capabilities = Capabilities(distributions="continuous", differentiable_cost=True)

            def sample(self, dist, n=None):
                z = dist.rsample((self._n(n),))
                return StochasticSample(value=z, log_prob=dist.log_prob(z), dist=dist)

            def loss(self, s, cost, context=None):
                return self.options.scale * cost.mean()

        est = get_estimator("scaled_reparam_example", scale=2.0)
        mu = torch.zeros(5, requires_grad=True)
        s = est.sample(Normal(mu, 1.0), n=3)                 # s.value: (3, 5)
        est.loss(s, s.value ** 2).backward()                 # mu.grad: (5,), 2x reparam's estimate
        ```
    """

    spec: EstimatorDef | None = None  # the built-ins' spec (zoo/estimators/config.py), which sets the three below
    Config: type = EstimatorOptions
    capabilities: Capabilities | None = None  # None: undeclared (a user's estimator), never refused
    unbiased: bool = True  # whether E[grad loss] == grad E[cost]; mirrors capabilities.unbiased
    name: str = "estimator"  # registry name, set by get_estimator

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:  # the class points to its spec rather than restating it
            cls.Config, cls.capabilities, cls.name = spec.config, spec.capabilities, spec.name
        if cls.__dict__.get("capabilities") is not None or spec is not None:
            cls.unbiased = cls.capabilities.unbiased

    @classmethod
    def requirements(cls, options: Any) -> Capabilities | None:
        """The capabilities with these options (e.g. a leave-one-out baseline needs n >= 2), as the spec refines
        them; ``context`` True here means the estimator needs the model's features."""
        if cls.spec is None or cls.spec.refine is None or cls.capabilities is None:
            return cls.capabilities
        return cls.spec.refine(cls.capabilities, options)

    def __init__(self, options: Any = None, **kwargs: Any):
        super().__init__()
        if options is None:
            options = build_options(self.Config, self.name, kwargs)
        elif kwargs:
            raise TypeError("pass either an options object or keyword options, not both")
        self.options = options
        required = self.requirements(options) if self.capabilities is not None else None
        # True: the model passes cost_fn(value) -> cost to loss() (relax with rebar)
        self.wants_cost_fn = bool(required and required.cost_function)
        # True: the model passes one cost per categorical variable, (n, *B) for a distribution of batch
        # shape B (expectation, unordered_set)
        self.wants_variable_cost = bool(required and required.per_variable_cost)

    def sample(self, dist: Distribution | Tensor, n: int | None = None) -> StochasticSample:
        """Draw ``n`` samples of ``dist`` for the model to consume.

        Args:
            dist: A ``torch.distributions`` object of batch shape ``B``, or a logits tensor ``(*B, K)``
                (a Categorical over its last dim).
            n: Samples per input; ``None``: the estimator's option ``n`` (1 when it has none).

        Returns:
            The samples: ``value`` ``(n, *B, K)`` one-hot for a categorical or ``(n, *B, *E)``, and
            ``log_prob`` ``(n, *B)`` (``StochasticSample``).

        Examples:
            ```python
            import torch
            from zoo.estimators import get_estimator

            s = get_estimator("rloo", n=4).sample(torch.zeros(8, 10))   # logits: 8 inputs, 10 categories
            assert s.value.shape == (4, 8, 10) and s.log_prob.shape == (4, 8)
            ```
        """
        raise NotImplementedError

    def loss(self, s: StochasticSample, cost: Tensor, context: Tensor | None = None) -> Tensor:
        """The surrogate loss: a scalar whose gradient (to the distribution's parameters, and through
        ``s.value`` to whatever the cost depends on) estimates ``grad E[cost]``.

        Args:
            s: What ``sample`` returned (or ``observe`` scored), with the graph to the distribution.
            cost: ``(n, *C)``, one cost per sample and input, ``C`` a prefix of the sample's batch shape ``B``
                (hard attention: ``B = (batch, T)``, one cost per caption ``C = (batch,)``). It keeps its
                graph: the pathwise part of the gradient flows through it as usual.
            context: ``(*C, F)`` features of each input, for an estimator that reads them (a learned
                baseline); ``None`` otherwise.

        Returns:
            A scalar. For a score-function estimator its value is the mean cost, so logging the loss logs
            the cost.

        Examples:
            ```python
            import torch
            from zoo.estimators import get_estimator

            logits = torch.zeros(4, 3, requires_grad=True)
            est = get_estimator("reinforce", baseline="ema", decay=0.9)
            s = est.sample(logits, n=2)
            cost = (s.index == 2).float()                    # (n, *B) = (2, 4): a cost for category 2
            est.loss(s, cost).backward()                     # logits.grad: (4, 3), pushes category 2 down
            ```
        """
        raise NotImplementedError

    def set_step(self, step: int) -> None:
        """Set schedules to global step ``step``; models may call it every training step."""

    def _n(self, n: int | None) -> int:
        n = int(getattr(self.options, "n", 1) if n is None else n)
        if n < 1:
            raise UserError(f"estimator '{self.name}': number of samples n must be >= 1, got {n}")
        return n

    def extra_repr(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in dataclasses.asdict(self.options).items())
        return f"name={self.name!r}, {opts}" if opts else f"name={self.name!r}"


# ---- options ------------------------------------------------------------------------------------
def get_estimator(spec: str | Mapping | Estimator, **options: Any) -> Estimator:
    """Build an estimator from a name, a ``{"name": ..., **options}`` mapping (a recipe's
    ``estimator:`` section), or a dotted path ``"pkg.mod:Cls"``; an Estimator is returned as is.

    Args:
        spec: A registered name (``python -m zoo.estimators list``), a mapping with ``name`` and options, a
            dotted path to an ``Estimator`` subclass, or an ``Estimator`` (returned unchanged).
        **options: The estimator's options (its ``Config`` fields), checked: an unknown option or a wrong
            type is a ``UserError`` that names the options there are.

    Returns:
        The estimator, an ``nn.Module`` (hold it as an attribute of the model so that its state is saved and
        trained).

    Examples:
        ```python
        from zoo.estimators import get_estimator

        a = get_estimator("reinforce", baseline="ema", decay=0.9)
        b = get_estimator({"name": "rloo", "n": 4})          # a recipe's estimator: section
        assert a.name == "reinforce" and b.options.n == 4
        ```
    """
    if isinstance(spec, Estimator):
        if options:
            raise UserError("get_estimator: options given together with an estimator instance")
        return spec
    if isinstance(spec, Mapping):
        spec = {str(k): v for k, v in spec.items()}
        if "name" not in spec:
            raise UserError(f"estimator spec {spec} has no 'name' (e.g. {{name: reinforce, baseline: ema}})")
        name = spec.pop("name")
        spec.update(options)
        options = spec
    elif isinstance(spec, str):
        name = spec
    else:
        raise UserError(f"estimator must be a name, a mapping with 'name', or an Estimator; got {spec!r}")
    entry = ESTIMATORS.entry(name)
    cls = entry.obj
    check_estimator_class(name, cls)
    config_cls = entry.config or getattr(cls, "Config", None)
    if config_cls is None:
        est = cls(**options)
    else:
        est = cls(build_options(config_cls, name, options))
    if isinstance(est, Estimator):
        est.name = name
    return est


def list_estimators(pattern: str = "*") -> list[str]:
    return ESTIMATORS.list(pattern)


def describe(name: str) -> str:
    """One line: name, capabilities, description."""
    entry = ESTIMATORS.entry(name)
    description = entry.spec.description or doc_line(entry.obj)  # a built-in's: its class's docstring
    caps = entry.spec.capabilities
    tag = caps.describe() if caps is not None else "capabilities undeclared"
    return f"{name:18s} {description}\n{'':18s}   [{tag}]"
