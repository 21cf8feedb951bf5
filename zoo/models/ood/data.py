"""Datamodules of the OOD model: in-distribution data plus named out-of-distribution (OOD) sets.

Batches: training ``(x, y)``; with ``ood_train`` (for ``mode: confidence``) a dict
``{"in": (x, y), "out": (x_out, y_out)}`` (Lightning's CombinedLoader, the OOD set cycled).
Validation and test: a list of loaders, the in-distribution split first, then one per OOD set
(``info()["ood_sets"]`` names them, in order); OOD labels are -1. Images are (C, H, W) in [0, 1].

Embedded defaults (nothing to download):

``ood_digits`` — scikit-learn's 1,797 8x8 digits, split once with a fixed permutation (seed 0,
independent of the run's seed): 360 test, 180 validation, 1,257 training images. OOD sets (360
test and 180 validation images each, drawn with fixed seeds; validation and test never overlap):

- ``photos``: grey 8x8 patches of scikit-learn's bundled flower.jpg, downsampled 4x (validation
  patches from the top half of the photo, test patches from the bottom half);
- ``uniform``: U[0, 1] pixels;  ``gaussian``: N(0.5, 1) pixels clipped to [0, 1] (ODIN's noise sets);
- ``rot90``: digits rotated by 90 degrees (the validation / test digits themselves): *near* OOD,
  same strokes and intensity statistics, different shapes;
- ``blends``: the pixelwise mean of two digits of different classes (pairs of the validation / test
  digits): near OOD, every stroke a digit's, no digit's shape;
- ``letters``: letters rendered by Pillow's built-in font, turned, size-normalised into 32x32 and
  box-averaged to 8x8 as the digits were made (validation: A-M and a-m, test: N-Z and n-z): near OOD,
  pen strokes of another alphabet. The rendering is FreeType's: bit-identical per seed on one machine.

The explicit OOD *training* set of ``mode: confidence`` (``ood_train: true``) is 1,257 patches of
the other bundled photo, china.jpg: a different photo from the test ``photos`` and none of the
noise / rotated sets, so confidence-loss results on those are not trained on the test kind.

``ood_toy2d`` — the paper's 2-D toy: two Gaussian classes N((-2, 0), I/4) and N((2, 0), I/4);
OOD sets ``box`` (uniform on [-8, 8]^2) and ``ring`` (radius 5 +- 0.3).

``ood_images`` — MNIST / Fashion-MNIST / CIFAR-10 / SVHN and OOD image folders from local files
(their layouts: readers.py). ``ood_images`` splits the training files once (fixed permutation, seed 0) into training and
``val_size`` validation images; each OOD set is split (fixed permutation, seed 1) into
``ood_val_size`` validation images and the rest for test. Cross-dataset OOD sets use the other
dataset's test split, converted (grey <-> RGB by luma / repetition, bilinear resizing).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from lightning.pytorch.utilities import CombinedLoader
from PIL import Image, ImageDraw, ImageFont
from torch.utils.data import DataLoader, Dataset

from zoo.core.data import ZooDataModule, plain_loader, shuffled_loader
from zoo.core.downloads import fetch
from zoo.errors import UserError
from zoo.models.ood.config import DATASETS, OOD_DIGITS_SPEC, OOD_IMAGES_SPEC, OOD_TOY2D_SPEC
from zoo.models.ood.readers import load_dataset, load_folder, ood_set_name, to_shape


class ImageTensorSet(Dataset):
    """(x, y) pairs from tensors; uint8 images (kept as uint8 to save memory) become float / 255."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        return (x.float() / 255.0 if x.dtype == torch.uint8 else x), self.y[i]


def as_float(x: torch.Tensor) -> torch.Tensor:
    return x.float() / 255.0 if x.dtype == torch.uint8 else x


