"""Image helpers for the VAE pictures and for `zoo.predict`: enlarging tiny digits, laying out
inputs beside reconstructions, and reading a user's image file like the training data."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.errors import UserError, image_too_large
from zoo.paths import check_input_file


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


def load_image(path: str, image_shape: list[int], data_info: dict, invert: str = "auto") -> Tensor:
    """Read an image file like the training data: greyscale, resized to (H, W), ink bright on
    dark (``invert``: auto = invert when the border is light, true, false), then binarised at the
    datamodule's threshold (grey values are kept when the data were not binarised). (C, H, W)."""
    from PIL import Image, UnidentifiedImageError  # imported when used: PIL

    p = check_input_file(path)
    try:
        img = Image.open(p).convert("L")
    except Image.DecompressionBombError as err:
        raise image_too_large(err, p) from None
    except (UnidentifiedImageError, OSError) as err:
        raise UserError(f"cannot read {p} as an image: {err}") from None
    _, h, w = image_shape
    img = img.resize((w, h), Image.Resampling.BOX if img.width >= w else Image.Resampling.BILINEAR)
    x = torch.tensor(list(img.getdata()), dtype=torch.float32).view(1, h, w) / 255.0
    border = torch.cat([x[0, 0], x[0, -1], x[0, :, 0], x[0, :, -1]]).mean()
    if invert not in ("auto", "true", "false", "True", "False"):
        raise UserError(f"invert must be auto, true or false, got '{invert}'")
    if invert.lower() == "true" or (invert == "auto" and border > 0.5):
        x = 1.0 - x
    if data_info.get("binarize", "static") != "none":
        x = (x > float(data_info.get("threshold", 0.5))).float()
    return x.expand(image_shape[0], h, w).clone()
