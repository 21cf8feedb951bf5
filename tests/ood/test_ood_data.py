"""The OOD datamodules: fixed splits, disjoint OOD sets, and real formats read from tiny files."""

import re
import sys
import warnings
from pathlib import Path

import pytest
import torch

from zoo.errors import UserError
from zoo.models.ood.data import LETTERS, OODDigits, OODImages, OODToy2D, blends, letters

sys.path.insert(0, str(Path(__file__).parent))
from tiny_ood_files import write_cifar10, write_image_folder, write_mnist, write_svhn  # noqa: E402


def _digits(**cfg):
    dm = OODDigits(cfg)
    dm.setup()
    return dm


def test_digits_splits_are_fixed_and_disjoint():
    dm, other = _digits(), _digits(seed=5)  # the run's seed only shuffles; splits stay
    p = dm.parts
    assert [len(p[s][0]) for s in ("train", "val", "test")] == [1257, 180, 360]
    assert torch.equal(p["test"][0], other.parts["test"][0])
    info = dm.info()
    assert info["ood_sets"] == ["photos", "uniform", "gaussian", "rot90", "blends", "letters"]
    assert info["input_shape"] == [1, 8, 8]
    assert not info["ood_train"] and p["train_ood"] is None
    for name in info["ood_sets"]:
        val, test = p["val_ood"][name].flatten(1), p["test_ood"][name].flatten(1)
        assert len(test) == 360 and len(val) == 180
        assert test.min() >= 0 and test.max() <= 1
        assert torch.cdist(val, test).min() > 0, f"{name}: a validation image is also a test image"
    assert torch.equal(p["test_ood"]["rot90"], torch.rot90(p["test"][0], 1, dims=(2, 3)))


def test_blends_are_means_of_two_digits_of_different_classes_drawn_the_same_for_a_seed():
    x = torch.eye(6).view(6, 1, 2, 3)  # image i: pixel i lit
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    b = blends(x, y, 50, seed=3)
    assert b.shape == (50, 1, 2, 3) and b.min() >= 0 and b.max() <= 1
    lit = b.flatten(1).nonzero()[:, 1].view(50, 2)  # each blend: two pixels at 0.5, of two classes
    assert (b.flatten(1).sum(1) == 1).all() and (y[lit[:, 0]] != y[lit[:, 1]]).all()
    assert torch.equal(b, blends(x, y, 50, seed=3)) and not torch.equal(b, blends(x, y, 50, seed=4))


def test_letters_are_8x8_grey_glyphs_drawn_the_same_for_a_seed():
    a = letters(LETTERS["test"], 20, seed=7)
    assert a.shape == (20, 1, 8, 8) and a.min() >= 0 and a.max() <= 1
    assert (a.flatten(1).max(1).values > 0.5).all()  # ink in every image
    assert torch.equal(a, letters(LETTERS["test"], 20, seed=7)) and not torch.equal(a, letters(LETTERS["test"], 20, 8))
    assert not set(LETTERS["val"]) & set(LETTERS["test"])  # validation and test letters are other glyphs


def test_digits_explicit_ood_training_set_is_another_photo():
    dm = _digits(ood_train=True)
    train_ood = dm.parts["train_ood"].flatten(1)
    assert dm.info()["ood_train"] and len(train_ood) == 1257
    assert torch.cdist(train_ood, dm.parts["test_ood"]["photos"].flatten(1)).min() > 0
    batch = next(iter(dm.train_dataloader()))[0]  # CombinedLoader yields (batch, batch_idx, loader_idx)
    assert set(batch) == {"in", "out"} and batch["out"][0].shape == (64, 1, 8, 8)


def test_toy2d_classes_and_loaders():
    dm = OODToy2D({})
    dm.setup()
    x, y = dm.parts["train"]
    assert x.shape == (2000, 2) and set(y.tolist()) == {0, 1}
    assert (x[y == 0, 0].mean() + 2).abs() < 0.1 and (x[y == 1, 0].mean() - 2).abs() < 0.1
    assert len(dm.val_dataloader()) == 3 and dm.info()["ood_sets"] == ["box", "ring"]


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_idx_files_with_fashion_mnist_as_ood(tmp_path, gz):
    write_mnist(tmp_path, "mnist", gz=gz)
    write_mnist(tmp_path, "FashionMNIST/raw", n_test=12, gz=not gz)
    write_image_folder(tmp_path / "letters", n=5)
    dm = OODImages({"root": str(tmp_path), "dataset": "mnist", "val_size": 10, "ood_val_size": 3, "noise_size": 7,
                    "ood": ["fashion_mnist", "folder:letters", "uniform"]})
    dm.setup()
    info = dm.info()
    assert info["input_shape"] == [1, 28, 28] and info["num_classes"] == 10
    assert info["ood_sets"] == ["fashion_mnist", "letters", "uniform"]
    assert len(dm.parts["train"][0]) == 50 and dm.parts["train"][0].dtype == torch.uint8
    assert [len(dm.parts["test_ood"][n]) for n in info["ood_sets"]] == [9, 3, 7]  # 12-3, 5-2, noise
    x, y = dm.test_set[0]
    assert x.dtype == torch.float32 and 0 <= x.min() and x.max() <= 1


