"""The OOD model's real datasets as their files come: readers for the ``ood_images`` datamodule
(data.py, which fetches missing files first: zoo/core/downloads.py).

Layouts looked for under ``data.root``:

- ``mnist``: ``mnist/`` or ``MNIST/raw/`` with ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
  ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (IDX, plain or ``.gz``; read with
  torchvision's ``read_image_file`` / ``read_label_file``);
- ``fashion_mnist``: the same four file names in ``fashion_mnist/`` or ``FashionMNIST/raw/``;
- ``cifar10``: ``cifar-10-batches-bin/`` with ``data_batch_1.bin`` .. ``data_batch_5.bin`` and
  ``test_batch.bin``, or ``cifar-10-binary.tar.gz`` as downloaded, read without unpacking (the *binary*
  release: records of 1 label byte + 3,072 pixel bytes; the pickled Python release is never unpickled);
- ``svhn``: ``svhn/`` (or ``root`` itself) with ``train_32x32.mat`` and ``test_32x32.mat`` (format 2,
  read with ``scipy.io.loadmat``; label 10 means digit 0);
- an OOD image folder ``folder:PATH`` (PATH absolute or relative to root), e.g. ODIN's resized LSUN
  / TinyImageNet releases (``LSUN_resize/``, ``Imagenet_resize/``): every PNG / JPEG / BMP / GIF /
  WebP file below it, converted to the in-distribution channels and size; or the archive it came in
  (``LSUN_resize.tar.gz``, a .tar, .tgz or .zip), read without unpacking, also when the folder named is
  missing and the archive lies beside it.
"""

# cpu file: image files read for the ood_images datamodule (tests/platform/test_device_agnostic.py)

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from scipy.io import loadmat
from scipy.io.matlab import MatReadError
from torchvision.datasets.mnist import read_image_file, read_label_file

from zoo.errors import UserError, permission_denied
from zoo.models.ood.config import DATASETS
from zoo.paths import readable

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
# where the four IDX files are looked for: our folder, torchvision's layout inside it (what data/README.md's
# torchvision command writes), torchvision's layout at the root
IDX_DIRS = {"mnist": ("mnist", "mnist/MNIST/raw", "MNIST/raw"),
            "fashion_mnist": ("fashion_mnist", "fashion_mnist/FashionMNIST/raw", "FashionMNIST/raw")}


def _read_idx(path: Path, labels: bool) -> torch.Tensor:
    reader = read_label_file if labels else read_image_file
    try:
        if path.suffix != ".gz":
            return reader(str(path))
        with tempfile.TemporaryDirectory() as tmp:  # torchvision's readers take plain files only
            plain = Path(tmp) / path.stem
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
            return reader(str(plain))
    except (TypeError, ValueError, AssertionError, OSError, EOFError, RuntimeError) as err:
        raise permission_denied(err) or UserError(
            f"{path.name} is not a valid IDX {'label' if labels else 'image'} file: download it again and replace it",
            details=[f"file: {path}", f"error: {err}"]) from None


def _check_labels(y: torch.Tensor | np.ndarray, path: str | Path, low: int, high: int) -> None:
    """Labels outside the dataset's classes (a corrupt or foreign file) would make up classes: the
    model would be built with ``max + 1`` outputs and fail long after the run folder is written."""
    bad = y[(y < low) | (y > high)]
    if len(bad):
        raise UserError(f"{Path(path).name} holds label {int(bad[0])}, but this dataset's labels are {low}-{high}: "
                        "the file is corrupt or of another dataset; download it again and replace it",
                        details=[f"file: {path}"])