class OODDataModule(ZooDataModule):
    """Loaders over tensors that ``build()`` returns; subclasses only build the tensors."""

    def build(self) -> dict:
        """Return {"train": (x, y), "val": (x, y), "test": (x, y), "val_ood": {name: x},
        "test_ood": {name: x}, "train_ood": x or None, "num_classes": K, "dataset": str}."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "parts", None) is not None:
            return
        self.parts = self.build()
        p = self.parts
        if list(p["val_ood"]) != list(p["test_ood"]):
            raise AssertionError("validation and test OOD sets must have the same names")
        if not p["test_ood"]:
            raise UserError("no OOD sets: give at least one in data.ood")
        self.train_set = ImageTensorSet(*p["train"])
        self.val_set = ImageTensorSet(*p["val"])
        self.test_set = ImageTensorSet(*p["test"])

    def info(self) -> dict:
        self.setup()
        x = as_float(self.parts["train"][0][:10_000])  # statistics from (up to) 10,000 training inputs
        dims = [0] + list(range(2, x.dim())) if x.dim() > 2 else [0]
        return {"dataset": self.parts["dataset"], "input_shape": list(x.shape[1:]),
                "num_classes": int(self.parts["num_classes"]), "ood_sets": list(self.parts["test_ood"]),
                "mean": x.mean(dims).flatten().tolist(), "std": x.std(dims).clamp(min=1e-3).flatten().tolist(),
                "bounded": x.dim() > 2, "ood_train": self.parts.get("train_ood") is not None,
                "n_train": len(self.parts["train"][0])}

    def _eval_loaders(self, split: str) -> list[DataLoader]:
        x, y = self.parts[split]
        loaders = [plain_loader(ImageTensorSet(x, y), self.cfg.eval_batch_size, num_workers=self.cfg.num_workers)]
        for x_out in self.parts[f"{split}_ood"].values():
            labels = torch.full((len(x_out),), -1, dtype=torch.long)
            loaders.append(plain_loader(ImageTensorSet(x_out, labels), self.cfg.eval_batch_size,
                                        num_workers=self.cfg.num_workers))
        return loaders

    def train_dataloader(self):
        c = self.cfg
        loader = shuffled_loader(self.train_set, c.batch_size, seed=c.seed, num_workers=c.num_workers, drop_last=True)
        x_out = self.parts.get("train_ood")
        if x_out is None:
            return loader

        out_set = ImageTensorSet(x_out, torch.full((len(x_out),), -1, dtype=torch.long))
        out = shuffled_loader(out_set, c.batch_size, seed=c.seed + 1, num_workers=c.num_workers, drop_last=True)
        return CombinedLoader({"in": loader, "out": out}, mode="max_size_cycle")

    def val_dataloader(self):
        return self._eval_loaders("val")

    def test_dataloader(self):
        return self._eval_loaders("test")


# ---- the embedded digits -----------------------------------------------------------------------
def grey_photo(name: str, downsample: int) -> torch.Tensor:
    """One of scikit-learn's bundled photos (china.jpg, flower.jpg) as grey [0, 1], (H, W)."""
    from sklearn.datasets import load_sample_image  # imported when used: sklearn

    rgb = torch.tensor(load_sample_image(name), dtype=torch.float32) / 255.0  # (427, 640, 3)
    grey = rgb @ torch.tensor([0.299, 0.587, 0.114])  # ITU-R 601 luma
    return F.avg_pool2d(grey[None, None], downsample)[0, 0]  # (H / d, W / d)


def random_patches(image: torch.Tensor, n: int, size: int, seed: int,
                   rows: tuple[float, float] = (0, 1)) -> torch.Tensor:
    """n random size x size patches whose top rows lie in the given fraction of the image: (n, 1, s, s)."""
    g = torch.Generator().manual_seed(seed)
    H, W = image.shape
    lo, hi = int(rows[0] * (H - size)), int(rows[1] * (H - size))
    top = torch.randint(lo, hi + 1, (n,), generator=g)
    left = torch.randint(0, W - size + 1, (n,), generator=g)
    return torch.stack([image[t:t + size, s:s + size] for t, s in zip(top.tolist(), left.tolist())])[:, None]


