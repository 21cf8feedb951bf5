"""Every model of the zoo lives in a sub-package here; `import_all()` imports them so their
`@MODELS.register` / `@DATAMODULES.register` decorators run."""

import importlib
import pkgutil


def import_all() -> None:
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            importlib.import_module(f"{__name__}.{info.name}")