def load_idx_dataset(root: Path, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train images (N, 1, 28, 28) uint8, labels, test images, labels) of MNIST / Fashion-MNIST."""
    for sub in IDX_DIRS[name]:
        folder = root / sub
        found = []
        for f in IDX_FILES:
            hit = next((p for p in (folder / f, folder / f"{f}.gz") if p.is_file()), None)
            found.append(hit)
        if all(found):
            tr_x, tr_y, te_x, te_y = (_read_idx(p, labels="labels" in p.name) for p in found)
            _check_labels(tr_y, found[1], 0, 9)
            _check_labels(te_y, found[3], 0, 9)
            return tr_x[:, None], tr_y, te_x[:, None], te_y
    looked = ", ".join(str(root / s) for s in IDX_DIRS[name])
    raise UserError(f"{name} not found: copy its four IDX files into one of the folders below, or set data.root to "
                    "the folder holding them",
                    details=[f"files: {', '.join(IDX_FILES)} (plain or .gz)", f"looked in {looked}"])


CIFAR_ARCHIVE = "cifar-10-binary.tar.gz"  # the binary release as downloaded (the batches read from it as they are)
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"


def _cifar_records(raw: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """raw: (N * 3073,) uint8, records of 1 label byte + 3,072 pixel bytes -> (N, 3, 32, 32), (N,)."""
    if raw.size % 3073:
        raise UserError(f"{where} is not a CIFAR-10 binary batch (size {raw.size} is not a multiple of 3,073 bytes)")
    rec = raw.reshape(-1, 3073)
    _check_labels(rec[:, 0], where, 0, 9)
    return rec[:, 1:].reshape(-1, 3, 32, 32), rec[:, 0].astype(np.int64)


def _cifar_batches(root: Path, names: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The batches from ``cifar-10-batches-bin/`` or, where that folder is absent, from the downloaded
    ``cifar-10-binary.tar.gz`` itself (each member read into memory; nothing is unpacked to disk)."""
    folder, archive = root / "cifar-10-batches-bin", root / CIFAR_ARCHIVE
    if not folder.exists() and archive.is_file():
        try:
            with tarfile.open(archive, "r:gz") as tar:
                members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
                missing = [n for n in names if n not in members]
                if missing:
                    raise UserError(f"{CIFAR_ARCHIVE} lacks {len(missing)} of CIFAR-10's batches: it is not "
                                    "CIFAR-10's binary release; download it again (the address below)",
                                    details=[f"file: {archive}", f"lacks {', '.join(missing)}", f"from {CIFAR_URL}"])
                # a bytearray: a writable array (np.frombuffer of bytes is read-only, which torch warns of)
                return [_cifar_records(np.frombuffer(bytearray(tar.extractfile(members[n]).read()), np.uint8),
                                       f"{archive}:{n}")
                        for n in names]
        except (tarfile.TarError, EOFError, OSError) as err:
            raise permission_denied(err) or UserError(
                f"{CIFAR_ARCHIVE} cannot be read to its end: it is damaged or cut short; download it again (the "
                "address below)", details=[f"file: {archive}", f"error: {err}", f"from {CIFAR_URL}"]) from None
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        pickled = [f"{root} holds cifar-10-batches-py/ (the pickled Python release, e.g. torchvision's), which is "
                   "never unpickled here"] if (root / "cifar-10-batches-py").exists() else []
        raise UserError(f"CIFAR-10 not found: put its binary version, {CIFAR_ARCHIVE}, in {root} (as downloaded, or "
                        "extracted)",
                        details=[f"{folder} lacks {', '.join(missing)}", *pickled, f"from {CIFAR_URL}",
                                 "extracted: cifar-10-batches-bin/data_batch_1.bin .. test_batch.bin"])
    return [_cifar_records(np.fromfile(folder / n, dtype=np.uint8), str(folder / n)) for n in names]


def load_cifar10(root: Path):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    *train, (test_x, test_y) = _cifar_batches(root, names)
    train_x, train_y = np.concatenate([t[0] for t in train]), np.concatenate([t[1] for t in train])
    return torch.from_numpy(train_x), torch.from_numpy(train_y), torch.from_numpy(test_x), torch.from_numpy(test_y)


