"""The GAN's curves in the joint modes (a mixin of ``OODClassifier``): why a seed's far-OOD rejection lands
where it does.

Every training step adds D's and G's losses, D's mean outputs and the two KL(U || p(y|G(z))) terms (G's step
and the classifier's) to epoch sums. Every validation the classifier and G (the averaged weights where the
``ema`` callback runs) are scored on fixed inputs, without touching the run's random stream:

- ``gan/msp_g``, ``gan/kl_g``: mean max-softmax and KL to the uniform on ``N_FIXED`` samples of G from a fixed z;
- ``gan/msp_<kind>``: mean max-softmax on OOD kinds made from the training digits (``made_ood``: pixel-permuted,
  blurred and inverted), never the test OOD kinds, and ``gan/msp_in`` on the validation digits;
- ``val/made_tnr95``: max-softmax TNR@TPR95 of those made kinds against the validation digits, averaged over
  the kinds: a validation criterion that uses no test OOD kind.

They are logged (``gan/...`` and ``val/made_tnr95``, one value an epoch) and drawn as ``plots/gan_curves.png``
whenever the model's pictures are written; ``plots/generated_over_training.png`` holds G's samples of the
same 16 z, one row every ``gan_grid_every_n_epochs`` epochs. The history behind both figures is kept in memory:
a resumed run draws them from the resume on (its logged values are in every part's metrics.csv).
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from zoo.models.ood import detect
from zoo.models.ood.losses import kl_uniform
from zoo.models.ood.plots import upscale

N_FIXED = 360  # samples of G scored each validation (as many as a validation OOD set of the digits)
N_MADE = 360  # training images each made OOD kind is built from
GRID_Z = 16  # samples of G per row of generated_over_training.png
DIAG_SEED = 1234  # the fixed z and the permutations: their own generator, not the run's stream
EPOCH_SUMS = ("d_loss", "g_loss", "g_kl", "kl_out", "d_real", "d_fake")  # training-step values averaged an epoch


def made_ood(x: Tensor, seed: int = DIAG_SEED) -> dict[str, Tensor]:
    """OOD kinds made from in-distribution images (N, C, H, W) in [0, 1]: ``permuted`` (each image's pixels in a
    random order of their own: the same intensities, no strokes), ``blurred`` (a 3 x 3 box filter: the
    strokes smeared) and ``inverted`` (1 - x: dark strokes on a bright ground, the brightness of noise).
    Each (N, C, H, W), on x's device and dtype."""
    g = torch.Generator().manual_seed(seed)  # cpu: the same permutations on every device, then moved
    flat = x.flatten(1)  # (N, C*H*W)
    order = torch.stack([torch.randperm(flat.shape[1], generator=g)  # cpu: drawn by g, moved below
                         for _ in range(len(x))]).to(x.device)
    permuted = flat.gather(1, order).view_as(x)
    blurred = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    return {"permuted": permuted, "blurred": blurred, "inverted": 1 - x}


def fixed_noise(n: int, dim: int, like: Tensor) -> Tensor:
    """(n, dim) N(0, I) draws from a generator of their own (the run's random stream is left as it is)."""
    z = torch.randn(n, dim, generator=torch.Generator().manual_seed(DIAG_SEED))  # cpu: the same z on every device
    return z.to(like.device, like.dtype)


