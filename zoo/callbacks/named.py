"""Callbacks a recipe can name under `callbacks:` (name + keyword options)."""

from __future__ import annotations

from typing import Any

from zoo.errors import UserError
from zoo.options import validate_call
from zoo.registry import closest, import_dotted

NAMED_CALLBACKS = {
    "grad_variance": "zoo.callbacks.grad_variance:GradientVarianceCallback",
    "early_stopping": "lightning.pytorch.callbacks:EarlyStopping",
    "lr_monitor": "lightning.pytorch.callbacks:LearningRateMonitor",
    "swa": "lightning.pytorch.callbacks:StochasticWeightAveraging",
}


def build_callbacks(items: list) -> list:
    out = []
    for item in items:
        spec = {"name": item} if isinstance(item, str) else dict(item)
        name = spec.pop("name", None)
        if name is None:
            raise UserError(f"callback entry {item!r} needs a 'name' (one of {', '.join(NAMED_CALLBACKS)})")
        if name not in NAMED_CALLBACKS and ":" not in name:
            raise UserError(f"unknown callback '{name}'{closest(name, list(NAMED_CALLBACKS))}. Known: "
                            f"{', '.join(NAMED_CALLBACKS)}, or a dotted path 'package.module:Class'")
        cls = import_dotted(NAMED_CALLBACKS.get(name, name))
        validate_call(cls.__init__, spec, f"callback '{name}'", what="option")  # keys and types
        out.append(_construct(cls, name, spec))
    return out


def _construct(cls: type, name: str, options: dict) -> Any:
    try:
        return cls(**options)
    except (TypeError, ValueError) as err:
        raise UserError(f"callback '{name}': {err}") from None
