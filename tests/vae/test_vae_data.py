"""The VAE datamodules: IDX files (plain and gzipped, both folder layouts), missing / corrupt
files, the digits split and the binarisation modes."""

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from zoo.errors import UserError
from zoo.models.vae.data import DigitsData, MnistData, find_mnist, read_idx, write_idx

NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def tiny_mnist(folder: Path, n_train: int = 40, n_test: int = 12, gz: bool = False, seed: int = 0) -> dict:
    """Write the four MNIST IDX files with random 28x28 uint8 images; returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = {
        NAMES[0]: rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        NAMES[1]: rng.integers(0, 10, n_train, dtype=np.uint8),
        NAMES[2]: rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        NAMES[3]: rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for name, a in arrays.items():
        write_idx(folder / (name + (".gz" if gz else "")), a)
    return arrays


def test_idx_header_by_hand(tmp_path):
    # the documented format, written without our writer: magic 0x00000803, dims, uint8 data
    data = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = bytes([0, 0, 8, 3]) + np.array([2, 3, 4], ">i4").tobytes() + data.tobytes()
    (tmp_path / "a-idx3-ubyte").write_bytes(raw)
    (tmp_path / "a-idx3-ubyte.gz").write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx3-ubyte"), data)
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx3-ubyte.gz"), data)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, ">i2", ">i4", ">f4", ">f8"])
def test_idx_roundtrip_dtypes(tmp_path, dtype):
    a = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    if np.dtype(dtype) == np.uint8:
        a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(read_idx(write_idx(tmp_path / "x.idx", a)), a)


def test_idx_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"PK\x03\x04 not an idx file")
    with pytest.raises(UserError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    raw = bytes([0, 0, 8, 1]) + np.array([10], ">i4").tobytes() + bytes(5)  # header says 10, holds 5
    (tmp_path / "short").write_bytes(raw)
    with pytest.raises(UserError, match="truncated"):
        read_idx(tmp_path / "short")


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_plain_and_gz(tmp_path, gz):
    arrays = tiny_mnist(tmp_path / "mnist", gz=gz)
    dm = MnistData({"root": str(tmp_path), "val_size": 10, "binarize": "static", "batch_size": 8})
    dm.prepare_data()
    dm.setup("fit")
    assert dm.info()["image_shape"] == [1, 28, 28]
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (30, 10, 12)
    # the test split is t10k in order, thresholded at 0.5 of 255
    x, y = dm.test_set[3]
    np.testing.assert_array_equal(x[0].numpy(), (arrays[NAMES[2]][3] / 255.0 > 0.5).astype(np.float32))
    assert int(y) == int(arrays[NAMES[3]][3])
    xb, yb = next(iter(dm.train_dataloader()))
    assert xb.shape == (8, 1, 28, 28) and set(xb.unique().tolist()) <= {0.0, 1.0}


def test_mnist_torchvision_layout(tmp_path):
    tiny_mnist(tmp_path / "MNIST" / "raw", gz=True)
    files = find_mnist(tmp_path)
    assert files["train_images"] == tmp_path / "MNIST" / "raw" / (NAMES[0] + ".gz")


def test_mnist_missing_names_paths(tmp_path):
    dm = MnistData({"root": str(tmp_path)})
    with pytest.raises(UserError) as err:
        dm.prepare_data()
    msg = str(err.value)
    assert str(tmp_path / "mnist") in msg and str(tmp_path / "MNIST" / "raw") in msg
    assert "train-images-idx3-ubyte" in msg and "fetch" in msg  # and how to get them


def test_mnist_mismatched_files(tmp_path):
    tiny_mnist(tmp_path / "mnist")
    write_idx(tmp_path / "mnist" / NAMES[1], np.zeros(7, np.uint8))  # 7 labels for 40 images
    with pytest.raises(UserError, match="disagree"):
        MnistData({"root": str(tmp_path), "val_size": 5}).setup("fit")


def test_digits_split_and_static_binarisation():
    dm = DigitsData({"binarize": "static"})
    dm.setup("fit")
    assert (len(dm.train_set), len(dm.val_set), len(dm.test_set)) == (1257, 270, 270)
    assert dm.info() == {"dataset": "digits", "image_shape": [1, 8, 8], "binarize": "static",
                         "threshold": 0.5, "n_train": 1257}
    again = DigitsData({"binarize": "static"})
    again.setup("fit")
    assert torch.equal(dm.test_set.images, again.test_set.images)  # split fixed by the seed
    assert set(dm.train_set.images.unique().tolist()) == {0.0, 1.0}


def test_digits_dynamic_binarisation_is_keyed_by_epoch():
    dm = DigitsData({"binarize": "dynamic", "batch_size": 1257})
    dm.setup("fit")
    loader = dm.train_dataloader()
    loader.sampler.set_epoch(0)
    a = next(iter(loader))[0]
    b = next(iter(loader))[0]
    loader.sampler.set_epoch(1)
    c = next(iter(loader))[0]
    assert torch.equal(a, b)  # same (seed, epoch): same draws, so resumed runs replay them
    assert not torch.equal(a.sum(0), c.sum(0))  # a new epoch: fresh draws (and order)
    assert set(a.unique().tolist()) == {0.0, 1.0}
    # fresh Bernoulli draws average to the grey intensities: mean pixel within 0.01 of the truth
    assert abs(a.mean().item() - dm.train_set.images.mean().item()) < 0.01
    # validation / test are binarised once, so their metrics are comparable between epochs
    assert torch.equal(dm.val_set[0][0], dm.val_set[0][0])


def test_bad_binarize_option():
    with pytest.raises(UserError, match="binarize"):
        DigitsData({"binarize": "otsu"}).setup("fit")