class GANDiagnostics:
    """Needs ``self.classifier``, ``self.generator``, ``self.cfg``, ``self.input_shape`` and the ZooModule helpers."""

    def init_diagnostics(self) -> None:
        self._epoch_sums: dict[str, list] = defaultdict(list)  # name -> the epoch's step values (0-d tensors, floats)
        self._history: list[dict[str, float]] = []  # one row per validated epoch: the figure's points
        self._grid_rows: list[Tensor] = []  # (GRID_Z, C, H, W) each: G's samples of the fixed z over training
        self._made: dict[str, Tensor] | None = None  # made_ood of the first training images, built once

    def diagnostics_state(self) -> dict[str, list[float]]:
        """The epoch's step values so far, for the checkpoint: a run resumed mid-epoch logs the whole epoch's means."""
        return {k: [float(v) for v in vs] for k, vs in self._epoch_sums.items()}

    def load_diagnostics_state(self, state: dict[str, list[float]]) -> None:
        self._epoch_sums = defaultdict(list, {k: list(vs) for k, vs in state.items()})

    def add_step(self, values: dict[str, Tensor]) -> None:
        for k, v in values.items():
            self._epoch_sums[k].append(v.detach())

    def _made_kinds(self) -> dict[str, Tensor] | None:
        if self._made is None:
            dm = self.attached_datamodule()
            train = getattr(dm, "train_set", None)
            if train is None or len(self.input_shape) != 3:
                return None
            x = torch.stack([train[i][0] for i in range(min(N_MADE, len(train)))])
            self._made = made_ood(x)
        return {k: v.to(self.device, self.dtype) for k, v in self._made.items()}

    @torch.no_grad()
    def diagnose(self, msp_in: Tensor) -> None:
        """Log the epoch's GAN curves (module docstring); ``msp_in``: max-softmax of the validation digits (N,)."""
        row: dict[str, float] = {"epoch": float(self.current_epoch + 1)}
        for k in EPOCH_SUMS:
            if self._epoch_sums.get(k):  # in float64 on the host: the same sum whether or not a resume split the epoch
                row[k] = sum(float(v) for v in self._epoch_sums[k]) / len(self._epoch_sums[k])
        self._epoch_sums = defaultdict(list)
        z = fixed_noise(N_FIXED, self.cfg.noise_dim, next(self.generator.parameters()))
        logits_g = self.classifier(self.generator(z))  # (N_FIXED, K)
        row["msp_g"] = float(detect.msp_score(logits_g).mean())
        row["kl_g"] = float(kl_uniform(logits_g).mean())
        row["msp_in"] = float(msp_in.mean())
        made = self._made_kinds() or {}
        tnrs = []
        for kind, x in made.items():
            msp = detect.msp_score(self.classifier(x))
            row[f"msp_{kind}"] = float(msp.mean())
            tnrs.append(detect.detection_metrics(msp_in, msp)["tnr95"])
        metrics = {f"gan/{k}": v for k, v in row.items() if k != "epoch"}
        if tnrs:
            row["made_tnr95"] = sum(tnrs) / len(tnrs)
            metrics["val/made_tnr95"] = row["made_tnr95"]
        self.log_dict(metrics, add_dataloader_idx=False, sync_dist=True)
        self._history.append(row)
        if len(self.input_shape) == 3 and self.current_epoch % max(1, self.cfg.gan_grid_every_n_epochs) == 0:
            self._grid_rows.append(self.generator(z[:GRID_Z]).float().cpu())

    def save_diagnostics(self) -> None:
        """plots/gan_curves.png and plots/generated_over_training.png from the history so far."""
        if self._history:
            self.save_figure("gan_curves", gan_curves_figure(self._history))
        if self._grid_rows:
            rows = upscale(torch.cat(self._grid_rows))  # (rows * GRID_Z, C, 32, 32): torchvision's make_grid
            self.save_image("generated_over_training", rows, nrow=GRID_Z, padding=1, pad_value=0.5)


PANELS = (("D and G losses (training epoch means)", ("d_loss", "g_loss")),
          ("D's mean output", ("d_real", "d_fake")),
          ("KL(U || p(y|G(z)))", ("g_kl", "kl_out", "kl_g")),
          ("mean max-softmax", ("msp_in", "msp_g", "msp_permuted", "msp_blurred", "msp_inverted")),
          ("max-softmax TNR@TPR95, made OOD kinds", ("made_tnr95",)))
LABELS = {"g_kl": "G step", "kl_out": "classifier step", "kl_g": "fixed z (validation)", "msp_in": "validation digits",
          "msp_g": "G(fixed z)", "msp_permuted": "permuted digits", "msp_blurred": "blurred digits",
          "msp_inverted": "inverted digits"}


def gan_curves_figure(history: list[dict[str, float]]) -> Figure:
    """One panel per group of ``PANELS``, a line per quantity present, against the epoch."""
    panels = [(title, [k for k in keys if any(k in r for r in history)]) for title, keys in PANELS]
    panels = [(t, keys) for t, keys in panels if keys]
    fig = Figure(figsize=(3.6 * len(panels), 3.0))
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, keys) in zip(axes, panels):
        for k in keys:
            points = [(r["epoch"], r[k]) for r in history if k in r]
            ax.plot(*zip(*points), label=LABELS.get(k, k), marker="o" if len(points) < 30 else None, markersize=3)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.subplots_adjust(wspace=0.3)
    return fig
