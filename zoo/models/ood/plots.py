"""Figures of the OOD model (matplotlib); reading image files is ``model.preprocess`` (predict.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor
from torchmetrics.functional.classification import binary_roc

from zoo.models.ood.detect import calibration, reliability_bins, roc_inputs

COLOURS = {"msp": "C0", "odin": "C1", "energy": "C2", "mahalanobis": "C3"}


def upscale(images: Tensor, size: int = 32) -> Tensor:
    """Small images (N, C, H, W) -> nearest-neighbour enlarged, for readable grids."""
    return F.interpolate(images.float(), size=(size, size), mode="nearest") if images.shape[-1] < size else images


def roc_curves(scores_in: dict[str, Tensor], scores_out: dict[str, dict[str, Tensor]], columns: int | None = None):
    """One panel per OOD set, one ROC curve per detector (in-distribution = positive); ``columns`` panels a row
    (default: all in one row)."""
    columns = columns or len(scores_out)
    rows = -(-len(scores_out) // columns)
    fig = Figure(figsize=(3.2 * columns, 3.2 * rows))
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax in axes.flat[len(scores_out):]:
        ax.set_visible(False)
    for ax, (name, dets) in zip(axes.flat, scores_out.items()):
        for det, s_out in dets.items():
            fpr, tpr, _ = binary_roc(*roc_inputs(scores_in[det], s_out))  # on ranks: no sigmoid squashing
            ax.plot(fpr.cpu(), tpr.cpu(), label=det, color=COLOURS.get(det))
        ax.plot([0, 1], [0, 1], ":", color="grey")
        ax.axhline(0.95, ls="--", lw=0.6, color="grey")
        ax.set_title(f"in vs {name}")
        ax.set_xlabel("FPR (OOD accepted)")
    for row in axes:
        row[0].set_ylabel("TPR (in-distribution accepted)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def score_histograms(msp_in: Tensor, msp_out: dict[str, Tensor]):
    """Max-softmax scores, in-distribution vs each OOD set."""
    fig = Figure(figsize=(3.2 * len(msp_out), 2.8))
    axes = fig.subplots(1, len(msp_out), squeeze=False)
    bins = torch.linspace(0, 1, 26).tolist()
    for ax, (name, s) in zip(axes[0], msp_out.items()):
        ax.hist(msp_in.cpu().numpy(), bins=bins, alpha=0.6, density=True, label="in")
        ax.hist(s.cpu().numpy(), bins=bins, alpha=0.6, density=True, label=name)
        ax.set_xlabel("max softmax")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def reliability(logits: Tensor, labels: Tensor, temperature: float, n_bins: int = 15):
    """Reliability diagram before and after temperature scaling."""
    fig = Figure(figsize=(6.4, 3.2))
    axes = fig.subplots(1, 2, sharey=True)
    width = 1.0 / n_bins
    centres = (torch.arange(n_bins) + 0.5) * width
    for ax, T, title in zip(axes, (1.0, temperature), ("before", f"after (T = {temperature:.2f})")):
        conf, acc, count = reliability_bins((logits / T).softmax(-1), labels, n_bins)
        keep = (count > 0).cpu()
        ax.bar(centres[keep], acc.cpu()[keep], width=width, edgecolor="k", alpha=0.7, label="accuracy")
        ax.plot([0, 1], [0, 1], "--", color="grey")
        ece = calibration(logits, labels, T, n_bins)["ece"]
        ax.set_title(f"{title}: ECE {100 * ece:.2f} %", fontsize=9)
        ax.set_xlabel("confidence")
    axes[0].set_ylabel("accuracy")
    fig.tight_layout()
    return fig


@torch.no_grad()
def confidence_map(classifier, points: tuple[Tensor, Tensor] | None, fake: Tensor | None, mode: str, lim: float = 6.0):
    """The classifier's max-softmax over the plane, the training points and G's samples on it."""
    weight = next(classifier.parameters())
    axis = torch.linspace(-lim, lim, 121, device=weight.device, dtype=weight.dtype)
    gx, gy = torch.meshgrid(axis, axis, indexing="xy")
    grid = torch.stack([gx.flatten(), gy.flatten()], 1)  # (121 * 121, 2)
    conf = classifier(grid).softmax(-1).max(-1).values.view(121, 121).cpu()
    fig = Figure(figsize=(4.6, 4))
    ax = fig.subplots()
    im = ax.imshow(conf, extent=(-lim, lim, -lim, lim), origin="lower", cmap="viridis", vmin=0.5, vmax=1)
    fig.colorbar(im, ax=ax, label="max softmax")
    if points is not None:
        x, y = points
        ax.scatter(x[:, 0].cpu(), x[:, 1].cpu(), c=y.cpu(), s=2, cmap="coolwarm", alpha=0.5)
    if fake is not None:
        ax.scatter(fake[:, 0].cpu(), fake[:, 1].cpu(), marker="x", s=14, color="black", label="G(z)")
        ax.legend(loc="upper right", fontsize=7)
    ax.set_title(f"confidence, mode={mode}")
    return fig


def scored_examples(images: dict[str, Tensor], scores: dict[str, Tensor], threshold: float, n: int = 8):
    """A row per set of its first ``n`` images (N, 1, H, W) in [0, 1], each titled with its max-softmax score:
    green where the score accepts it as in-distribution (>= threshold), red where it rejects it."""
    fig = Figure(figsize=(0.9 * n + 1.2, 1.0 * len(images)))
    axes = fig.subplots(len(images), n, squeeze=False)
    for row, (name, x) in zip(axes, images.items()):
        for ax, image, score in zip(row, x[:n], scores[name][:n].tolist()):
            ax.imshow(image[0].float().cpu(), cmap="gray", vmin=0, vmax=1)
            ax.set_title(f"{score:.2f}", fontsize=8, color="C2" if score >= threshold else "C3")
            ax.set_xticks([])
            ax.set_yticks([])
        row[0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=9)
    fig.tight_layout()
    return fig
