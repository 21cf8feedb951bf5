"""The zoo: PyTorch Lightning models trained through randomness, on one estimator registry.

    import zoo
    model = zoo.load("vae-digits")          # a pretrained entry, or a path to a .ckpt
"""

__version__ = "0.1.0"


def load(target: str):
    """Load a pretrained model by name or a checkpoint by path, ready for inference."""
    from zoo.hub import load as _load

    return _load(target)
