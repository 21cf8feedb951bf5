"""The input transforms of an image model, as its card states them: one object a user reads and calls
(like torchvision's ``weights.transforms()``), and that the model's ``preprocess`` applies.

    tf = zoo.transforms("ood-digits-joint")   # or model.transforms()
    print(tf)                                 # size, channels, resampling, polarity, value range, ...
    x = tf("my_digit.jpg")                    # (1, 8, 8) float tensor, as the model was trained on
    x = tf(photo, invert="true")              # dark ink on light paper, turned into the data's polarity

A picture of any size, a file, a PIL image, a numpy array (uint8 0..255 or floats in [0, 1]) or a
tensor image (C, H, W) in [0, 1] goes through torchvision's v2 transforms: grey / RGB, resized to the
model's size with the filter that matches how its data were made (scikit-learn's digits count the set
pixels of 4x4 blocks of 32x32 bitmaps: a box filter), centre-cropped where the card says so, to floats,
inverted to the data's polarity (``auto``: decided from the border pixels), binarised or normalised
as the data were.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from zoo.core.inputs import image_batch, to_pil
from zoo.core.unenlarge import factor, unenlarge
from zoo.errors import UserError

RESAMPLING = ("box", "bilinear", "bicubic", "nearest", "lanczos", "hamming")  # PIL's filters (torchvision's names)
RESIZE = ("exact", "shorter_side")  # to (H, W) as it is; or shorter side to H then a centre crop (keeps the aspect)
POLARITY = ("light_on_dark", "dark_on_light", "none")  # "none": colour pictures, never inverted
INVERT = ("auto", "true", "false")
BORDER_LIGHT = 0.5  # auto: a picture whose border pixels average above this is light paper


@dataclass(frozen=True)
class ImageTransforms:
    """A picture -> the (C, H, W) float tensor the model was trained on. Stored in a card's ``transforms``."""

    size: tuple[int, int]  # (H, W) the model takes
    channels: int  # 1: greyscale, 3: RGB
    resample: str = "box"  # the filter resizing a picture of another size (RESAMPLING), as the data were made
    resize: str = "exact"  # RESIZE: "exact" to (H, W); "shorter_side" then a centre crop of (H, W)
    value_range: tuple[float, float] = (0.0, 1.0)  # pixel values before normalisation (0..255 scaled to it)
    polarity: str = "light_on_dark"  # the training pictures' ink on background (POLARITY)
    invert: str = "auto"  # the default of ``invert``: auto (from the border pixels), true, false
    binarize: float | None = None  # the data's threshold: a pixel > it is 1, else 0 (None: grey values kept)
    mean: tuple[float, ...] | None = None  # per-channel normalisation (x - mean) / std after all else (None: none)
    std: tuple[float, ...] | None = None  # see mean
    data: str = ""  # how the training pictures were made: the reason for ``resample``
    # a grey picture k >= 2 times the size on both sides that a nearest or bilinear enlargement explains is
    # un-enlarged (least squares, zoo.core.unenlarge) instead of resampled; else the ``resample`` filter
    unenlarge: bool = True

    def __post_init__(self) -> None:
        checks = [(self.resample, RESAMPLING, "resample"), (self.resize, RESIZE, "resize"),
                  (self.polarity, POLARITY, "polarity"), (self.invert, INVERT, "invert")]
        for value, allowed, what in checks:
            if value not in allowed:
                raise UserError(f"transforms: {what} must be one of {', '.join(allowed)}, got {value!r}")
        if self.channels not in (1, 3) or len(self.size) != 2 or min(self.size) < 1:
            raise UserError(f"transforms: channels must be 1 or 3 and size (H, W), got {self.channels}, {self.size}")

    # ---- the card --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The card's ``transforms`` (JSON: tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> ImageTransforms:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(f"transforms: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))}); "
                            "the card was written by another version of the zoo")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def __repr__(self) -> str:
        h, w = self.size
        steps = [f"{'grey' if self.channels == 1 else 'RGB'}",
                 f"resize {'shorter side to ' + str(h) + ', centre crop ' if self.resize == 'shorter_side' else 'to '}"
                 f"{h}x{w} ({self.resample} filter)",
                 f"floats in [{self.value_range[0]:g}, {self.value_range[1]:g}]"]
        if self.polarity != "none":
            steps.append(f"{self.polarity.replace('_', ' ')} (invert={self.invert}: auto inverts a light border)")
        if self.unenlarge and self.channels == 1:
            steps.insert(1, f"un-enlarged when k times {h}x{w} and a nearest or bilinear enlargement explains it "
                            "(unenlarge=True); otherwise")
        if self.binarize is not None:
            steps.append(f"binarised at {self.binarize:g}")
        if self.mean is not None:
            steps.append(f"normalised (mean {list(self.mean)}, std {list(self.std or ())})")
        why = f"\n  data: {self.data}" if self.data else ""
        return "ImageTransforms(\n  " + ",\n  ".join(steps) + ")" + why

    # ---- applying them ---------------------------------------------------------------------------
    def pipeline(self) -> Any:
        """The torchvision v2 steps from a PIL image to floats (before polarity, binarisation, normalisation)."""
        return pipeline(tuple(self.size), self.channels, self.resample, self.resize)

    def __call__(self, image: Any, invert: Any = None, strict: bool = False, name: str | None = None) -> Tensor:
        """One picture (path, PIL image, numpy array, tensor (C, H, W) in [0, 1]) -> (C, H, W) float32 on the
        CPU. ``invert``: auto / true / false (None: the card's default). ``strict``: refuse a picture of
        another size or channel count instead of converting it (the model's input as it is, only checked)."""
        invert = self.check_invert(invert)
        if isinstance(image, Tensor):
            image, name = tensor_to_numpy(image), name or f"a tensor of shape {tuple(image.shape)}"
        img, what = to_pil(image)
        name = name or what
        if strict:
            self.check_strict(img, name)
        x = self.small_picture(img)  # (C, H, W) in [0, 1]
        if self.polarity != "none" and (invert == "true" or (invert == "auto" and self.looks_inverted(x))):
            x = 1.0 - x
        if self.binarize is not None:
            x = (x > self.binarize).float()
        lo, hi = self.value_range
        if (lo, hi) != (0.0, 1.0):
            x = lo + (hi - lo) * x
        if self.mean is not None:
            mean = torch.tensor(self.mean, device=x.device, dtype=x.dtype).view(-1, 1, 1)
            std = torch.tensor(self.std or [1.0] * len(self.mean), device=x.device, dtype=x.dtype).view(-1, 1, 1)
            x = (x - mean) / std
        return x

    def small_picture(self, img: Any) -> Tensor:
        """A PIL image -> (C, H, W) floats in [0, 1]: un-enlarged (``unenlarge``; grey pictures of an integer
        factor k >= 2) or resized by the card's filter."""
        if self.unenlarge and self.channels == 1 and factor((img.height, img.width), tuple(self.size)):
            y = pipeline(None, 1, self.resample, self.resize)(img).as_subclass(Tensor)  # (1, kH, kW) in [0, 1]
            found = unenlarge(y, tuple(self.size))
            if found is not None:
                return found[0].float()
        return self.pipeline()(img).as_subclass(Tensor)  # a plain tensor, not a tv_tensors.Image

    def check_invert(self, invert: Any) -> str:
        invert = self.invert if invert is None else str(invert).lower()
        if invert not in INVERT:
            raise UserError(f"invert must be auto, true or false, got {invert!r}")
        if invert == "true" and self.polarity == "none":
            raise UserError("this model takes colour pictures, which have no polarity to invert: drop invert=true")
        return invert

    def looks_inverted(self, x: Tensor) -> bool:
        """Whether a picture (C, H, W) in [0, 1] has the other polarity than the data: its border pixels
        (the paper around a digit) are light where the data's are dark, or the other way round."""
        border = torch.cat([x[:, 0], x[:, -1], x[:, :, 0], x[:, :, -1]], dim=-1).mean()
        return bool(border > BORDER_LIGHT) == (self.polarity == "light_on_dark")

    def check_strict(self, img: Any, name: str) -> None:
        """``strict``: the picture must already be the model's size and channel count."""
        h, w = self.size
        channels = {"L": 1, "1": 1, "I": 1, "F": 1, "LA": 2, "RGB": 3, "RGBA": 4}.get(img.mode, 3)
        if channels != self.channels and not (channels in (2, 4) and channels - 1 == self.channels):
            raise UserError(f"{name} has {channels} channel(s) ({img.mode}); the model takes {self.channels}. "
                            f"Drop strict=True to convert it to {'grey' if self.channels == 1 else 'RGB'}")
        if img.size != (w, h):
            raise UserError(f"{name} is {img.size[0]}x{img.size[1]} pixels; the model takes {w}x{h}. Drop "
                            f"strict=True to resize it as the model's card says ({self.resample} filter)")


