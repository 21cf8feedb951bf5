"""Callbacks a recipe can name under `callbacks:` (name + keyword options)."""

from __future__ import annotations

from typing import Any

from zoo.errors import UserError
from zoo.options import validate_call
from zoo.registry import closest, import_dotted

NAMED_CALLBACKS = {
    "grad_variance": "zoo.callbacks.grad_variance:GradientVarianceCallback",
    "early_stopping": "zoo.callbacks.early_stopping:EarlyStopping",  # Lightning's; monitor: the model's by default
    "lr_monitor": "lightning.pytorch.callbacks:LearningRateMonitor",
    "swa": "lightning.pytorch.callbacks:StochasticWeightAveraging",
    "ema": "zoo.callbacks.ema:EMAWeights",  # EMA of the weights; a model's validation-fitted buffers kept apart
}


def resolve(item: Any) -> tuple[str, type, dict]:
    """A ``callbacks:`` entry (a name, or a mapping with a ``name`` and options) -> (name, class,
    options), its keys and types checked against the class's signature."""
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
    cls = import_dotted(NAMED_CALLBACKS.get(name, name))
    validate_call(cls.__init__, spec, f"callback '{name}'", what="option")  # keys and types
    return name, cls, spec


def _as_list(items: Any, where: str) -> list:
    if not isinstance(items, list):
        raise UserError(f"'callbacks' in {where} must be a list, e.g. [grad_variance] or "
                        f"[{{name: early_stopping, monitor: val/loss}}], got {items!r}")
    return items


def check_callbacks(items: Any, where: str = "the recipe") -> None:
    """Check a recipe's ``callbacks:`` before any data or model is built: each entry resolves and
    its class accepts the options (constructed once and dropped: the class's own checks run)."""
    for item in _as_list(items, where):
        _construct(*resolve(item))


def build_callbacks(items: Any) -> list:
    return [_construct(*resolve(item)) for item in _as_list(items, "the recipe")]


def _construct(name: str, cls: type, options: dict) -> Any:
    try:
        return cls(**options)
    except (TypeError, ValueError, RuntimeError) as err:  # RuntimeError: torch's, e.g. device='banana'
        raise UserError(f"callback '{name}': {err}") from None
    except Exception as err:
        if type(err).__name__ == "MisconfigurationException":  # Lightning's callbacks check their options
            raise UserError(f"callback '{name}': {err}") from None
        raise
