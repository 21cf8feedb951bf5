"""Binarised image data for the VAEs: scikit-learn's digits (embedded) and MNIST (local IDX files).

Both yield batches ``(x, y)`` with ``x`` of shape (B, 1, H, W) in [0, 1] and ``y`` the digit label.
Binarisation (``binarize``):
- ``static``: threshold the intensities once (``x > threshold``);
- ``dynamic``: a fresh Bernoulli(intensity) draw every time a training image is read (the usual
  protocol for IWAE-style likelihood numbers; it also fights over-fitting on the 1,257 digits).
  The draw depends only on (seed, epoch, index), so resumed runs see the same pixels. Validation
  and test images are binarised once with a fixed seed, so their metrics are comparable;
- ``none``: grey values in [0, 1] (for the Gaussian decoder).
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from zoo.core.data import EpochSampler, ResumableLoader, ZooDataModule, check_full_batch, plain_loader
from zoo.core.downloads import fetch
from zoo.errors import UserError
from zoo.models.vae.config import BINARIZE, DIGITS_SPEC, MNIST_SPEC


# ---- the datasets ---------------------------------------------------------------------------
def binarize_images(x: torch.Tensor, mode: str, threshold: float, seed: int) -> torch.Tensor:
    """Binarise a fixed set of images once: threshold (static), one seeded draw (dynamic), or not."""
    if mode == "static":
        return (x > threshold).float()
    if mode == "dynamic":
        return torch.bernoulli(x, generator=torch.Generator().manual_seed(seed))
    return x


class ImageSet(Dataset):
    """Images (N, 1, H, W) in [0, 1] with labels. With ``dynamic=True`` every read is a fresh
    Bernoulli draw keyed by (seed, epoch, index); the epoch travels with the index from
    ``EpochSampler(tag_epoch=True)`` (so it also reaches DataLoader worker processes)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, dynamic: bool = False, seed: int = 0):
        self.images, self.labels, self.dynamic, self.seed = images, labels, dynamic, seed

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, key):
        i, epoch = key if isinstance(key, tuple) else (key, 0)
        x = self.images[i]
        if self.dynamic:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 7_919 + int(i) + 1)
            x = torch.bernoulli(x, generator=g)
        return x, self.labels[i]


# ---- IDX files (MNIST's format) ---------------------------------------------------------------
MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/"
IDX_FIX = "download the file again (MNIST's address below) and replace it"
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def idx_error(path: str | Path, what: str) -> UserError:
    """A damaged or foreign IDX file: ``what`` is wrong with it; the file and MNIST's address below."""
    return UserError(f"{Path(path).name} {what}; {IDX_FIX}", details=[f"file: {path}", f"MNIST: {MNIST_URL}"])


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (plain or gzipped, detected from its first bytes).

    Format: 2 zero bytes, a type code (0x08 = uint8, ...), the number of dimensions d, then d
    big-endian int32 sizes, then the data in C order.

    Written by hand rather than with torchvision's ``datasets.mnist.read_sn3_pascalvincent_tensor``:
    that reader opens only uncompressed files (torchvision unpacks its downloads first, while users
    hold the ``.gz`` files as published) and answers a wrong or truncated file with a bare
    ``AssertionError`` / reshape error, where the zoo must say which file is wrong and why."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as err:  # a cut-short download ends mid-stream
            raise idx_error(path, f"is a truncated or corrupt .gz file ({err})") from None
    if len(raw) < 4:
        what = "empty" if not raw else f"truncated ({len(raw)} bytes)"
        raise idx_error(path, f"is {what}, not an IDX file")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise idx_error(path, f"is not an IDX file (bad magic number {raw[:4].hex()}; expected MNIST's "
                              "train-images-idx3-ubyte / t10k-labels-idx1-ubyte format)")
    dtype, ndim = np.dtype(_IDX_DTYPES[raw[2]]), raw[3]
    offset = 4 + 4 * ndim
    if len(raw) < offset:
        raise idx_error(path, f"is truncated ({len(raw)} bytes, within its IDX header)")
    shape = tuple(int(s) for s in np.frombuffer(raw, ">i4", count=ndim, offset=4))
    if len(raw) - offset != int(np.prod(shape)) * dtype.itemsize:
        raise idx_error(path, f"has an IDX header that says shape {shape} but holds {len(raw) - offset} data bytes "
                              "(truncated or corrupt download?)")
    return np.frombuffer(raw, dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


def mnist_dirs(root: str | Path) -> list[Path]:
    """Folders searched for the four IDX files, in order: ``<root>/mnist``, torchvision's
    ``<root>/mnist/MNIST/raw`` and ``<root>/MNIST/raw``."""
    root = Path(root)
    return [root / "mnist", root / "mnist" / "MNIST" / "raw", root / "MNIST" / "raw"]


def find_mnist(root: str | Path) -> dict[str, Path]:
    for folder in mnist_dirs(root):
        found = {}
        for key, name in MNIST_FILES.items():
            for candidate in (folder / name, folder / f"{name}.gz"):
                if candidate.is_file():
                    found[key] = candidate
                    break
        if len(found) == len(MNIST_FILES):
            return found
    folders = [d / n for d in mnist_dirs(root) for name in MNIST_FILES.values() for n in (name, f"{name}.gz")
               if (d / n).is_dir()]
    if folders:  # e.g. an archive unpacked into folders named like the files
        raise UserError(f"{folders[0]} is a folder, but MNIST's IDX file of that name is expected there: "
                        f"replace it with the file itself (plain or .gz, from {MNIST_URL})")
    looked = ", ".join(str(d) for d in mnist_dirs(root))
    raise UserError(
        "MNIST not found: get its four IDX files on a machine with internet and put them in one of the folders "
        "below, or point data.root at the folder holding mnist/",
        details=[f"files: {', '.join(MNIST_FILES.values())} (plain or .gz)", f"folders looked in: {looked}",
                 f"from {MNIST_URL}, or let torchvision.datasets.MNIST fetch them"],
    )


# ---- the datamodules ------------------------------------------------------------------------
class _BinaryImageData(ZooDataModule):
    """Shared loaders for (train, val, test) image tensors in [0, 1]."""

    name = "images"

    def _load(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return (train+val images, their labels, test images, test labels)."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "train_set", None) is not None:
            return
        c = self.cfg
        if c.binarize not in BINARIZE:
            raise UserError(f"data.binarize must be one of {', '.join(BINARIZE)}, got '{c.binarize}'")
        x, y, x_test, y_test = self._load()
        n_val = c.val_size
        if not 0 < n_val < len(x):
            raise UserError(f"data.val_size={n_val} must be between 1 and {len(x) - 1} for {self.name}")
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(c.seed))
        tr, va = perm[n_val:], perm[:n_val]
        fixed = {"mode": c.binarize, "threshold": c.threshold}
        self.train_set = (
            ImageSet(x[tr], y[tr], dynamic=True, seed=c.seed) if c.binarize == "dynamic"
            else ImageSet(binarize_images(x[tr], **fixed, seed=c.seed), y[tr])
        )
        self.val_set = ImageSet(binarize_images(x[va], **fixed, seed=c.seed + 1), y[va])
        self.test_set = ImageSet(binarize_images(x_test, **fixed, seed=c.seed + 2), y_test)

    def info(self) -> dict:
        self.setup()
        shape = list(self.train_set.images.shape[1:])
        return {"dataset": self.name, "image_shape": shape, "binarize": self.cfg.binarize,
                "threshold": float(self.cfg.threshold), "n_train": len(self.train_set)}

    def train_dataloader(self):

        check_full_batch(len(self.train_set), self.cfg.batch_size)
        sampler = EpochSampler(len(self.train_set), self.cfg.seed, tag_epoch=True)  # (index, epoch): keyed draws
        return ResumableLoader(self.train_set, batch_size=self.cfg.batch_size, sampler=sampler,
                          num_workers=self.cfg.num_workers, drop_last=True)

    def val_dataloader(self):
        return plain_loader(self.val_set, self.cfg.eval_batch_size, num_workers=self.cfg.num_workers)

    def test_dataloader(self):
        return plain_loader(self.test_set, self.cfg.eval_batch_size, num_workers=self.cfg.num_workers)


class DigitsData(_BinaryImageData):
    """scikit-learn's 1,797 real 8x8 handwritten digits (embedded; 1257/270/270 split), binarised."""

    spec = DIGITS_SPEC
    name = "digits"

    def _load(self):
        from sklearn.datasets import load_digits  # imported when used: sklearn

        d = load_digits()
        x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)  # (1797, 1, 8, 8)
        y = torch.tensor(d.target, dtype=torch.long)
        n_test = self.cfg.test_size
        if not 0 < n_test < len(x) - 1:
            raise UserError(f"data.test_size={n_test} must be between 1 and {len(x) - 2}")
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(self.cfg.seed + 12_345))
        rest, test = perm[n_test:], perm[:n_test]
        return x[rest], y[rest], x[test], y[test]


