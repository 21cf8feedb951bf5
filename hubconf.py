"""torch.hub entry points: ``torch.hub.load("<owner>/<repo>", "vae_digits")`` (or ``torch.hub.load(".",
"vae_digits", source="local")`` from a clone) returns what ``zoo.load("vae-digits")`` does. One entry per
pretrained model in zoo/pretrained/, named as the model with ``_`` for ``-``; ``device=`` as zoo.load's."""

from __future__ import annotations

dependencies = ["torch", "torchvision", "lightning", "torchmetrics", "omegaconf", "safetensors", "tokenizers"]


def _entry(name: str):
    def load(device: str | None = None, **kwargs):
        import zoo

        if kwargs:  # torch.hub passes what the user gave; pretrained=False has no meaning here
            raise TypeError(f"{name}: unknown argument(s) {', '.join(kwargs)} (only device=)")
        return zoo.load(name, device=device)

    load.__name__ = name.replace("-", "_")
    load.__doc__ = f"The pretrained zoo model '{name}' (zoo.load({name!r}))."
    return load


def _entries() -> dict:
    from zoo.loading import pretrained_cards

    return {name.replace("-", "_"): _entry(name) for name in pretrained_cards()}


globals().update(_entries())
