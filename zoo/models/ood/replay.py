"""A replay of G's past samples for the joint mode's classifier step (``model.replay_size``).

The history buffer of "Learning from Simulated and Unsupervised Images through Adversarial Training"
(Shrivastava et al., CVPR 2017), used for the classifier's KL(U || p(y|x)) term rather than for D: a
fixed number of G's samples kept by reservoir sampling over the whole of training (each sample G has made
so far is in the buffer with the same probability, so the noise-like samples of the first epochs stay in
it), and a share ``fraction`` of every classifier batch of G's samples replaced by samples drawn from it
(with ``model.replay_d``, of D's batch too).

The buffer is state of the run, not a weight: it is not in the state dict (the EMA callback would average
it), it is saved in the checkpoint by the model (``state()`` / ``load()``) and follows the device and
dtype of the samples it is given.
"""

from __future__ import annotations

import torch
from torch import Tensor


class Replay:
    """Reservoir of at most ``size`` samples (size, *shape) of G; draws use the run's random stream."""

    def __init__(self, size: int, fraction: float):
        self.size, self.fraction = size, fraction
        self.images: Tensor | None = None  # (min(seen, size), *shape): the reservoir so far
        self.seen = 0  # samples offered so far

    def mix(self, fresh: Tensor) -> Tensor:
        """``fresh`` (B, *shape) with its first share replaced by past samples (``replace``); then ``fresh``
        is offered to the reservoir."""
        out = self.replace(fresh)
        self.offer(fresh)
        return out

    def replace(self, fresh: Tensor) -> Tensor:
        """``fresh`` (B, *shape) with its first round(fraction * B) rows replaced by past samples drawn
        uniformly from the reservoir (none while it is empty); the reservoir is unchanged."""
        k = round(self.fraction * len(fresh))
        if self.images is None or k == 0:
            return fresh
        past = self.images.to(fresh.device, fresh.dtype)
        pick = torch.randint(len(past), (k,), device=fresh.device)
        return torch.cat([past[pick], fresh[k:]])

    def offer(self, fresh: Tensor) -> None:
        """Reservoir sampling (Vitter's algorithm R): the n-th sample offered (from 0) fills slot n while
        n < size, else replaces a uniform slot j in [0, n] when j < size."""
        fresh = fresh.detach()
        if self.images is None:
            self.images = fresh.new_empty((0, *fresh.shape[1:]))
        self.images = self.images.to(fresh.device, fresh.dtype)
        room = min(self.size - len(self.images), len(fresh))
        if room > 0:
            self.images = torch.cat([self.images, fresh[:room]])
        rest = fresh[room:]
        if len(rest):
            n = self.seen + room + torch.arange(len(rest), device=fresh.device)  # (R,) each one's index
            slot = (torch.rand(len(rest), device=fresh.device) * (n + 1)).long().clamp(max=n)  # in [0, n]
            for i, j in enumerate(slot.tolist()):  # in order: a later sample wins a slot drawn twice
                if j < self.size:
                    self.images[j] = rest[i]
        self.seen += len(fresh)

    def state(self) -> dict:
        return {"images": None if self.images is None else self.images.cpu(), "seen": self.seen}

    def load(self, state: dict) -> None:
        self.images, self.seen = state["images"], int(state["seen"])
