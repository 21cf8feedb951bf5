"""Callbacks a recipe can name under `callbacks:` (name + keyword options)."""

from __future__ import annotations

from typing import Any

from zoo.errors import UserError
from zoo.registry import closest, import_dotted
from zoo.schema import validate_call
from zoo.source_signature import class_lineage, init_signature

NAMED_CALLBACKS = {
    "grad_variance": "zoo.callbacks.grad_variance:GradientVarianceCallback",
    "early_stopping": "zoo.callbacks.early_stopping:EarlyStopping",  # Lightning's; monitor: the model's by default
    "lr_monitor": "lightning.pytorch.callbacks:LearningRateMonitor",
    "swa": "lightning.pytorch.callbacks:StochasticWeightAveraging",
    "ema": "zoo.callbacks.ema:EMAWeights",  # EMA of the weights; a model's validation-fitted buffers kept apart
}


def resolve(item: Any) -> tuple[str, str, dict]:
    """A ``callbacks:`` entry (a name, or a mapping with a ``name`` and options) -> (name, the class's
    dotted path, options), its keys and types checked against the class's signature: read from source for
    the named ones (no torch imported), a dotted path's class imported."""
    if not isinstance(item, (str, dict)):
        raise UserError(f"callback entry {item!r} must be a name or a mapping with a 'name' "
                        f"(one of {', '.join(NAMED_CALLBACKS)})")
    spec = {"name": item} if isinstance(item, str) else dict(item)
    name = spec.pop("name", None)
    if not isinstance(name, str) or not name:
        glued = [k for k in spec if isinstance(k, str) and ":" in k]  # {name:ema} is one key in YAML: no space
        hint = (f": YAML reads {glued[0]!r} as one key because no space follows its colon, write "
                f"{{{', '.join(k.replace(':', ': ', 1) for k in glued)}}}") if glued else ""
        raise UserError(f"callback entry {item!r} needs a 'name' (one of {', '.join(NAMED_CALLBACKS)}){hint}")
    if name not in NAMED_CALLBACKS and ":" not in name:
        raise UserError(f"unknown callback '{name}'{closest(name, list(NAMED_CALLBACKS))}. Known: "
                        f"{', '.join(NAMED_CALLBACKS)}, or a dotted path 'package.module:Class'")
    target = NAMED_CALLBACKS.get(name, name)
    signature = init_signature(target) if _read_from_source(name, target) else None
    if signature is None:  # a user's own class by dotted path: imported (as a plugin is)
        signature = import_dotted(target).__init__
    validate_call(signature, spec, f"callback '{name}'", what="option")  # keys and types
    return name, target, spec


def _read_from_source(name: str, target: str) -> bool:
    """A named callback, or Lightning's own class by dotted path: read from source, since importing Lightning
    (~4 s) for a recipe check is what the check avoids; a user's own class is imported."""
    return name in NAMED_CALLBACKS or target.split(".")[0] in ("lightning", "pytorch_lightning")


def is_early_stopping(name: str, target: str) -> bool:
    """Whether the callback stops the run early (Lightning's EarlyStopping or a subclass): a named one by its
    name, a dotted path's class (imported already by ``resolve``) by its bases."""
    if name in NAMED_CALLBACKS:
        return name == "early_stopping"
    lineage = class_lineage(target) if _read_from_source(name, target) else None
    if lineage is not None:
        return any(c.startswith("lightning.") and c.endswith(":EarlyStopping") for c in lineage)
    cls = import_dotted(target)
    return isinstance(cls, type) and any(c.__name__ == "EarlyStopping" and c.__module__.startswith("lightning.")
                                         for c in cls.__mro__)


def _as_list(items: Any, where: str) -> list:
    if not isinstance(items, list):
        raise UserError(f"'callbacks' in {where} must be a list, e.g. [grad_variance] or "
                        f"[{{name: early_stopping, monitor: val/loss}}], got {items!r}")
    return items


def check_callbacks(items: Any, where: str = "the recipe") -> list[tuple[str, str, dict]]:
    """Check a recipe's ``callbacks:`` before anything is imported or built: each entry resolves and its
    class's signature accepts the options (the class's own checks run when the run builds it). Returns each
    entry's (name, dotted path, options), for the checks of the run's settings that read them."""
    return [resolve(item) for item in _as_list(items, where)]


def build_callbacks(items: Any) -> list:
    """The callbacks of a checked ``callbacks:`` list (``check_callbacks``), each made once."""
    built = []
    for item in items:
        spec = {"name": item} if isinstance(item, str) else dict(item)
        name = spec.pop("name")
        built.append(_construct(name, import_dotted(NAMED_CALLBACKS.get(name, name)), spec))
    return built


def _construct(name: str, cls: type, options: dict) -> Any:
    try:
        return cls(**options)
    except (TypeError, ValueError, RuntimeError) as err:  # RuntimeError: torch's, e.g. device='banana'
        raise UserError(f"callback '{name}': {err}") from None
    except Exception as err:
        if type(err).__name__ == "MisconfigurationException":  # Lightning's callbacks check their options
            raise UserError(f"callback '{name}': {err}") from None
        raise