@functools.lru_cache(maxsize=32)
def pipeline(size: tuple[int, int] | None, channels: int, resample: str, resize: str) -> Any:
    """``ImageTransforms.pipeline``, built once per setting (size None: no resizing)."""
    from torchvision.transforms import v2 as T  # imported when used: torchvision

    mode = T.InterpolationMode[resample.upper()]
    steps = [] if size is None else (
        [T.Resize(size[0], interpolation=mode, antialias=True), T.CenterCrop(size)] if resize == "shorter_side"
        else [T.Resize(size, interpolation=mode, antialias=True)])
    grey = [T.Grayscale(1)] if channels == 1 else [T.RGB()]
    return T.Compose([*grey, *steps, T.ToImage(), T.ToDtype(torch.float32, scale=True)])


def tensor_to_numpy(x: Tensor) -> Any:
    """A tensor image (C, H, W) or (H, W), floats in [0, 1] or uint8, as the numpy (H, W[, C]) ``to_pil`` reads."""
    if x.dim() == 3 and x.shape[0] in (1, 3, 4):
        x = x.permute(1, 2, 0)
    elif x.dim() != 2:
        raise UserError(f"a tensor image must be (C, H, W) with C = 1, 3 or 4, or (H, W), got shape {tuple(x.shape)}; "
                        "a batch (B, C, H, W) of the model's size is taken as it is")
    return x.detach().cpu().numpy()


