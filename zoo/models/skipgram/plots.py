"""A 2-D PCA map of the most frequent words (coloured by planted group when known)."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure


def embedding_map(vectors: torch.Tensor, words: list[str], groups: list[int] | None = None, n: int = 200):
    """Scatter of the first two principal components of the ``n`` most frequent words (ids are in
    frequency order), the 40 most frequent labelled. With fewer than two components (``dim=1``, or a
    single word) the missing one is drawn as 0. Returns the matplotlib figure."""

    x = torch.nn.functional.normalize(vectors[:n].float(), dim=1)
    x = x - x.mean(0)
    _, _, vt = torch.linalg.svd(x, full_matrices=False)  # deterministic PCA
    xy = (x @ vt[:2].T).cpu()  # (n, <= 2): one component when dim=1 or a single word
    if xy.shape[1] < 2:  # pad: a line of points (or one point) rather than an IndexError after training
        xy = torch.cat([xy, xy.new_zeros(len(xy), 2 - xy.shape[1])], 1)
    xy = xy.numpy()  # (n, 2)
    fig = Figure(figsize=(7, 6))
    ax = fig.subplots()
    colours = None if groups is None else [g if g >= 0 else -1 for g in groups[:n]]
    ax.scatter(xy[:, 0], xy[:, 1], c=colours, cmap="tab20" if colours else None, s=14)
    for i in range(min(40, len(xy))):
        ax.annotate(words[i], xy[i], fontsize=7, alpha=0.8)
    ax.set_title(f"word vectors, PCA of the {len(xy)} most frequent words"
                 + (" (colour = planted group)" if groups else ""))
    return fig
