"""What the VAEs measure (a mixin of ``LatentVAE``): on validation and test the negative ELBO per image
(``loss``) and its two terms (``rec``, ``kl``) from exact posterior draws, and the importance-weighted bound
``iwae_nll`` (Burda et al. 2016, "Importance Weighted Autoencoders") with ``iwae_samples`` draws (test) or
``val_iwae_samples`` (validation, 0: not computed), all in nats per image; the draws come from a generator
seeded by ``eval_seed`` and the batch, so the numbers repeat and training's random stream is left as it was.
Pictures (samples, reconstructions, a latent traversal) at the end of a validation every
``plot_every_n_epochs`` and of the test."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.distributions import Distribution

from zoo.models.vae import plots


class VAEEvaluation:
    """Validation and test of a ``LatentVAE``: it supplies ``posterior``, ``draw``, ``decode``, ``log_lik``,
    ``log_ratio``, ``kl`` and ``traversal``."""

    def iwae_nll(self, x: Tensor, q: Distribution, k: int, chunk: int = 50) -> Tensor:
        """-log (1/k) sum_i p(x, z_i) / q(z_i|x), z_i ~ q: (B,). Exact draws, never relaxed ones."""
        log_w = []
        for start in range(0, k, chunk):
            z = self.draw(q, min(chunk, k - start))  # (m, B, *latent)
            log_w.append(self.log_lik(x, self.decode(z)) + self.log_ratio(q, z))  # (m, B)
        return -(torch.logsumexp(torch.cat(log_w), 0) - math.log(k))

    def eval_terms(self, x: Tensor) -> tuple[Tensor, Tensor, Distribution]:
        """Exact-sample ELBO terms: (reconstruction (B,), KL (B,), q)."""
        q = self.posterior(x)
        rec = -self.log_lik(x, self.decode(self.draw(q, 1)))[0]
        return rec, self.kl(q), q

    def _seeded(self, batch_idx: int, offset: int):
        """Fork the RNG so evaluation draws depend only on (eval_seed, batch): reproducible metrics
        that leave the training RNG untouched."""
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        ctx = torch.random.fork_rng(devices=devices)
        ctx.__enter__()
        torch.manual_seed(self.cfg.eval_seed * 1_000_003 + offset + batch_idx)
        return ctx

    def _eval_step(self, batch: Any, batch_idx: int, split: str) -> None:
        x = batch[0]
        ctx = self._seeded(batch_idx, 0 if split == "val" else 500_000)
        try:
            rec, kl, q = self.eval_terms(x)
            B = x.shape[0]
            metrics = {f"{split}/loss": (rec + kl).mean(), f"{split}/rec": rec.mean(),
                       f"{split}/kl": kl.mean()}
            self.log_dict(metrics, batch_size=B, prog_bar=(split == "val"), sync_dist=True)
            k = self.cfg.iwae_samples if split == "test" else self.cfg.val_iwae_samples
            if k > 0:
                self.log(f"{split}/iwae_nll", self.iwae_nll(x, q, k).mean(), batch_size=B, sync_dist=True)
            self.eval_extra(split, x, q)
        finally:
            ctx.__exit__(None, None, None)
        if batch_idx == 0:
            self._val_images = x[:32].detach()

    def eval_extra(self, split: str, x: Tensor, q: Distribution) -> None:
        """Subclass hook for more per-batch evaluation statistics."""

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "val")

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._eval_step(batch, batch_idx, "test")

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        last = self.trainer.max_epochs is not None and self.current_epoch + 1 >= self.trainer.max_epochs
        if (self.current_epoch + 1) % max(1, self.cfg.plot_every_n_epochs) == 0 or last:
            self.save_pictures()

    def on_test_epoch_end(self) -> None:
        self.save_pictures()

    # ---- pictures -------------------------------------------------------------------------------
    @torch.no_grad()
    def save_pictures(self) -> None:
        was_training = self.training
        self.eval()
        self.save_image("samples", plots.upscale(self.sample(64, seed=0).cpu()), nrow=8, padding=1, pad_value=0.5)
        if self._val_images is not None:
            x = self._val_images
            self.save_image("reconstructions", plots.upscale(plots.pairs(x.cpu(), self.reconstruct(x).cpu())),
                            nrow=8, padding=1, pad_value=0.5)
            images, ncol = self.traversal(x[:1])
            self.save_image("traversal", plots.upscale(images.cpu()), nrow=ncol, padding=1, pad_value=0.5)
        self.train(was_training)