def parse_invert(invert: Any) -> str | None:
    """``invert`` as given to ``preprocess``: None (the card's default), a bool or auto / true / false."""
    if invert is None:
        return None
    value = str(invert).lower()
    if value not in INVERT:
        raise UserError(f"invert must be auto, true or false, got {invert!r}")
    return value


def transform_batch(tf: ImageTransforms, images: Any, shape: tuple[int, ...], device: torch.device,
                    dtype: torch.dtype, invert: Any = None, strict: bool = False) -> Tensor:
    """``preprocess``'s batch (B, *shape) on ``device`` / ``dtype``. A tensor batch is the model's input: checked
    and moved, not converted (call ``tf`` on a tensor image of another size). One picture or a list of them
    (paths, PIL images, numpy arrays) goes through ``tf``."""
    invert = parse_invert(invert)
    if isinstance(images, Tensor):
        try:
            return image_batch(images, None, shape, device, dtype)
        except UserError as err:
            if strict or images.dim() != len(shape) + 1 or not len(images):
                raise
            raise UserError(f"{err.message}. A tensor batch is the model's input, taken as it is: give pictures of "
                            "another size as a list (tensor images (C, H, W) in [0, 1], numpy arrays, PIL images or "
                            "files), which go through model.transforms()", details=err.details) from None
    if isinstance(images, (list, tuple)) and images and all(isinstance(i, Tensor) for i in images) \
            and any(tuple(i.shape) != shape for i in images):
        return torch.stack([tf(i, invert, strict) for i in images]).to(device, dtype)  # tensor images (C, H, W)
    return image_batch(images, lambda img, name: tf(img, invert, strict, name), shape, device, dtype)


DIGITS_DATA = ("scikit-learn's digits: 32x32 bitmaps, each 4x4 block's set pixels counted (0..16), scaled to "
               "[0, 1]; light ink on dark. A box filter makes a bigger picture into those block averages")
MNIST_DATA = "MNIST: anti-aliased 20x20 digits centred in 28x28; light ink on dark"


def card_transforms(model: Any) -> ImageTransforms | None:
    """The transforms the card of a model loaded from a pretrained entry states (None: a checkpoint, or an
    older card without them: the model derives them from its config)."""
    card = (getattr(model, "run_info", None) or {}).get("card") or {}
    return ImageTransforms.from_dict(card["transforms"]) if card.get("transforms") else None