def noise_images(kind: str, n: int, shape: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "uniform":
        return torch.rand(n, *shape, generator=g)
    if kind == "gaussian":
        return (0.5 + torch.randn(n, *shape, generator=g)).clamp(0, 1)
    raise UserError(f"unknown noise OOD set '{kind}': use uniform or gaussian")


def blends(x: torch.Tensor, y: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """n pixelwise means of two images (N, C, H, W) of different labels y (N,), pairs drawn with a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randint(len(x), (2, 4 * n), generator=g)  # 4n pairs: ~9 in 10 of ten classes differ
    keep = (y[a] != y[b]).nonzero()[:n, 0]
    if len(keep) < n:
        raise AssertionError(f"{len(keep)} pairs of different classes among {4 * n}: too few classes to blend")
    return (x[a[keep]] + x[b[keep]]) / 2


LETTERS = {"val": "ABCDEFGHIJKLMabcdefghijklm", "test": "NOPQRSTUVWXYZnopqrstuvwxyz"}  # disjoint glyphs


def letters(chars: str, n: int, seed: int) -> torch.Tensor:
    """n letters drawn from ``chars``, rendered bright on black by Pillow's built-in font (40 px, 2 px stroke),
    turned by up to 15 degrees, cropped to their ink, scaled to a height or width of 24-32 px (the longer side)
    and placed in a 32x32 box up to 2 px off centre, then averaged over 4x4 blocks (scikit-learn's digits are
    32x32 bitmaps of size-normalised digits counted in 4x4 blocks): (n, 1, 8, 8) in [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    font = ImageFont.load_default(size=40)
    out = []
    for _ in range(n):
        char = chars[int(torch.randint(len(chars), (1,), generator=g))]
        angle = float(torch.rand(1, generator=g)) * 30 - 15
        target = int(torch.randint(24, 33, (1,), generator=g))
        dx, dy = torch.randint(-2, 3, (2,), generator=g).tolist()
        glyph = Image.new("L", (64, 64))
        ImageDraw.Draw(glyph).text((32, 32), char, fill=255, font=font, anchor="mm", stroke_width=2, stroke_fill=255)
        glyph = glyph.rotate(angle, resample=Image.BILINEAR)
        glyph = glyph.crop(glyph.getbbox())
        scale = target / max(glyph.size)
        glyph = glyph.resize((max(1, round(glyph.width * scale)), max(1, round(glyph.height * scale))),
                             Image.BILINEAR)
        box = Image.new("L", (32, 32))
        box.paste(glyph, ((32 - glyph.width) // 2 + dx, (32 - glyph.height) // 2 + dy))
        out.append(torch.tensor(list(box.getdata()), dtype=torch.float32))
    big = torch.stack(out).view(n, 1, 32, 32) / 255.0
    return F.avg_pool2d(big, 4)  # (n, 1, 8, 8)


class OODDigits(OODDataModule):
    """scikit-learn digits (in) vs photo patches, uniform / Gaussian noise, and near OOD: rotated digits,
    blends of two digits and letters (out)."""

    spec = OOD_DIGITS_SPEC

    def build(self) -> dict:
        from sklearn.datasets import load_digits  # imported when used: sklearn

        d = load_digits()
        x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)  # (1797, 1, 8, 8)
        y = torch.tensor(d.target, dtype=torch.long)
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
        test, val, train = perm[:360], perm[360:540], perm[540:]
        flower = grey_photo("flower.jpg", 4)
        out = {}
        for split, idx, n, seed, rows in (("val", val, 180, 1, (0, 0.5)), ("test", test, 360, 2, (0.5, 1))):
            out[split] = {
                "photos": random_patches(flower, n, 8, seed=100 + seed, rows=rows),
                "uniform": noise_images("uniform", n, [1, 8, 8], seed=200 + seed),
                "gaussian": noise_images("gaussian", n, [1, 8, 8], seed=300 + seed),
                "rot90": torch.rot90(x[idx], 1, dims=(2, 3)),
                "blends": blends(x[idx], y[idx], n, seed=500 + seed),
                "letters": letters(LETTERS[split], n, seed=600 + seed),
            }
        train_ood = random_patches(grey_photo("china.jpg", 4), len(train), 8, seed=400) if self.cfg.ood_train else None
        return {"train": (x[train], y[train]), "val": (x[val], y[val]), "test": (x[test], y[test]),
                "val_ood": out["val"], "test_ood": out["test"], "train_ood": train_ood,
                "num_classes": 10, "dataset": "digits"}


# ---- the 2-D toy ---------------------------------------------------------------------------------


def toy_points(n: int, separation: float, std: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    centre = torch.stack([(2 * y - 1).float() * separation, torch.zeros(n)], 1)
    return centre + std * torch.randn(n, 2, generator=g), y


def ring(n: int, radius: float, width: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    angle = 2 * math.pi * torch.rand(n, generator=g)
    r = radius + width * torch.randn(n, generator=g)
    return torch.stack([r * angle.cos(), r * angle.sin()], 1)


class OODToy2D(OODDataModule):
    """Two Gaussian classes in the plane (in) vs a uniform box and a ring (out): the paper's toy."""

    spec = OOD_TOY2D_SPEC

    def build(self) -> dict:
        c = self.cfg
        if c.n_train < 4:
            raise UserError(f"data.n_train={c.n_train} must be at least 4")
        box = lambda n, seed: (torch.rand(n, 2, generator=torch.Generator().manual_seed(seed)) * 16 - 8)  # noqa: E731
        parts = {"train": toy_points(c.n_train, c.separation, c.std, 0),
                 "val": toy_points(500, c.separation, c.std, 1), "test": toy_points(1000, c.separation, c.std, 2),
                 "val_ood": {"box": box(500, 11), "ring": ring(500, 5.0, 0.3, 12)},
                 "test_ood": {"box": box(1000, 21), "ring": ring(1000, 5.0, 0.3, 22)},
                 "train_ood": box(c.n_train, 31) if c.ood_train else None, "num_classes": 2, "dataset": "toy2d"}
        return parts


FETCHED_INTO = {"mnist": "mnist", "fashion_mnist": "fashion_mnist", "cifar10": ".", "svhn": "svhn"}  # under root
ODIN_SETS = ("LSUN_resize", "Imagenet_resize")  # OOD folders fetched as ODIN's archives when missing


class OODImages(OODDataModule):
    """MNIST / Fashion-MNIST / CIFAR-10 / SVHN vs other datasets, image folders, noise; missing
    datasets and ODIN's folders are fetched (zoo/core/downloads.py) unless data.download=false."""

    spec = OOD_IMAGES_SPEC

    def prepare_data(self) -> None:
        self.setup()  # fetches what is missing, or fails early naming the paths looked at

    def load_dataset(self, root: Path, name: str):
        try:
            return load_dataset(root, name)
        except UserError as missing:
            if name not in FETCHED_INTO:
                raise
            fetch(name, root / FETCHED_INTO[name], self.cfg.download, missing)
            return load_dataset(root, name)

    def load_folder(self, path: Path, shape: list[int]) -> torch.Tensor:
        try:
            return load_folder(path, shape)
        except UserError as missing:
            if path.name not in ODIN_SETS or path.exists():
                raise
            fetch(path.name, path.parent, self.cfg.download, missing)  # the archive beside it, read as it is
            return load_folder(path, shape)

    def build(self) -> dict:
        c = self.cfg
        root = Path(c.root)
        x, y, x_test, y_test = self.load_dataset(root, c.dataset)
        if not 0 < c.val_size < len(x):
            raise UserError(f"data.val_size={c.val_size} must be between 1 and {len(x) - 1}")
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
        val, train = perm[: c.val_size], perm[c.val_size:]
        shape = list(x.shape[1:])
        val_ood, test_ood = {}, {}
        train_folder = (root / c.ood_train_folder).resolve() if c.ood_train and c.ood_train_folder else None
        if len(set(map(str, c.ood))) < len(c.ood):
            raise UserError(f"data.ood lists a set twice ({', '.join(map(str, c.ood))}): list each once")
        for spec in c.ood:
            spec = str(spec)
            if spec in ("uniform", "gaussian"):
                seed = 500 + len(test_ood)
                val_ood[spec] = noise_images(spec, c.ood_val_size, shape, seed)
                test_ood[spec] = noise_images(spec, c.noise_size, shape, seed + 50)
                continue
            if spec.startswith("folder:"):
                folder = Path(spec[len("folder:"):])
                name = ood_set_name(folder)
                if name in test_ood:  # folder:a/LSUN and folder:b/LSUN: the second would replace the first
                    raise UserError(f"data.ood names two sets called '{name}': give each folder its own name")
                if train_folder is not None and (root / folder).resolve() == train_folder:
                    raise UserError(f"data.ood_train_folder={c.ood_train_folder} is also the test set {spec} in "
                                    "data.ood: its images would be trained on, then tested; use another set for one")
                images = self.load_folder(folder if folder.is_absolute() else root / folder, shape)
            elif spec in DATASETS:
                if spec == c.dataset:
                    raise UserError(f"data.ood lists the in-distribution dataset '{spec}' itself")
                try:
                    images, name = to_shape(self.load_dataset(root, spec)[2], shape), spec
                except UserError as err:
                    rest = ",".join(str(s) for s in c.ood if str(s) != spec) or "uniform,gaussian"
                    raise UserError(f"{spec} is missing, and serves only as an OOD test set here: to run without "
                                    f"it, drop it from data.ood (data.ood=[{rest}])",
                                    details=[err.message, *err.details]) from None
            else:
                raise UserError(f"unknown OOD set '{spec}' in data.ood: use one of {', '.join(DATASETS)}, "
                                "uniform, gaussian, or folder:PATH")
            if len(images) < 2:
                raise UserError(f"OOD set '{spec}' has {len(images)} image(s); it needs at least 2 (validation + test)")
            n_val = min(c.ood_val_size, len(images) // 2)
            order = torch.randperm(len(images), generator=torch.Generator().manual_seed(1))
            val_ood[name], test_ood[name] = images[order[:n_val]], images[order[n_val:]]
        train_ood = None
        if c.ood_train:
            if not c.ood_train_folder:
                raise UserError("data.ood_train=true needs data.ood_train_folder=PATH "
                                "(a folder of OOD training images)")
            folder = Path(c.ood_train_folder)
            train_ood = self.load_folder(folder if folder.is_absolute() else root / folder, shape)
        return {"train": (x[train], y[train]), "val": (x[val], y[val]), "test": (x_test, y_test),
                "val_ood": val_ood, "test_ood": test_ood, "train_ood": train_ood,
                "num_classes": int(max(int(y.max()), int(y_test.max())) + 1), "dataset": c.dataset}