def test_mnist_where_data_readme_has_torchvision_download_it(tmp_path):
    """torchvision.datasets.MNIST(root="data/mnist", download=True) writes data/mnist/MNIST/raw/: found
    there as the VAE's reader finds it."""
    write_mnist(tmp_path, "mnist/MNIST/raw")
    dm = OODImages({"root": str(tmp_path), "dataset": "mnist", "val_size": 10, "ood": ["uniform"]})
    dm.setup()
    assert len(dm.parts["train"][0]) == 50 and dm.info()["input_shape"] == [1, 28, 28]


def test_cifar10_binary_and_svhn_mat(tmp_path):
    write_cifar10(tmp_path)
    write_svhn(tmp_path)
    dm = OODImages({"root": str(tmp_path), "dataset": "cifar10", "val_size": 10, "ood_val_size": 5, "ood": ["svhn"]})
    dm.setup()
    assert dm.parts["train"][0].shape == (50, 3, 32, 32) and len(dm.parts["test"][0]) == 20
    assert sorted(set(dm.parts["test"][1].tolist())) == list(range(10))
    dm = OODImages({"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood": ["cifar10"]})
    dm.setup()
    # SVHN's label 10 is the digit 0
    assert sorted(set(dm.parts["test"][1].tolist())) == list(range(10))


def test_missing_or_empty_data_names_the_path(tmp_path):
    # each message names the folder looked in and the files expected there
    root = re.escape(str(tmp_path))
    with pytest.raises(UserError, match=rf"{root}/cifar-10-batches-bin lacks data_batch_1.bin.*test_batch.bin"):
        OODImages({"root": str(tmp_path), "dataset": "cifar10"}).setup()
    with pytest.raises(UserError, match=rf"train_32x32.mat and test_32x32.mat in {root}/svhn"):
        OODImages({"root": str(tmp_path), "dataset": "svhn"}).setup()
    with pytest.raises(UserError, match=rf"(?s)train-images-idx3-ubyte.*t10k-labels-idx1-ubyte.*in {root}/mnist"):
        OODImages({"root": str(tmp_path), "dataset": "mnist"}).setup()
    with pytest.raises(UserError, match=rf"in {root}/fashion_mnist, {root}/fashion_mnist/FashionMNIST/raw, "
                                        rf"{root}/FashionMNIST/raw"):
        OODImages({"root": str(tmp_path), "dataset": "fashion_mnist"}).setup()
    write_svhn(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=rf"OOD image folder not found: {root}/nope \(a folder of PNG/JPEG"):
        OODImages({"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood": ["folder:nope"]}).setup()
    with pytest.raises(UserError, match="holds no images"):
        OODImages({"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood": ["folder:empty"]}).setup()
    with pytest.raises(UserError, match="needs data.ood_train_folder"):
        OODImages({"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood_train": True}).setup()
    (tmp_path / "cifar-10-batches-bin").mkdir()
    for n in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        (tmp_path / "cifar-10-batches-bin" / n).write_bytes(b"\x00" * 100)
    with pytest.raises(UserError, match="not a CIFAR-10 binary batch"):
        OODImages({"root": str(tmp_path), "dataset": "cifar10"}).setup()