def _svhn_file(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    try:  # IndexError: scipy 1.10's reader on bytes that are no .mat file at all
        mat = loadmat(str(path))
        x, y = mat["X"], mat["y"]
    except (ValueError, KeyError, OSError, NotImplementedError, MatReadError, IndexError) as err:
        raise permission_denied(err) or UserError(
            f"{path.name} is not an SVHN .mat file with X (32, 32, 3, N) and y (N, 1): download it again (the "
            "'cropped digits', format 2; the address below)",
            details=[f"file: {path}", f"error: {err}", f"from {SVHN_URL}"]) from None
    if x.ndim != 4 or x.shape[:3] != (32, 32, 3):
        raise UserError(f"{path}: X has shape {x.shape}, expected (32, 32, 3, N)")
    y = y.reshape(-1).astype(np.int64)
    _check_labels(y, path, 1, 10)
    y = y % 10  # label 10 is the digit 0
    return torch.from_numpy(np.ascontiguousarray(x.transpose(3, 2, 0, 1))), torch.from_numpy(y)


def load_svhn(root: Path):
    for folder in (root / "svhn", root):
        if (folder / "train_32x32.mat").is_file() and (folder / "test_32x32.mat").is_file():
            return (*_svhn_file(folder / "train_32x32.mat"), *_svhn_file(folder / "test_32x32.mat"))
    raise UserError(f"SVHN not found: put train_32x32.mat and test_32x32.mat in {root / 'svhn'} (the 'cropped digits' "
                    "format 2 files)", details=[f"folders looked in: {root / 'svhn'}, {root}", f"from {SVHN_URL}"])


def load_dataset(root: Path, name: str):
    if name in IDX_DIRS:
        return load_idx_dataset(root, name)
    if name == "cifar10":
        return load_cifar10(root)
    if name == "svhn":
        return load_svhn(root)
    raise UserError(f"unknown dataset '{name}': use one of {', '.join(DATASETS)}")


def to_shape(x: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """uint8 images (N, C, H, W) -> uint8 (N, c, h, w): grey <-> RGB (luma / repeat), bilinear resize."""
    c, h, w = shape
    out = x.float()
    if out.shape[1] == 3 and c == 1:
        out = (out * out.new_tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)).sum(1, keepdim=True)
    elif out.shape[1] == 1 and c == 3:
        out = out.repeat(1, 3, 1, 1)
    if out.shape[-2:] != (h, w):
        out = F.interpolate(out, size=(h, w), mode="bilinear", antialias=True, align_corners=False)
    return out.round().clamp(0, 255).to(torch.uint8)


ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")  # ODIN's sets come as LSUN_resize.tar.gz, ...


def ood_set_name(path: Path) -> str:
    """The OOD set's name in tables and plots: the folder's, or the archive's without its suffix."""
    return next((path.name[: -len(s)] for s in ARCHIVE_SUFFIXES if path.name.lower().endswith(s)), path.name)


def _image_files(path: Path) -> list[tuple[str, Path | bytes]]:
    """(name, file or its bytes) of every image below a folder, or inside a tar(.gz) / zip archive as
    downloaded (read into memory: ODIN's sets are 10,000 small images), in name order. A folder that
    is missing is looked for as an archive beside it (LSUN_resize -> LSUN_resize.tar.gz)."""
    if not path.exists():
        path = next((path.with_name(path.name + s) for s in ARCHIVE_SUFFIXES
                     if path.with_name(path.name + s).is_file()), path)
    if path.is_dir():
        return [(str(p), p) for p in sorted(readable(path).rglob("*"))
                if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()]
    if not path.is_file():
        raise UserError(f"OOD image folder not found: {path} (a folder of PNG/JPEG images, e.g. LSUN_resize/, or "
                        f"the archive it came in, e.g. LSUN_resize.tar.gz)")

    def is_image(name: str) -> bool:
        return Path(name).suffix.lower() in IMAGE_EXTENSIONS and "__MACOSX/" not in name

    try:
        if zipfile.is_zipfile(readable(path)):
            with zipfile.ZipFile(path) as z:
                return [(f"{path}:{n}", z.read(n)) for n in sorted(z.namelist()) if is_image(n)]
        with tarfile.open(path, "r:*") as tar:
            return [(f"{path}:{m.name}", tar.extractfile(m).read())
                    for m in sorted(tar.getmembers(), key=lambda m: m.name) if m.isfile() and is_image(m.name)]
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as err:
        raise permission_denied(err) or UserError(
            f"OOD images: {path.name} is neither a folder nor a readable tar / zip archive: give the folder of "
            "images, or the archive as downloaded (download it again if it is damaged)",
            details=[f"path: {path}", f"error: {err}"]) from None


def load_folder(path: Path, shape: list[int]) -> torch.Tensor:
    """Every image below ``path`` (a folder, or a tar(.gz) / zip of images) as uint8 (N, C, H, W) of
    the given shape."""
    files = _image_files(path)
    if not files:
        raise UserError(f"OOD image folder {path} holds no images ({', '.join(sorted(IMAGE_EXTENSIONS))})")
    c, h, w = shape
    images = []
    for name, f in files:
        try:
            img = Image.open(f if isinstance(f, Path) else io.BytesIO(f))
            img = img.convert("L" if c == 1 else "RGB").resize((w, h), Image.BILINEAR)
        except OSError as err:
            raise permission_denied(err) or UserError(f"cannot read image {name}: {err}") from None
        a = np.asarray(img, dtype=np.uint8)
        images.append(a[None] if c == 1 else a.transpose(2, 0, 1))
    return torch.from_numpy(np.stack(images))
