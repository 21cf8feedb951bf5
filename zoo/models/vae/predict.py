"""The VAEs' inference API (a mixin of ``LatentVAE``) and ``python -m zoo.predict`` for them.

    model = zoo.load("vae-digits")
    images = model.sample(16, seed=0)            # (16, 1, 8, 8) E[x|z], z ~ p(z)
    x = model.preprocess(["a.png", "b.png"])     # files / PIL / numpy -> (2, 1, 8, 8) like the data
    model.reconstruct(x), model.encode(x)        # (2, 1, 8, 8); (2, D) posterior means (dVAE: (2, N, K) modes)
    model.log_likelihood(x, k=100)               # (2,) the importance-weighted bound on log p(x), nats

Everything runs without gradients and returns tensors on the model's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from zoo.core.inputs import check_count, check_seed, generator
from zoo.core.transforms import DIGITS_DATA, MNIST_DATA, ImageTransforms, card_transforms, transform_batch
from zoo.errors import no_access
from zoo.models.vae import plots
from zoo.paths import check_output_file, make_folder, writable
from zoo.schema import at_least, validate


class VAEAPI:
    """Needs the ``LatentVAE`` pieces: ``image_shape``, ``data_info``, ``posterior``, ``decode``, ``code``,
    ``prior_draw``, ``mean_image``, ``iwae_nll``."""

    def transforms(self) -> ImageTransforms:
        """The input transforms of the card (``zoo.transforms(name)``), or derived from the model's data for a
        checkpoint or an older card: grey, resized with a box filter, light ink on dark, binarised as the data."""
        found = card_transforms(self)
        if found is not None:
            return found
        info = self.data_info
        c, h, w = (int(s) for s in info["image_shape"])
        binarize = None if info.get("binarize", "static") == "none" else float(info.get("threshold", 0.5))
        made = {"digits": DIGITS_DATA, "mnist": MNIST_DATA}.get(info.get("dataset", ""), "")
        return ImageTransforms(size=(h, w), channels=c, resample="box", polarity="light_on_dark", invert="auto",
                               binarize=binarize, data=made)

    def preprocess(self, images: Any, invert: Any = None, strict: bool = False) -> Tensor:
        """Images as the model was trained on them: (B, C, H, W) on the model's device.

        ``images``: a tensor batch (B, C, H, W) (checked, moved), or one or a list of file paths, PIL images,
        numpy arrays or tensor images of any size, through ``transforms()``: greyscale, resized to (H, W) with
        a box filter, ink bright on dark (``invert``: auto = invert when the border is light, true, false;
        None: the card's default, auto), then binarised at the data's threshold (grey values are kept when
        the data were not binarised). ``strict``: refuse pictures of another size instead."""
        return transform_batch(self.transforms(), images, self.image_shape, self.device, self.dtype, invert, strict)

    def _images(self, x: Any) -> Tensor:
        return self.preprocess(x)  # a tensor is only checked and moved

    @torch.no_grad()
    def sample(self, n: int, seed: int | None = None, mean: bool = True) -> Tensor:
        """``n`` images from the model, z ~ p(z): E[x|z] in [0, 1] (``mean``), or x ~ p(x|z): (n, C, H, W).
        ``seed``: the same images on every device and run (None: drawn from torch's global RNG)."""
        check_count(n)
        g = generator(seed)  # cpu: the same draws everywhere; z is moved to the model
        img = self.mean_image(self.decode(self.prior_draw(n, g).to(self.device, self.dtype)))
        if not mean and self.cfg.likelihood == "bernoulli":
            img = torch.bernoulli(img.cpu(), generator=g).to(img)
        return img

    @torch.no_grad()
    def encode(self, x: Any) -> Tensor:
        """The posterior's point code of each image: its mean (Gaussian VAE, (B, D)) or its mode (discrete
        VAE, one-hots (B, N, K))."""
        return self.code(self.posterior(self._images(x)))

    @torch.no_grad()
    def reconstruct(self, x: Any) -> Tensor:
        """E[x|z] in [0, 1] at the posterior's point code (mean / mode) of each image: (B, C, H, W)."""
        return self.mean_image(self.decode(self.encode(x)))

    @torch.no_grad()
    def log_likelihood(self, x: Any, k: int = 100, seed: int | None = None) -> Tensor:
        """The importance-weighted bound (Burda et al. 2016) on log p(x) of each image with ``k`` samples of
        q(z|x), in nats: (B,). It is <= log p(x) and tightens as k grows (k = 1: the ELBO's estimate).
        ``seed``: reproducible draws (None: the global RNG)."""
        check_count(k, "k")
        x = self._images(x)
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(check_seed(seed))
            return -self.iwae_nll(x, self.posterior(x), k)


@dataclass
class PredictOptions:
    """``python -m zoo.predict vae-digits [images ...] key=value``."""

    n: int = at_least(64, 1)  # samples to draw (no inputs)
    out: str = ""  # the grid's file (default samples.png without inputs; none with inputs)
    seed: int = 0  # seed of the samples
    nrow: int = at_least(8, 1)  # images per row of the grid
    mean: bool = True  # E[x|z] (true) or a Bernoulli draw of the pixels (false)
    invert: str = "auto"  # input images: ink dark on light is inverted (auto: when the border is light), true,
    # false; a string checked by preprocess, as the Python API's invert=, since key=value parsing reads true as a bool


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    """No inputs: write a grid of ``n`` samples to ``out`` (samples.png). Image files (PNG/JPEG, any size):
    write each one's reconstruction as <name>_recon.png beside it, print its negative ELBO, and a grid of
    inputs/reconstructions to ``out`` when given."""
    from torchvision.utils import save_image  # imported when used: torchvision

    o = validate(PredictOptions, options, "VAE predict", what="option")
    n, seed, nrow = o["n"], o["seed"], o["nrow"]
    if o["out"] or not inputs:
        check_output_file(o["out"] or "samples.png", "out", inputs=inputs)
    mean = o["mean"]
    model.eval()
    if not inputs:
        out = Path(o["out"] or "samples.png")
        make_folder(out.parent)
        save_image(plots.upscale(model.sample(n, seed, mean).cpu()), out, nrow=nrow, padding=1, pad_value=0.5)
        print(f"wrote {n} samples to {out}")
        return
    invert = str(o["invert"])
    targets = [Path(p).with_name(Path(p).stem + "_recon.png") for p in inputs]  # beside each input
    for target in targets:  # before any is written
        if not writable(target):
            raise no_access(target, write=True, instead="copy the image into a folder you can write in")
    x = model.preprocess(inputs, invert)
    recon = model.reconstruct(x).cpu()
    torch.manual_seed(seed)
    with torch.no_grad():
        rec, kl, _ = model.eval_terms(x)
    for path, target, r, loss in zip(inputs, targets, recon, (rec + kl).tolist()):
        save_image(plots.upscale(r[None], 64), target)
        print(f"{path}: negative ELBO {loss:.2f} nats -> {target}")
    if o["out"]:
        grid = plots.upscale(plots.pairs(x.cpu(), recon, nrow))
        make_folder(Path(o["out"]).parent)
        save_image(grid, o["out"], nrow=nrow, padding=1, pad_value=0.5)
        print(f"wrote inputs (odd rows) and reconstructions (even rows) to {o['out']}")