def test_cifar10_read_from_the_downloaded_tarball(tmp_path):
    """cifar-10-binary.tar.gz as downloaded gives the extracted folder's tensors (nothing unpacked to
    disk); a damaged one, one of another dataset and torchvision's pickled folder get messages that say so."""
    import tarfile

    from zoo.models.ood.readers import load_cifar10

    write_cifar10(tmp_path / "extracted")
    packed = tmp_path / "packed"
    packed.mkdir()
    with tarfile.open(packed / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "extracted" / "cifar-10-batches-bin", arcname="cifar-10-batches-bin")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns of read-only arrays from np.frombuffer
        for a, b in zip(load_cifar10(tmp_path / "extracted"), load_cifar10(packed)):
            assert torch.equal(a, b)
    assert sorted(p.name for p in packed.iterdir()) == ["cifar-10-binary.tar.gz"]
    whole = (packed / "cifar-10-binary.tar.gz").read_bytes()
    (packed / "cifar-10-binary.tar.gz").write_bytes(whole[: len(whole) // 2])  # a download stopped half way
    with pytest.raises(UserError, match="cifar-10-binary.tar.gz cannot be read to its end.*download it again"):
        load_cifar10(packed)
    with tarfile.open(packed / "cifar-10-binary.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "extracted" / "cifar-10-batches-bin" / "test_batch.bin", arcname="x/test_batch.bin")
    with pytest.raises(UserError, match=r"(?s)not CIFAR-10's binary release.*\n  lacks data_batch_1.bin"):
        load_cifar10(packed)
    (tmp_path / "py" / "cifar-10-batches-py").mkdir(parents=True)
    with pytest.raises(UserError, match="cifar-10-batches-py/ \\(the pickled Python release.*never unpickled"):
        load_cifar10(tmp_path / "py")


def test_ood_image_folder_read_from_its_archive_as_downloaded(tmp_path):
    """ODIN's LSUN_resize.tar.gz (or a .tar / .zip) as downloaded gives the unpacked folder's images,
    pixel for pixel, also when folder:LSUN_resize names the missing folder beside the archive; the set
    keeps the folder's name; a damaged archive is a UserError naming it."""
    import tarfile
    import zipfile

    from zoo.models.ood.readers import load_folder

    folder = tmp_path / "unpacked" / "LSUN_resize"
    write_image_folder(folder, n=6)
    unpacked = load_folder(folder, [3, 32, 32])
    with tarfile.open(tmp_path / "LSUN_resize.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname="LSUN_resize")
    with zipfile.ZipFile(tmp_path / "Imagenet_resize.zip", "w") as z:
        for f in sorted(folder.iterdir()):
            z.write(f, f"Imagenet_resize/{f.name}")
        z.writestr("__MACOSX/Imagenet_resize/._img0.jpg", b"not an image")
    for path in ("LSUN_resize.tar.gz", "LSUN_resize", "Imagenet_resize.zip", "Imagenet_resize"):
        assert torch.equal(load_folder(tmp_path / path, [3, 32, 32]), unpacked), path
    write_svhn(tmp_path)
    dm = OODImages({"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood_val_size": 2,
                    "ood": ["folder:LSUN_resize.tar.gz", "folder:Imagenet_resize"]})
    dm.setup()
    assert dm.info()["ood_sets"] == ["LSUN_resize", "Imagenet_resize"]
    (tmp_path / "iSUN.tar.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 50)  # gzip's magic, then nothing of one
    with pytest.raises(UserError, match=r"iSUN.tar.gz is neither a folder nor a readable tar / zip archive"):
        load_folder(tmp_path / "iSUN", [3, 32, 32])


def test_ood_sets_named_twice_or_trained_on_are_refused(tmp_path):
    """folder:a/LSUN and folder:b/LSUN (the second replaced the first in the tables), a set listed twice,
    and the OOD training folder among the test sets (its images trained on, then tested) are refused."""
    write_svhn(tmp_path)
    for sub in ("a/LSUN", "b/LSUN", "train_ood"):
        write_image_folder(tmp_path / sub, n=4)
    opts = {"root": str(tmp_path), "dataset": "svhn", "val_size": 10, "ood_val_size": 1}
    with pytest.raises(UserError, match="data.ood names two sets called 'LSUN'"):
        OODImages({**opts, "ood": ["folder:a/LSUN", "folder:b/LSUN"]}).setup()
    with pytest.raises(UserError, match="data.ood lists a set twice"):
        OODImages({**opts, "ood": ["uniform", "uniform"]}).setup()
    with pytest.raises(UserError, match="data.ood_train_folder=train_ood is also the test set folder:train_ood"):
        OODImages({**opts, "ood": ["folder:train_ood"], "ood_train": True, "ood_train_folder": "train_ood"}).setup()
    dm = OODImages({**opts, "ood": ["folder:a/LSUN"], "ood_train": True, "ood_train_folder": "train_ood"})
    dm.setup()
    assert dm.info()["ood_sets"] == ["LSUN"] and len(dm.parts["train_ood"]) == 4


def test_a_model_trained_before_a_set_was_added_names_its_metrics_by_the_data_it_meets():
    from zoo.models.ood.module import OODClassifier

    info = _digits().info()
    model = OODClassifier({"mode": "ce"}, {**info, "ood_sets": info["ood_sets"][:4]})  # a checkpoint without blends
    model.check_data(info)  # Lightning's setup, before validation or test
    assert model.data_info["ood_sets"] == info["ood_sets"]  # the test metrics' names: every loader is scored
