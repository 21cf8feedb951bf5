"""Every model of the zoo lives in a sub-package here, of one shape: ``config.py`` (its options and the
declarations of its entries, no torch), ``data.py`` (datamodules), ``nets.py`` (networks), ``module.py``
(the LightningModule and its loss), ``evaluation.py`` (metrics), ``predict.py`` (inference and the
command line), ``plots.py`` (figures); a further file only for a second idea, named for it.

Each ``config.py`` declares its entries' specs once (``MODELS.declare(ModelSpec(name,
"zoo.models.x.module:Class", XConfig, node=...))``), so a recipe is checked in a fraction of a second before
torch and Lightning are imported; the class's module is imported when the entry is first used, and the class
points to its spec (``spec = X_SPEC``).
"""

import importlib
import pkgutil


def declare_all() -> None:
    """Import every sub-package's ``config.py`` (torch-free), which declares its models and datamodules."""
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            importlib.import_module(f"{__name__}.{info.name}.config")
