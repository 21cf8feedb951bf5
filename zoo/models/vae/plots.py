"""Image helpers for the VAE pictures and for `zoo.predict`: enlarging tiny digits, laying out
inputs beside reconstructions (reading a user's image is ``model.preprocess``, predict.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def upscale(images: Tensor, min_size: int = 32) -> Tensor:
    """Nearest-neighbour enlarge (N, C, H, W) so that H >= min_size (8x8 digits are unreadable)."""
    factor = max(1, -(-min_size // images.shape[-2]))
    return F.interpolate(images, scale_factor=factor, mode="nearest") if factor > 1 else images


def pairs(inputs: Tensor, recons: Tensor, nrow: int = 8) -> Tensor:
    """Interleave rows: ``nrow`` inputs, then their ``nrow`` reconstructions, and so on: (2N, C, H, W)."""
    rows = []
    for i in range(0, len(inputs), nrow):
        a, b = inputs[i:i + nrow], recons[i:i + nrow]
        if len(a) < nrow:  # pad the last row so reconstructions stay under their inputs
            pad = torch.zeros(nrow - len(a), *a.shape[1:])
            a, b = torch.cat([a, pad]), torch.cat([b, pad])
        rows += [a, b]
    return torch.cat(rows)
