"""The zoo: PyTorch Lightning models trained through randomness, on one estimator registry.

    import zoo
    model = zoo.load("vae-digits")          # a pretrained entry, or a path to a .ckpt
"""

import sys as _sys

from zoo.hub import load as _load

__version__ = "0.1.0"

if _sys.argv[:1] == ["-m"]:  # `python -m zoo.<command>`, before a subpackage (zoo.estimators) loads torch
    from zoo import cli as _cli

    if _cli.working_folder_gone():
        raise SystemExit(2)
    _cli.config_folders_elsewhere()


def load(target: str):
    """Load a pretrained model by name or a checkpoint by path, ready for inference."""
    return _load(target)
