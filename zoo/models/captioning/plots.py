"""Attention overlays: one row per image, the image and then one panel per generated word with
the attention used for that word drawn over it (soft: the weights; hard: the chosen cell)."""

from __future__ import annotations

import matplotlib
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor
from torchvision.utils import make_grid

from .images import IMAGENET_MEAN, IMAGENET_STD


def displayable(images: Tensor, normalize: str) -> Tensor:
    """Undo the datamodule's normalisation: (N, 3, H, W) -> [0, 1]."""
    if normalize == "imagenet":
        mean = torch.tensor(IMAGENET_MEAN, device=images.device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=images.device).view(1, 3, 1, 1)
        images = images * std + mean
    return images.clamp(0, 1)


def overlays(image: Tensor, weights: Tensor, grid: tuple[int, int], alpha: float = 0.6) -> Tensor:
    """image (3, H, W) in [0, 1], weights (K, L) -> (K, 3, H, W): each word's attention, scaled to
    its maximum and upsampled, in the magma colour map over the image."""
    H, W = image.shape[-2:]
    att = weights.detach().float().cpu().view(-1, 1, *grid)  # (K, 1, gh, gw)
    att = att / att.flatten(1).amax(1).clamp_min(1e-12).view(-1, 1, 1, 1)
    up = F.interpolate(att, size=(H, W), mode="bilinear", align_corners=False)[:, 0]  # (K, H, W)
    colours = matplotlib.colormaps["magma"](up.clamp(0, 1).numpy())[..., :3]  # (K, H, W, 3)
    colours = torch.from_numpy(colours).float().permute(0, 3, 1, 2)
    return (1 - alpha) * image.detach().float().cpu() + alpha * colours


def attention_figure(images: Tensor, captions: list[list[str]], weights: Tensor, grid: tuple[int, int],
                     max_words: int = 16, titles: list[str] | None = None):
    """images (N, 3, H, W) in [0, 1]; captions: words per image; weights (N, T, L) per word.

    Each row is one picture (the image, then its overlays side by side: torchvision's grid), so
    a figure is N axes rather than N x (1 + words): many small axes take seconds to lay out and
    save, and the figure is drawn at every validation epoch."""
    n = len(captions)
    cols = 1 + min(max_words, max((len(c) for c in captions), default=0))
    H, W = images.shape[-2:]
    gap = max(1, W // 16)
    fig = Figure(figsize=(1.6 * cols, 1.8 * n))
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for r in range(n):
        words = captions[r][:cols - 1]
        panels = torch.ones(cols, 3, H, W)  # no word: a white panel
        panels[0] = images[r].detach().float().cpu()
        if words:
            panels[1:1 + len(words)] = overlays(panels[0], weights[r, :len(words)], grid)
        row = make_grid(panels, nrow=cols, padding=gap, pad_value=1.0)  # (3, H + 2 gap, cols (W + gap) + gap)
        axes[r].imshow(row.permute(1, 2, 0).numpy(), interpolation="nearest")
        axes[r].axis("off")
        labels = [titles[r] if titles else "image", *words]
        for j, label in enumerate(labels):
            axes[r].text(gap + j * (W + gap) + W / 2, gap - H * 0.02, label, ha="center", va="bottom",
                         fontsize=7 if j == 0 else 9)
    fig.tight_layout()
    return fig
