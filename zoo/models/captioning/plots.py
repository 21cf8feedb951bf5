"""Attention overlays: one row per image, the image and then one panel per generated word with
the attention used for that word drawn over it (soft: the weights; hard: the chosen cell)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from .images import IMAGENET_MEAN, IMAGENET_STD


def displayable(images: Tensor, normalize: str) -> Tensor:
    """Undo the datamodule's normalisation: (N, 3, H, W) -> [0, 1]."""
    if normalize == "imagenet":
        mean = torch.tensor(IMAGENET_MEAN, device=images.device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=images.device).view(1, 3, 1, 1)
        images = images * std + mean
    return images.clamp(0, 1)


def attention_figure(images: Tensor, captions: list[list[str]], weights: Tensor, grid: tuple[int, int],
                     max_words: int = 16, titles: list[str] | None = None):
    """images (N, 3, H, W) in [0, 1]; captions: words per image; weights (N, T, L) per word."""

    n = len(captions)
    cols = 1 + min(max_words, max((len(c) for c in captions), default=0))
    fig = Figure(figsize=(1.6 * cols, 1.8 * n))
    axes = fig.subplots(n, cols, squeeze=False)
    H, W = images.shape[-2:]
    for r in range(n):
        img = images[r].detach().float().cpu().permute(1, 2, 0).numpy()
        axes[r, 0].imshow(img)
        axes[r, 0].set_title(titles[r] if titles else "image", fontsize=7)
        for j in range(1, cols):
            ax = axes[r, j]
            if j - 1 < len(captions[r]):
                att = weights[r, j - 1].detach().float().cpu().view(1, 1, *grid)
                up = F.interpolate(att / att.max().clamp_min(1e-12), size=(H, W), mode="bilinear",
                                   align_corners=False)[0, 0].numpy()
                ax.imshow(img)
                ax.imshow(up, cmap="magma", alpha=0.6, vmin=0, vmax=1)
                ax.set_title(captions[r][j - 1], fontsize=9)
        for ax in axes[r]:
            ax.axis("off")
    fig.tight_layout()
    return fig
