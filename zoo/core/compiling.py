"""The recipe key ``compile``: the submodules that carry a model's math, compiled in place.

``nn.Module.compile`` compiles a module's own call where it stands, so its parameters keep their names: a compiled
run's ``state_dict`` (checkpoints, ``zoo.load``, the pretrained export) is an uncompiled one's, with no ``_orig_mod.``
prefix, and either loads into the other. Which submodules a model compiles is its spec's ``compiled``
(``zoo.registry.ModelSpec``); ``zoo.config.check_compile`` refused the key, before torch was imported, for a model
that states a reason instead. Compiling is lazy: each submodule is compiled at its first call (once per new input
shape, dtype or training mode, within torch's recompile limit).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from zoo.errors import UserError
from zoo.registry import closest


def check_backend(options: dict) -> None:
    """A backend name torch does not know, as the one line ``torch.compile`` would raise only at the first step."""
    backend = options.get("backend")
    if backend is None:
        return
    known = torch._dynamo.list_backends(exclude_tags=())  # every registered one (the debugging ones too)
    if backend not in known:
        raise UserError(f"compile.backend={backend} is not a torch.compile backend{closest(backend, known)}: "
                        "use inductor (the default), aot_eager or eager, or another below",
                        details=[f"known: {', '.join(known)}"])


def compiled_submodules(model: nn.Module, names: tuple[str, ...]) -> list[tuple[str, nn.Module]]:
    """(name, submodule) of each of ``names`` the built ``model`` has (an absent or None one, e.g. the GAN part
    of an OOD classifier trained without it, is left out)."""
    found = [(name, getattr(model, name, None)) for name in names]
    return [(name, module) for name, module in found if isinstance(module, nn.Module)]


def compile_nets(model: nn.Module, names: tuple[str, ...], options: dict[str, Any]) -> list[str]:
    """Compile the submodules ``names`` of ``model`` (its spec's ``compiled``) in place with ``options``
    (torch.compile's keyword arguments); the names of those compiled."""
    check_backend(options)
    found = compiled_submodules(model, names)
    if not found:  # a misspelt name would otherwise compile nothing, silently
        raise UserError(f"{type(model).__name__} has none of the submodules its `compiled` names "
                        f"({', '.join(names)}): name its nets there (attributes that hold an nn.Module)")
    for _, module in found:
        module.compile(**options)
    return [name for name, _ in found]
