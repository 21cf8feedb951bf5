"""Tiny files in the real formats of the OOD model's datasets: IDX (MNIST / Fashion-MNIST, plain
or gzipped), CIFAR-10 binary batches, SVHN .mat files, and folders of PNG/JPEG images."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np


def write_idx(path: Path, array: np.ndarray) -> None:
    """IDX: two zero bytes, type 0x08 (uint8), the number of dims, big-endian int32 sizes, the bytes."""
    array = np.asarray(array, dtype=np.uint8)
    raw = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape) + array.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)


def write_mnist(root: Path, folder: str = "mnist", n_train: int = 60, n_test: int = 30, gz: bool = True) -> None:
    rng = np.random.default_rng(0)
    ext = ".gz" if gz else ""
    labels = lambda n: np.arange(n) % 10  # noqa: E731  (every class present)
    write_idx(root / folder / f"train-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_train, 28, 28)))
    write_idx(root / folder / f"train-labels-idx1-ubyte{ext}", labels(n_train))
    write_idx(root / folder / f"t10k-images-idx3-ubyte{ext}", rng.integers(0, 256, (n_test, 28, 28)))
    write_idx(root / folder / f"t10k-labels-idx1-ubyte{ext}", labels(n_test))


def write_cifar10(root: Path, per_batch: int = 12, n_test: int = 20) -> None:
    rng = np.random.default_rng(1)
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True, exist_ok=True)
    for name, n in [(f"data_batch_{i}.bin", per_batch) for i in range(1, 6)] + [("test_batch.bin", n_test)]:
        labels = (np.arange(n) % 10).astype(np.uint8)[:, None]
        pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        (folder / name).write_bytes(np.concatenate([labels, pixels], 1).tobytes())


def write_svhn(root: Path, n_train: int = 60, n_test: int = 20) -> None:
    from scipy.io import savemat

    rng = np.random.default_rng(2)
    (root / "svhn").mkdir(parents=True, exist_ok=True)
    for name, n in (("train_32x32.mat", n_train), ("test_32x32.mat", n_test)):
        y = (np.arange(n) % 10 + 1).astype(np.uint8)[:, None]  # SVHN labels are 1..10 (10 = digit 0)
        savemat(str(root / "svhn" / name), {"X": rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8), "y": y})


def write_image_folder(folder: Path, n: int = 8, size: int = 36) -> None:
    from PIL import Image

    rng = np.random.default_rng(3)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        img = Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))
        img.save(folder / f"img{i}.{'png' if i % 2 else 'jpg'}")


def paper_overrides(dataset: str):
    """Writer for the smoke test of ood_<dataset>_{ce,joint}: tiny SVHN + CIFAR-10 + two folders."""

    def write(tmp_path: Path) -> list[str]:
        root = tmp_path / "data"
        write_svhn(root)
        write_cifar10(root)
        write_image_folder(root / "LSUN_resize")
        write_image_folder(root / "Imagenet_resize")
        return [f"data.root={root}", "data.val_size=20", "data.ood_val_size=4", "data.noise_size=20",
                "data.batch_size=8", "model.width=8", "model.gan_width=8", "model.noise_dim=8"]

    return write
