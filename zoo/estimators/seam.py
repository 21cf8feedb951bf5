"""The typed seam between a model's stochastic node and the estimator that trains it.

A model states its node from its validated options, as a class method (None: the options leave
nothing to sample, e.g. soft attention; the zoo's own models give the function as their spec's ``node``, which
``ZooModule.stochastic_node`` calls)::

    @classmethod
    def stochastic_node(cls, cfg: DVAEConfig, data_info: dict | None = None) -> StochasticNode | None:
        return StochasticNode(kind="categorical", differentiable_cost=True,
                              variables=cfg.n_latents, categories=cfg.n_classes, samples=cfg.n_samples or None)

and types the option that names the estimator (``estimator: EstimatorSpec = estimator_option("reinforce")``
in its config). Every estimator declares its ``Capabilities`` (``capabilities.py``; the built-ins in their specs,
``options.py``). The recipe loader calls ``check_spec`` before torch is imported (a built-in estimator's class
is not imported for it): the estimator's name, every one of its options, and its
fit to the node; a mismatch is a ``UserError`` that lists the estimators that do fit. The loader keeps
the result on the model's options object (``keep_checked``); the model then builds its estimator with
``build_for_node`` (``ZooModule.build_estimator`` does it), which checks the spec only where nothing did
(a model built from Python, a checkpoint), and hands the node's context size to estimators that read a
context (and the sample's size to a control variate's input): no model names or patches an estimator.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from zoo.errors import FIRST_LINE, UserError
from zoo.estimators.capabilities import NODE_KINDS, Capabilities, StochasticNode, mismatch  # noqa: F401  (seam's names)
from zoo.estimators.config import split_spec
from zoo.registry import ESTIMATORS
from zoo.schema import EstimatorSpec, estimator_option, validate  # noqa: F401  (light, for configs that import no torch)


def build_options(config_cls: type, name: str, kwargs: Mapping[str, Any]) -> Any:
    """Validate ``kwargs`` against the dataclass ``config_cls`` (``zoo.schema.validate``: keys, types,
    ranges, choices, ``__post_init__``); mistakes are ``UserError``s."""
    if not dataclasses.is_dataclass(config_cls):
        return config_cls(**kwargs)

    return config_cls(**validate(config_cls, dict(kwargs), f"estimator '{name}'", what="option"))


def check_estimator_class(name: str, cls: Any) -> None:
    """A user's estimator may be duck-typed, but it is a class with the two methods every model
    calls; a dotted path to anything else (a function, a dict type) would fail only inside fit."""
    hint = "an estimator of your own is a class with sample() and loss() (see zoo.estimators.Estimator)"
    if not isinstance(cls, type):
        raise UserError(f"estimator '{name}' is a {type(cls).__name__}, not a class: {hint}")
    missing = [m for m in ("sample", "loss") if not callable(getattr(cls, m, None))]
    if missing:
        raise UserError(f"estimator '{name}' ({cls.__name__}) has no {' or '.join(m + '()' for m in missing)}: {hint}")


def resolve(spec: Any, where: str = "") -> tuple[str, type | None, Any]:
    """(name, class, validated options object) of an estimator spec; every mistake a UserError. The class is
    None for a built-in not imported yet (its spec states its options and capabilities)."""
    name, options = split_spec(spec, where)
    entry = ESTIMATORS.entry(name)
    if entry.loaded is not None:  # a class in hand (a user's own): one with sample() and loss()
        check_estimator_class(name, entry.loaded)
    config_cls = entry.config
    opts = build_options(config_cls, name, options) if config_cls is not None else options
    return name, entry.loaded, opts


def requirements(name: str, opts: Any) -> Capabilities | None:
    """What estimator ``name`` needs with options ``opts``, as its spec states (None: undeclared, a user's own
    estimator that states no capabilities)."""
    return ESTIMATORS.spec(name).requirements(opts)


def default_requirements(cls: Any) -> Capabilities | None:
    """An estimator class's requirements with its default options."""
    if not isinstance(cls, type) or getattr(cls, "capabilities", None) is None:
        return None
    config = getattr(cls, "Config", None)
    return cls.requirements(config()) if dataclasses.is_dataclass(config) else cls.capabilities


