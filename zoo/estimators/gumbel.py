"""Gumbel sampling utilities (Xu's softmax lecture notes: "Gumbel-max trick", "Gumbel top-k", "truncated Gumbel").

- Gumbel-max: argmax_i (phi_i + G_i), G_i iid Gumbel(0), is a sample of Categorical(softmax(phi)).
- Gumbel-top-k: the k largest of phi_i + G_i are an ordered sample of k *without replacement*
  (each next one drawn from the remaining categories with renormalised probabilities).
- Truncated Gumbel: G ~ Gumbel(phi) conditioned on G <= T, by the inverse CDF
  G = phi - log(exp(phi - T) - log U), written as -logaddexp(-T, log E - phi) with E ~ Exp(1),
  which never takes the log of a difference and so never loses precision.
- ``gumbel_with_maximum``: Gumbels whose maximum is exactly T (the stochastic-beam-search step).

All samplers take an optional ``torch.Generator`` for reproducibility.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sample_exponential(like: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Exp(1) noise shaped like ``like``, kept away from 0 so its log is finite."""
    e = torch.empty_like(like, dtype=like.dtype if like.is_floating_point() else torch.float32)
    e.exponential_(generator=generator)
    return e.clamp_min(torch.finfo(e.dtype).tiny)


def sample_gumbel(like: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Standard Gumbel(0) noise shaped like ``like``: G = -log(E), E ~ Exp(1) (= -log(-log U))."""
    return -sample_exponential(like, generator).log()


def gumbel_max_sample(
    logits: Tensor, n: int | None = None, generator: torch.Generator | None = None
) -> Tensor:
    """Categorical sample(s) over the last dim by the Gumbel-max trick: (*B) or (n, *B) if n."""
    phi = logits if n is None else logits.expand(n, *logits.shape)
    return (phi + sample_gumbel(phi, generator)).argmax(-1)


def gumbel_topk(
    logits: Tensor, k: int, dim: int = -1, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """k categories without replacement (Gumbel-top-k trick).

    Returns (indices, keys), both (*B, k) along ``dim``, sorted by key descending: indices[..., 0]
    is a Categorical sample, indices[..., 1] a sample from the rest renormalised, and so on. keys are
    the perturbed log-probs phi_i + G_i (useful for unordered-set / priority-sampling estimators).
    """
    if k > logits.shape[dim]:
        raise ValueError(f"gumbel_topk: k={k} exceeds the number of categories {logits.shape[dim]}")
    phi = torch.log_softmax(logits, dim=dim)
    keys, idx = (phi + sample_gumbel(phi, generator)).topk(k, dim=dim)
    return idx, keys


def truncated_gumbel(phi: Tensor, T: Tensor | float, generator: torch.Generator | None = None,
                     exponential: Tensor | None = None) -> Tensor:
    """G ~ Gumbel(phi) conditioned on G <= T (elementwise; T broadcasts against phi).

    Inverse CDF of F(g) = exp(exp(phi - T) - exp(phi - g)):  G = phi - log(exp(phi - T) + E),
    E = -log U ~ Exp(1); rewritten as -logaddexp(-T, log E - phi) for numerical stability.
    ``exponential``: E drawn beforehand (``sample_exponential``), so that G can be recomputed from
    other phi (RELAX differentiates it); None draws it here.
    """
    T = torch.as_tensor(T, dtype=phi.dtype, device=phi.device)
    e = sample_exponential(torch.broadcast_tensors(phi, T)[0], generator) if exponential is None else exponential
    return -torch.logaddexp(-T, e.log() - phi)


def shift_gumbel_maximum(g: Tensor, T: Tensor, dim: int = -1) -> Tensor:
    """Map Gumbels ``g`` (with max Z along ``dim``) to Gumbels with maximum exactly T, keeping argmax.

    g~ = -log(exp(-T) - exp(-Z) + exp(-g))   (Xu's softmax lecture notes, "re-scale G -> G~"), computed as
    g~ = T - softplus(v), v = T - g + log1p(-exp(g - Z))   (Kool et al. 2019, appendix B),
    so nothing overflows for large |T| and the argmax maps to T exactly. T: shape of g without dim.
    """
    Z = g.max(dim, keepdim=True).values
    T = T.unsqueeze(dim)
    v = T - g + torch.log1p(-torch.exp(g - Z))
    return T - F.relu(v) - torch.log1p(torch.exp(-v.abs()))


def gumbel_with_maximum(
    phi: Tensor, T: Tensor, dim: int = -1, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """Sample G_i ~ Gumbel(phi_i) conditioned on max_i G_i = T (along ``dim``).

    Returns (shifted Gumbels, argmax). The argmax is distributed as softmax(phi) independently
    of T ("max and argmax are independent").
    """
    g = phi + sample_gumbel(phi, generator)
    return shift_gumbel_maximum(g, T, dim), g.argmax(dim)
