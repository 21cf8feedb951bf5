"""Every model of the zoo lives in a sub-package here.

Each sub-package's ``__init__`` imports nothing heavy; it names in ``MODULES`` the modules whose
``@MODELS.register`` / ``@DATAMODULES.register`` decorators register its entries, and its
``config.py`` holds the option dataclasses, importing no torch, with ``SCHEMAS`` naming them:
``{"model": {"vae": VAEConfig}, "datamodule": {"digits": DigitsConfig}}``. So a recipe's model and
data keys are checked in a fraction of a second (``config_schemas``), before torch and Lightning are
imported (``import_all``, a few seconds) for the checks that need the classes.
"""

import importlib
import pkgutil


def _packages() -> list[str]:
    return [f"{__name__}.{info.name}" for info in pkgutil.iter_modules(__path__) if info.ispkg]


def import_all() -> None:
    """Import every sub-package's registering modules (torch, Lightning and the models)."""
    for package in _packages():
        module = importlib.import_module(package)
        for name in getattr(module, "MODULES", ()):
            importlib.import_module(f"{package}.{name}")


def config_schemas() -> dict[str, dict[str, type]]:
    """{"model": {name: Config}, "datamodule": {name: Config}} of the zoo's own entries, from the
    sub-packages' ``config.py`` alone (no torch)."""
    out: dict[str, dict[str, type]] = {"model": {}, "datamodule": {}}
    for package in _packages():
        try:
            config = importlib.import_module(f"{package}.config")
        except ModuleNotFoundError as err:
            if err.name != f"{package}.config":
                raise
            continue
        for kind, entries in getattr(config, "SCHEMAS", {}).items():
            out[kind].update(entries)
    return out