class MnistData(_BinaryImageData):
    """MNIST from local IDX files (plain or .gz; torchvision's MNIST/raw layout too), binarised."""

    spec = MNIST_SPEC
    name = "mnist"

    def prepare_data(self) -> None:
        try:
            find_mnist(self.cfg.root)  # fail early, with the paths looked at
        except UserError as missing:  # fetched into <root>/mnist (zoo/core/downloads.py), or the error says how
            fetch("mnist", Path(self.cfg.root) / "mnist", self.cfg.download, missing)
            find_mnist(self.cfg.root)

    def _load(self):
        files = find_mnist(self.cfg.root)
        arrays = {k: read_idx(p) for k, p in files.items()}
        for split in ("train", "test"):
            imgs, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
            if imgs.ndim != 3 or labels.ndim != 1 or len(imgs) != len(labels):
                raise UserError(f"MNIST {split} files disagree: images {imgs.shape} vs labels {labels.shape}; "
                                f"{IDX_FIX}", details=[f"files: {files[f'{split}_images']}, {files[f'{split}_labels']}",
                                                       f"MNIST: {MNIST_URL}"])
            bad = labels[(labels < 0) | (labels > 9)]
            if bad.size:  # a well-formed IDX file of other data (a corrupt or wrong download)
                raise idx_error(files[f"{split}_labels"], f"holds label {bad[0]}, but MNIST's labels are the digits "
                                "0-9: the file is corrupt or not MNIST's")

        def images(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a.astype(np.float32) / 255.0).unsqueeze(1)  # (N, 1, 28, 28)

        return (images(arrays["train_images"]), torch.from_numpy(arrays["train_labels"].astype(np.int64)),
                images(arrays["test_images"]), torch.from_numpy(arrays["test_labels"].astype(np.int64)))


def write_idx(path: str | Path, array: np.ndarray) -> Path:
    """Write ``array`` (uint8, int8, >i2, >i4, >f4 or >f8) as an IDX file, gzipped when the name
    ends in .gz: the inverse of ``read_idx`` (for converting other data, and for tests)."""
    path = Path(path)
    array = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_DTYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise UserError(f"write_idx: unsupported dtype {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, ">i4").tobytes()
    body = array.astype(np.dtype(_IDX_DTYPES[code]), copy=False).tobytes()
    raw = header + body
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path
