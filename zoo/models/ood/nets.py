"""Plain nn.Modules of the OOD model: classifiers, generators and discriminators.

Inputs are images (C, H, W) with values in [0, 1], or points (D,) for the 2-D toy. Classifiers
normalise their input themselves (per-channel mean/std buffers), so generators, discriminators and
ODIN's input perturbation all work in the data's own [0, 1] units.

- classifier ``mlp`` (points, tiny images), ``cnn`` (a small conv net for 8x8 / 28x28),
  ``vgg13`` (the paper's VGG-13 with batch norm; pooling stops at 1x1, so it takes any size);
- generator / discriminator ``mlp`` or ``dcgan`` (Radford et al. 2016: transposed convolutions
  with batch norm / strided convolutions with leaky ReLU; the generator grows 4x4 to the next
  power of two >= the image side and crops the centre, so 28x28 and 32x32 both work).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

VGG13 = [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


class Normalize(nn.Module):
    """(x - mean) / std per channel (images) or per coordinate (points), as buffers."""

    def __init__(self, mean: list[float], std: list[float], ndim: int):
        super().__init__()
        shape = (1, -1) + (1,) * (ndim - 1)  # (1, C, 1, 1) for images, (1, D) for points
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(shape))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(shape))

    def forward(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std


class Classifier(nn.Module):
    """``features`` (B, F) then a linear head to logits (B, K); ``embed`` exposes the features
    (the Mahalanobis detector fits Gaussians on them)."""

    def __init__(self, arch: str, input_shape: list[int], num_classes: int, width: int,
                 mean: list[float], std: list[float], dropout: float = 0.0):
        super().__init__()
        self.norm = Normalize(mean, std, len(input_shape))
        if arch == "mlp":
            d = math.prod(input_shape)
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(d, width), nn.ReLU(), nn.Dropout(dropout),
                                      nn.Linear(width, width), nn.ReLU(), nn.Dropout(dropout))
            feat = width
        elif arch == "cnn":
            c, w = input_shape[0], width
            self.body = nn.Sequential(
                nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
                nn.Conv2d(w, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout))
            feat = 2 * w
        elif arch == "vgg13":
            layers, c, side = [], input_shape[0], min(input_shape[1:])
            scale = width / 64  # width=64 is the paper's VGG-13
            for v in VGG13:
                if v == "M":
                    if side > 1:  # small inputs: stop pooling at 1x1
                        layers.append(nn.MaxPool2d(2))
                        side //= 2
                    continue
                v = max(8, int(v * scale))
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                c = v
            self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout))
            feat = c
        else:
            raise ValueError(f"unknown classifier arch {arch}")
        self.head = nn.Linear(feat, num_classes)

    def embed(self, x: Tensor) -> Tensor:
        return self.body(self.norm(x))  # (B, F)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.embed(x))  # (B, K)


def _pow2_at_least(n: int) -> int:
    return 1 << max(2, math.ceil(math.log2(n)))


class Generator(nn.Module):
    """z (B, Z) -> a sample in the data space with values in [0, 1] (images) or R^D (points)."""

    def __init__(self, arch: str, output_shape: list[int], noise_dim: int, width: int, bounded: bool):
        super().__init__()
        self.output_shape = list(output_shape)
        squash = nn.Sigmoid() if bounded else nn.Identity()
        if arch == "mlp":
            d = math.prod(output_shape)
            self.net = nn.Sequential(nn.Linear(noise_dim, width), nn.BatchNorm1d(width), nn.ReLU(),
                                     nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(),
                                     nn.Linear(width, d), squash)
        elif arch == "dcgan":
            c, h, w = output_shape
            side = _pow2_at_least(max(h, w))
            n_up = int(math.log2(side)) - 2  # 4x4 -> side
            ch = width * 2 ** max(n_up - 1, 0)
            layers = [nn.Unflatten(1, (noise_dim, 1, 1)), nn.ConvTranspose2d(noise_dim, ch, 4, 1, 0, bias=False),
                      nn.BatchNorm2d(ch), nn.ReLU(True)]  # (B, ch, 4, 4)
            for i in range(n_up):
                last = i == n_up - 1
                out = c if last else max(width, ch // 2)
                layers.append(nn.ConvTranspose2d(ch, out, 4, 2, 1, bias=last))
                layers += [squash] if last else [nn.BatchNorm2d(out), nn.ReLU(True)]
                ch = out
            if n_up == 0:
                layers += [nn.Conv2d(ch, c, 1), squash]
            self.net = nn.Sequential(*layers)
            self.crop = ((side - h) // 2, (side - w) // 2)
        else:
            raise ValueError(f"unknown generator arch {arch}")
        self.arch = arch

    def forward(self, z: Tensor) -> Tensor:
        x = self.net(z)
        if self.arch == "dcgan":
            top, left = self.crop
            h, w = self.output_shape[1:]
            return x[:, :, top:top + h, left:left + w]  # (B, C, H, W)
        return x.view(len(z), *self.output_shape)


class Discriminator(nn.Module):
    """A sample -> one logit (B,): high for data, low for the generator's samples."""

    def __init__(self, arch: str, input_shape: list[int], width: int, spectral_norm: bool = False):
        super().__init__()
        if arch == "mlp":
            d = math.prod(input_shape)
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(d, width), nn.LeakyReLU(0.2),
                                     nn.Linear(width, width), nn.LeakyReLU(0.2), nn.Linear(width, 1))
        elif arch == "dcgan":
            c, h, _ = input_shape
            layers, ch, side, first = [], c, h, True
            while side > 4:
                out = width if first else ch * 2
                layers.append(nn.Conv2d(ch, out, 4, 2, 1, bias=first))
                layers += [nn.LeakyReLU(0.2, True)] if first else [nn.BatchNorm2d(out), nn.LeakyReLU(0.2, True)]
                ch, side, first = out, side // 2, False
            self.net = nn.Sequential(*layers, nn.Conv2d(ch, 1, side, 1, 0), nn.Flatten())
        else:
            raise ValueError(f"unknown discriminator arch {arch}")
        if spectral_norm:  # each weight divided by its largest singular value: D is 1-Lipschitz per layer
            for m in self.net.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    nn.utils.parametrizations.spectral_norm(m)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).view(-1)  # (B,)
