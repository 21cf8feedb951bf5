"""Un-enlarging: the small picture a user's bigger picture was enlarged from, when it was.

A digit made bigger by an integer factor k (a screenshot, an upscaled scan) went through a linear map
x -> U x: nearest upscaling repeats each pixel over a k x k block; bilinear upscaling (PIL's
``Image.resize(BILINEAR)``, OpenCV's ``INTER_LINEAR`` and ``F.interpolate(align_corners=False)``, which agree
on an upscale, or ``align_corners=True``) interpolates between pixel centres. Each is separable,
U = U_H (x) U_W, so the least-squares estimate min ||U x - y|| of an (H, W) picture from a (kH, kW) one is
x = pinv(U_H) y pinv(U_W)^T. The candidate whose relative residual is smallest, and below ``THRESHOLD``,
explains the picture: its x is the picture the model's data were. A picture that no enlargement explains
(a drawing, a bitmap whose blocks hold the pixel's ink at random places, noise) returns None, and goes
through the card's own filter.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from PIL import Image

# (name, how one axis of n pixels is enlarged k times); bilinear_pil is also OpenCV's and align_corners=False
CANDIDATES = ("nearest", "bilinear_pil", "bilinear_align_corners")
# The largest residual ||U x - y|| / ||y - mean(y)|| (x clipped to [0, 1]) of an enlargement taken as one:
# between upscales (<= 0.048) and drawn bitmaps (>= 0.41) on 200 digits (studies/2026-11-29-user-pictures.md)
THRESHOLD = 0.1


@functools.lru_cache(maxsize=64)
def enlarge_matrix(n: int, k: int, kind: str) -> np.ndarray:
    """(n * k, n) float64: one axis of n pixels enlarged k times, column i the enlargement of basis pixel i."""
    basis = np.eye(n)  # (n, n): row i the basis picture e_i, one axis of length n
    if kind == "bilinear_pil":
        cols = [np.asarray(Image.fromarray(b[:, None].astype(np.float32), mode="F")
                           .resize((1, n * k), Image.Resampling.BILINEAR), np.float64)[:, 0] for b in basis]
        return np.stack(cols, axis=1)
    mode, align = {"nearest": ("nearest", None), "bilinear_align_corners": ("bilinear", True)}[kind]
    t = torch.from_numpy(basis)[:, None, :, None]  # (n, 1, n, 1): each basis picture as an n x 1 image
    big = torch.nn.functional.interpolate(t, size=(n * k, 1), mode=mode, align_corners=align)  # (n, 1, nk, 1)
    return big[:, 0, :, 0].T.numpy()  # (nk, n)


@functools.lru_cache(maxsize=64)
def pseudo_inverse(n: int, k: int, kind: str) -> np.ndarray:
    """(n, n * k): the least-squares inverse of ``enlarge_matrix``."""
    return np.linalg.pinv(enlarge_matrix(n, k, kind))


def factor(big: tuple[int, int], small: tuple[int, int]) -> int | None:
    """The integer k >= 2 with big = k * small on both sides, else None."""
    (bh, bw), (h, w) = big, small
    k = bh // h
    return k if k >= 2 and bh == k * h and bw == k * w else None


def unenlarge(y: torch.Tensor, size: tuple[int, int]) -> tuple[torch.Tensor, str] | None:
    """The (C, H, W) picture that ``y`` (C, kH, kW) in [0, 1] was enlarged from, with the candidate that
    explains it (CANDIDATES), or None when y is not k times ``size`` or no enlargement explains it."""
    found = best_enlargement(y, size)
    if found is None or found[0] > THRESHOLD:
        return None
    return torch.from_numpy(found[1]).to(y.dtype), found[2]


def best_enlargement(y: torch.Tensor, size: tuple[int, int]) -> tuple[float, np.ndarray, str] | None:
    """(relative residual, x (C, H, W) float64, candidate) of the candidate that explains ``y`` best; None
    when y is not an integer multiple k >= 2 of ``size``."""
    k = factor(tuple(y.shape[-2:]), size)
    if k is None:
        return None
    (h, w), big = size, y.detach().cpu().to(torch.float64).numpy()  # (C, kH, kW)
    scale = max(float(np.linalg.norm(big - big.mean(axis=(-2, -1), keepdims=True))), 1e-12)
    best = None
    for kind in CANDIDATES:
        x = np.clip(pseudo_inverse(h, k, kind) @ big @ pseudo_inverse(w, k, kind).T, 0.0, 1.0)  # (C, H, W)
        residual = np.linalg.norm(enlarge_matrix(h, k, kind) @ x @ enlarge_matrix(w, k, kind).T - big) / scale
        if best is None or residual < best[0]:
            best = (float(residual), x, kind)
    return best
