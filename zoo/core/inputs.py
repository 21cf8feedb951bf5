"""What the models' Python inference methods share: reading user images (a file path, a PIL image or a
numpy array) and checking what they are given, so bad input is one ``UserError`` naming what was
expected instead of a shape error from inside a layer.

Each image model's ``preprocess`` turns the PIL images read here into the tensor it was trained on
(like torchvision's ``weights.transforms()``); its inference methods call it for anything that is not
already a tensor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torch import Tensor

from zoo.errors import UserError, image_too_large
from zoo.paths import check_input_file

ImageLike = Any  # a path (str / os.PathLike), a PIL.Image.Image or a numpy array (H, W) / (H, W, C)


def check_count(n: Any, what: str = "n") -> int:
    """A positive integer count (``n`` samples): a UserError otherwise."""
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise UserError(f"{what} must be an integer >= 1, got {n!r}")
    return n


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise UserError(f"seed must be an integer >= 0 (or None: fresh draws), got {seed!r}")
    return seed


def resolve_seed(seed: int | None) -> int:
    """``seed`` checked, or for ``None`` one drawn from torch's global generator (so ``torch.manual_seed``
    makes "no seed" reproducible too, as for any torch sampling)."""
    return int(torch.randint(2**62, (), device="cpu")) if seed is None else check_seed(seed)


def generator(seed: int | None, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator seeded with ``resolve_seed(seed)``. On the CPU (the default) the same draws come on every
    device; the result is moved."""
    return torch.Generator(device=device).manual_seed(resolve_seed(seed))


def is_image_like(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike, Image.Image, np.ndarray))


def to_pil(item: ImageLike) -> tuple[Any, str]:
    """(PIL image, a name for messages) from a path, a PIL image or a numpy array (H, W) / (H, W, C):
    uint8 0..255, or floats in [0, 1]."""
    if isinstance(item, Image.Image):
        return item, "a PIL image"
    if isinstance(item, np.ndarray):
        if item.ndim not in (2, 3) or (item.ndim == 3 and item.shape[-1] not in (1, 3, 4)):
            raise UserError(f"a numpy image must be (H, W) or (H, W, C) with C = 1, 3 or 4, got shape {item.shape}")
        arr = item[..., 0] if item.ndim == 3 and item.shape[-1] == 1 else item
        in_unit = arr.size == 0 or (np.isfinite(arr).all() and -1e-6 <= arr.min() and arr.max() <= 1 + 1e-6)
        if arr.dtype != np.uint8 and not in_unit:
            raise UserError(f"a numpy image of {arr.dtype} must hold values in [0, 1] (or be uint8 0..255), got "
                            f"{np.nanmin(arr):g}..{np.nanmax(arr):g}: divide it by its maximum (x / 255 for 0..255 "
                            "values) or pass it as uint8")
        if arr.dtype != np.uint8:  # floats in [0, 1] (what ToTensor gives back), as 0..255
            arr = (np.clip(arr.astype(np.float64), 0.0, 1.0) * 255).round().astype(np.uint8)
        return Image.fromarray(arr), f"a numpy array of shape {item.shape}"
    if isinstance(item, (str, os.PathLike)):
        path = check_input_file(item)
        try:
            img = Image.open(path)
            img.load()
        except Image.DecompressionBombError as err:
            raise image_too_large(err, path) from None
        except (UnidentifiedImageError, OSError) as err:
            raise UserError(f"cannot read {os.path.basename(path)} as an image: give an image file PIL reads (PNG, "
                            "JPEG, ...)",
                            details=[f"file: {path}", f"error: {err}"]) from None
        return img, str(path)
    raise UserError(f"an image is a file path, a PIL image or a numpy array (H, W[, C]), got {type(item).__name__}")


def image_batch(images: Any, convert: Callable[[Any, str], Tensor], shape: Sequence[int], device: torch.device,
                dtype: torch.dtype) -> Tensor:
    """A batch (B, *shape) on ``device`` / ``dtype``: a tensor is checked against ``shape``; one image or a
    list of them (paths, PIL images, numpy arrays) goes through ``convert(pil_image, name) -> (*shape)``."""
    if isinstance(images, Tensor):
        return check_batch(images, shape, "images").to(device, dtype)
    items = [images] if is_image_like(images) else list(images) if isinstance(images, (list, tuple)) else None
    if not items:
        raise UserError("give images as a tensor (B, " + ", ".join(map(str, shape)) + "), or one or a list of "
                        f"file paths, PIL images or numpy arrays; got {images!r:.80}")
    if all(isinstance(i, Tensor) for i in items):
        return check_batch(torch.stack(items), shape, "images").to(device, dtype)
    return torch.stack([convert(*to_pil(item)) for item in items]).to(device, dtype)


def check_batch(x: Tensor, shape: Sequence[int], what: str = "input") -> Tensor:
    """x must be (B, *shape) with B >= 1: a UserError naming the expected shape otherwise."""
    shape = tuple(int(s) for s in shape)
    want = "(B, " + ", ".join(map(str, shape)) + ")"
    if not isinstance(x, Tensor):
        raise UserError(f"{what} must be a tensor {want}, got {type(x).__name__}")
    if x.dim() == len(shape) and tuple(x.shape) == shape:
        raise UserError(f"{what} must be a batch {want}: add the batch dimension (x[None]) to one of shape {shape}")
    if tuple(x.shape[1:]) != shape or len(x) == 0:
        hint = ""
        if len(shape) == 3 and x.dim() == 4:
            bad = [k for k, b in (("channels", x.shape[1] != shape[0]), ("size", tuple(x.shape[2:]) != shape[1:])) if b]
            hint = f" (wrong {' and '.join(bad)})" if bad else " (an empty batch)"
        raise UserError(f"{what} must have shape {want}, got {tuple(x.shape)}{hint}")
    if x.is_floating_point() and not torch.isfinite(x).all():
        raise UserError(f"{what} holds nan or infinite values")
    return x
