"""A 2-D PCA map of the most frequent words (coloured by planted group when known)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from zoo.models.skipgram.threads import torch_threads

# planted groups drawn in colour, one distinct colour each (tab10's, its grey replaced by black); the others grey
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#000000", "#bcbd22",
           "#17becf"]
COLOURED = len(COLOURS)


def embedding_map(vectors: torch.Tensor, words: list[str], groups: list[int] | None = None, n: int = 200):
    """Scatter of the first two principal components of the ``n`` most frequent words (ids are in
    frequency order), the 40 most frequent labelled. With ``groups`` (each word's planted group, -1 for a
    function word), the first COLOURED groups each have their own colour, named in the legend, the other
    groups are light grey and the function words grey crosses. With fewer than two components (``dim=1``, or a
    single word) the missing one is drawn as 0. Returns the matplotlib figure."""

    x = torch.nn.functional.normalize(vectors[:n].float(), dim=1)
    x = x - x.mean(0)
    vt = principal_axes(x)
    xy = (x @ vt[:2].T).cpu()  # (n, <= 2): one component when dim=1 or a single word
    if xy.shape[1] < 2:  # pad: a line of points (or one point) rather than an IndexError after training
        xy = torch.cat([xy, xy.new_zeros(len(xy), 2 - xy.shape[1])], 1)
    xy = xy.numpy()  # (n, 2)
    fig = Figure(figsize=(7, 6))
    ax = fig.subplots()
    if groups is None:
        ax.scatter(xy[:, 0], xy[:, 1], s=14)
    else:
        _group_scatter(ax, xy, groups[: len(xy)])
    for i in range(min(40, len(xy))):
        ax.annotate(words[i], xy[i], fontsize=7, alpha=0.8)
    ax.set_title(f"word vectors, PCA of the {len(xy)} most frequent words"
                 + (" (colour = planted group)" if groups else ""))
    return fig


def principal_axes(x: torch.Tensor) -> torch.Tensor:
    """(n, D) centred rows -> (min(n, D), D) their principal axes (deterministic PCA: the SVD's right singular
    vectors), on one intra-op thread (``threads.torch_threads``)."""
    with torch_threads(1):
        return torch.linalg.svd(x, full_matrices=False)[2]


def _group_scatter(ax, xy, groups: list[int]) -> None:
    """``xy`` (n, 2) drawn by planted group: groups 0..COLOURED-1 in COLOURS, the rest light grey, function
    words (group -1) grey crosses; a legend beside the axes."""
    g = np.asarray(groups)
    rest = g >= COLOURED
    if rest.any():
        ax.scatter(xy[rest, 0], xy[rest, 1], s=10, color="0.85", label=f"groups {COLOURED}+")
    for k in range(COLOURED):
        mine = g == k
        if mine.any():
            ax.scatter(xy[mine, 0], xy[mine, 1], s=22, color=COLOURS[k], label=f"group {k}")
    if (g < 0).any():
        ax.scatter(xy[g < 0, 0], xy[g < 0, 1], s=22, color="0.45", marker="x", label="function words")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