def _default_requirements_of(name: str) -> Capabilities | None:
    spec = ESTIMATORS.spec(name)
    return spec.requirements(spec.config()) if dataclasses.is_dataclass(spec.config) else spec.capabilities


def compatible(node: StochasticNode) -> list[str]:
    """Registered estimators that can train ``node`` with their default options (the built-ins by their
    specs: no class imported)."""
    return [name for name in ESTIMATORS.list() if mismatch(_default_requirements_of(name), node) is None]


def check_spec(spec: Any, node: StochasticNode, where: str, model: str = "model") -> tuple[str, type | None, Any]:
    """Validate an estimator spec for ``node``: name, every option, and the fit. Returns ``resolve``'s
    triple. A misfit is a UserError naming the reason and the estimators that fit."""
    name, cls, opts = resolve(spec, where)
    why = mismatch(requirements(name, opts), node, node.samples or getattr(opts, "n", None))
    if why:
        fits = ", ".join(compatible(node))
        details = [f"Estimators that fit: {fits}", *([node.hint] if node.hint else []), f"in {where}"]
        head = f"estimator '{name}' cannot train {model}'s {node.kind} node"
        if len(f"{head}: {why}; use one below") > FIRST_LINE:  # a long reason: on a line of its own
            raise UserError(f"{head} (the reason below); use one that fits", details=[f"why: {why}", *details])
        raise UserError(f"{head}: {why}; use one below", details=details)
    return name, cls, opts


def keep_checked(options: Any, spec: Any, checked: tuple[str, type | None, Any]) -> None:
    """Hands ``check_spec``'s result for ``spec`` to the model built from ``options`` (its validated options
    object, ``zoo.config``'s), so that ``build_for_node`` does not check it again."""
    try:
        object.__setattr__(options, "_checked_estimator", (copy.deepcopy(spec), checked))  # not a field: not saved
    except AttributeError:  # an options class with __slots__: the model checks the spec when it builds it
        pass


def checked_estimator(options: Any, spec: Any) -> tuple[str, type | None, Any] | None:
    """``check_spec``'s result kept on ``options`` (``keep_checked``) for this ``spec``, else None."""
    kept = getattr(options, "_checked_estimator", None)
    return kept[1] if kept is not None and kept[0] == spec else None


def resolved_estimator(options: Any) -> dict | None:
    """The estimator ``check_spec`` resolved for a model's validated options (``keep_checked``), as a mapping:
    ``{"name": ..., every option: its value}``, the defaults of options the spec left out included; None where
    none was checked (a model that samples nowhere with these options, or options not made by ``zoo.config``)."""
    kept = getattr(options, "_checked_estimator", None)
    if kept is None:
        return None
    name, _, opts = kept[1]
    values = dataclasses.asdict(opts) if dataclasses.is_dataclass(opts) else dict(opts)
    return {"name": name, **values}


def build_for_node(spec: Any, node: StochasticNode, where: str = "the model", model: str = "model",
                   checked: tuple[str, type | None, Any] | None = None) -> Any:
    """The estimator for ``node``: checked as ``check_spec`` does (``checked``: that check's result, made
    already when the recipe loaded), given the node's context size if it reads a context and its options
    leave the size open (so no layer is built lazily: DDP-safe)."""
    name, cls, opts = checked if checked is not None else check_spec(spec, node, where, model)
    cls = ESTIMATORS.get(name) if cls is None else cls
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
    if isinstance(getattr(type(est), "name", None), str):  # an Estimator's registry name (a duck-typed one has none)
        est.name = name
    return est
