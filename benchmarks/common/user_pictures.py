"""Pictures as users bring them, made from a model's own test images, and what the model makes of them.

A user's picture of a digit is bigger than 8x8 (a scan, a drawing, a screenshot), maybe a JPEG, maybe black
ink on white paper. ``pictures`` makes such pictures from test images (nearest or bilinear upscaling, JPEG
files, the other polarity); ``ood_acceptance``, ``vae_log_likelihood`` and ``same_captions`` score a model
on them against the originals. Used by ``tests/test_user_pictures.py`` and the study
``studies/2026-11-29-user-pictures.md`` (``studies/user_pictures.py``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class Kind:
    """One way a user's picture differs from the test image it shows."""

    scale: int  # the picture is scale times bigger on each side
    resample: str  # PIL's filter upscaling it: nearest or bilinear
    invert: bool = False  # black ink on white paper (the data are light on dark)
    jpeg: int | None = None  # saved as a JPEG of this quality (None: PNG-exact pixels)
    bitmap: bool = False  # a binary bitmap whose scale x scale blocks hold the pixel's ink (how the digits were made)


KINDS = {  # digits (8x8): the pictures of the probe and more; scenes (64x64) are scaled by 2 instead
    "nearest x4": Kind(4, "nearest"),
    "bilinear x4": Kind(4, "bilinear"),
    "bilinear x8": Kind(8, "bilinear"),
    "bitmap x4": Kind(4, "nearest", bitmap=True),
    "jpeg nearest x4": Kind(4, "nearest", jpeg=75),
    "jpeg bilinear x4": Kind(4, "bilinear", jpeg=75),
    "inverted nearest x4": Kind(4, "nearest", invert=True),
    "inverted jpeg nearest x4": Kind(4, "nearest", invert=True, jpeg=75),
}


def pictures(x: Tensor, kind: Kind, folder: Path | None = None) -> list[Any]:
    """Pictures of images ``x`` (N, C, h, w) in [0, 1]: PIL images, or with ``folder`` file paths (JPEG or PNG)."""
    import numpy as np  # imported when used: numpy
    from PIL import Image  # imported when used: PIL

    out = []
    arr = (x.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()  # (N, h, w, C)
    rng = np.random.default_rng(0)  # where a bitmap's block puts its set pixels
    for i, a in enumerate(arr):
        img = Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a)
        if kind.bitmap:
            img = Image.fromarray(bitmap(a[..., 0], kind.scale, rng))
        else:
            img = img.resize((img.width * kind.scale, img.height * kind.scale),
                             Image.Resampling.NEAREST if kind.resample == "nearest" else Image.Resampling.BILINEAR)
        if kind.invert:
            img = Image.fromarray(255 - np.asarray(img))
        if kind.jpeg is not None and folder is None:
            buffer = io.BytesIO()
            img.save(buffer, "JPEG", quality=kind.jpeg)
            img = Image.open(io.BytesIO(buffer.getvalue()))
        if folder is not None:
            path = folder / f"picture{i}.{'jpg' if kind.jpeg is not None else 'png'}"
            img.save(path, **({"quality": kind.jpeg} if kind.jpeg is not None else {}))
            img = str(path)
        out.append(img)
    return out


def bitmap(grey: Any, scale: int, rng: Any) -> Any:
    """A binary (h * scale, w * scale) uint8 bitmap whose block (i, j) has round(grey[i, j] / 255 * scale^2)
    pixels set, at random places: a box filter gives grey back (to 1 / scale^2), as the digits were made."""
    import numpy as np  # imported when used: numpy

    h, w = grey.shape
    counts = np.rint(grey.astype(np.float64) / 255 * scale * scale).astype(int)
    out = np.zeros((h * scale, w * scale), np.uint8)
    for i in range(h):
        for j in range(w):
            block = np.zeros(scale * scale, np.uint8)
            block[rng.permutation(scale * scale)[:counts[i, j]]] = 255
            out[i * scale:(i + 1) * scale, j * scale:(j + 1) * scale] = block.reshape(scale, scale)
    return out


def scaled(kind: Kind, factor: int) -> Kind:
    """``kind`` with its scale divided by ``factor`` (at least 2): scenes are 64x64 already."""
    return Kind(max(2, kind.scale // factor), kind.resample, kind.invert, kind.jpeg)


def ood_acceptance(model: Any, images: Any, labels: Tensor, **options: Any) -> dict[str, float]:
    """Max-softmax verdicts: the fraction accepted as in-distribution and the accuracy."""
    d = model.detect(model.preprocess(images, **options), detector="msp")
    return {"accepted": float(d.is_in.float().mean()), "accuracy": float((d.labels.cpu() == labels).float().mean())}


def vae_log_likelihood(model: Any, images: Any, k: int = 100, seed: int = 0, **options: Any) -> float:
    """The mean importance-weighted bound on log p(x) (nats), seeded."""
    return float(model.log_likelihood(model.preprocess(images, **options), k=k, seed=seed).mean())


def same_captions(model: Any, images: Any, reference: list[str], **options: Any) -> float:
    """The fraction of pictures captioned (greedy) as their originals were."""
    captions = model.caption(model.preprocess(images, **options))
    return sum(a == b for a, b in zip(captions, reference)) / len(reference)
