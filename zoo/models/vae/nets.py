"""Encoder / decoder networks for the VAEs (plain nn.Modules, no Lightning).

Two families, chosen by ``arch``:
- ``mlp``: flatten -> 2 hidden layers -> output (the classic VAE / discrete-VAE benchmark nets);
- ``conv``: two stride-2 convolutions (H, W divisible by 4: 8x8 digits -> 2x2, 28x28 MNIST -> 7x7)
  and a hidden linear layer; the decoder mirrors it with transposed convolutions.
The encoder returns a flat vector that the model splits into its posterior's parameters; the
decoder returns per-pixel outputs (B, C, H, W) that the model turns into a likelihood.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from zoo.errors import UserError
from zoo.models.vae.config import ARCHS


class MLPEncoder(nn.Module):
    def __init__(self, image_shape: list[int], hidden: int, out_dim: int):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(math.prod(image_shape), hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, out_dim)
        return self.net(x)


class MLPDecoder(nn.Module):
    def __init__(self, image_shape: list[int], hidden: int, in_dim: int):
        super().__init__()
        self.image_shape = list(image_shape)
        self.net = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, math.prod(image_shape)),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:  # (B, in_dim) -> (B, C, H, W)
        return self.net(z).view(-1, *self.image_shape)


def _check_conv_shape(image_shape: list[int]) -> None:
    if image_shape[1] % 4 or image_shape[2] % 4:
        raise UserError(f"model.arch=conv needs image height and width divisible by 4, got {image_shape}; "
                        "use model.arch=mlp")


class ConvEncoder(nn.Module):
    def __init__(self, image_shape: list[int], hidden: int, out_dim: int, channels: int = 32):
        super().__init__()
        _check_conv_shape(image_shape)
        c, h, w = image_shape
        self.net = nn.Sequential(
            nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 4, stride=2, padding=1), nn.ReLU(),  # (B, 2c, H/2, W/2)
            nn.Conv2d(2 * channels, 2 * channels, 4, stride=2, padding=1), nn.ReLU(),  # (B, 2c, H/4, W/4)
            nn.Flatten(), nn.Linear(2 * channels * (h // 4) * (w // 4), hidden), nn.ReLU(),
            nn.Linear(hidden, out_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, out_dim)
        return self.net(x)


class ConvDecoder(nn.Module):
    def __init__(self, image_shape: list[int], hidden: int, in_dim: int, channels: int = 32):
        super().__init__()
        _check_conv_shape(image_shape)
        c, h, w = image_shape
        self.grid = (2 * channels, h // 4, w // 4)
        self.fc = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, math.prod(self.grid)),
                                nn.ReLU())
        self.net = nn.Sequential(
            # (B, 2c, H/4, W/4) -> (B, 2c, H/2, W/2)
            nn.ConvTranspose2d(2 * channels, 2 * channels, 4, stride=2, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(2 * channels, channels, 4, stride=2, padding=1), nn.ReLU(),  # (B, c, H, W)
            nn.Conv2d(channels, c, 3, padding=1),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:  # (B, in_dim) -> (B, C, H, W)
        return self.net(self.fc(z).view(-1, *self.grid))


def build_nets(arch: str, image_shape: list[int], hidden: int, channels: int, enc_out: int,
               dec_in: int) -> tuple[nn.Module, nn.Module]:
    """(encoder, decoder) for ``arch``: encoder (B, C, H, W) -> (B, enc_out); decoder (B, dec_in) -> x."""
    if arch == "mlp":
        return MLPEncoder(image_shape, hidden, enc_out), MLPDecoder(image_shape, hidden, dec_in)
    if arch == "conv":
        return (ConvEncoder(image_shape, hidden, enc_out, channels),
                ConvDecoder(image_shape, hidden, dec_in, channels))
    raise UserError(f"model.arch must be one of {', '.join(ARCHS)}, got '{arch}'")
