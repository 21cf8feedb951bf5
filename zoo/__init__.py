"""The zoo: PyTorch Lightning models trained through randomness, on one estimator registry.

    import zoo
    zoo.list_pretrained()                   # {name: description} of the released models
    model = zoo.load("vae-digits")          # a pretrained entry, or a path to a .ckpt
    images = model.sample(16, seed=0)       # each model's inference methods: docs/api.md
    zoo.transforms("ood-digits-joint")      # an image model's input transforms, as its card states them
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"

# `python -m zoo.<command>` or a console script (zoo-train, zoo-evaluate, ...; pyproject.toml), before a
# subpackage (zoo.estimators) loads torch
if _sys.argv[:1] == ["-m"] or _os.path.basename(_sys.argv[0] if _sys.argv else "").startswith("zoo-"):
    from zoo import paths as _paths

    if _paths.working_folder_gone():
        raise SystemExit(2)
    _paths.config_folders_elsewhere()


def list_pretrained() -> dict[str, str]:
    """The pretrained models ``load`` takes by name: {name: one-line description}, e.g. {"vae-digits": "...", ...};
    the released ones, then those ``python -m zoo.pretrained export`` wrote into the working folder's
    ``pretrained/``."""
    from zoo.loading import entries  # imported when used: `import zoo` stays light (zoo.loading reads files)

    return {name: card.get("description", "") for name, (card, _) in entries().items()}


def load(name_or_path: str, device: str | None = None, trust_code: bool = False):
    """A model ready for inference (eval mode, no gradients needed) from a pretrained name (``list_pretrained``)
    or the path of a ``.ckpt`` written by ``python -m zoo.train``, a folder written by ``model.save_pretrained``
    or a Hugging Face Hub repository ``"hf://owner/repo"`` (docs/api.md); on ``device`` ("cuda", "cpu", ...; default:
    the CPU). Each model's inference methods are documented in docs/api.md (``sample``, ``caption``, ...).
    The model and estimator its file names resolve to the zoo's own and the installed plugins; one named by a
    dotted path (``"mypkg.models:MyModel"``) is refused before its module is imported, unless ``trust_code=True``
    (as the Hub's ``trust_remote_code``)."""
    from zoo.loading import load as _load  # imported when used: `import zoo` stays light (zoo.loading reads files)

    model = _load(name_or_path, trust_code)
    return model if device is None else model.to(device)


def transforms(name_or_path: str, trust_code: bool = False):
    """The input transforms of an image model (like torchvision's ``weights.transforms()``): what a user's
    picture goes through before the model sees it, as the card states it (size, channels, resampling, value
    range, polarity, ...), read from the card without loading the weights; for a checkpoint or an older card,
    derived from the model's config. Callable: ``zoo.transforms("vae-digits")("digit.png")`` -> (1, 8, 8)."""
    from zoo.loading import (
        transforms as _transforms,  # imported when used: `import zoo` stays light (zoo.loading reads files)
    )

    return _transforms(name_or_path, trust_code)
