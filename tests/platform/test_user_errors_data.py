"""User mistakes with the data files of the real-data recipes (MNIST, Omniglot, CIFAR-10, SVHN,
Karpathy splits, text, oracle parameters): one message naming the file and how to fix it, exit
status 2, no traceback, no run folder (training's own mistakes: test_user_errors.py)."""

import sys
from pathlib import Path

import lightning  # noqa: F401  (imported here, not first inside a test: its log handler keeps the real stderr)
import numpy as np
import pytest
from platform_testlib import run_main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "ood"))
from tiny_ood_files import write_cifar10  # noqa: E402


def one_message(err: str) -> bool:
    """One 'error:' line (what is wrong and the fix), its details, if any, indented below it."""
    first, *details = err.strip().splitlines()
    return first.startswith("error: ") and all(line.startswith("  ") for line in details)


MNIST = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def write_mnist(folder: Path, spoil) -> None:
    """The four IDX files (gzipped), then ``spoil(folder)`` breaks one of them."""
    from zoo.models.vae.data import write_idx

    for name in MNIST:
        shape = (30, 28, 28) if "images" in name else (30,)
        write_idx(folder / f"{name}.gz", np.zeros(shape, np.uint8))
    spoil(folder)


def truncated_gz(folder: Path) -> None:  # else an EOFError from gzip.decompress
    raw = (folder / f"{MNIST[0]}.gz").read_bytes()
    (folder / f"{MNIST[0]}.gz").write_bytes(raw[: len(raw) // 2])


def empty_file(folder: Path) -> None:  # said "bad magic number " (blank)
    (folder / f"{MNIST[0]}.gz").unlink()
    (folder / MNIST[0]).write_bytes(b"")


def folder_for_file(folder: Path) -> None:  # said "MNIST not found"
    (folder / f"{MNIST[1]}.gz").unlink()
    (folder / MNIST[1]).mkdir()


def label_out_of_range(folder: Path) -> None:  # a well-formed IDX file with a label no digit has
    from zoo.models.vae.data import write_idx

    write_idx(folder / f"{MNIST[3]}.gz", np.full(30, 200, np.uint8))


@pytest.mark.parametrize("spoil, expected", [
    (truncated_gz, "is a truncated or corrupt .gz file"),
    (empty_file, "is empty, not an IDX file"),
    (folder_for_file, "is a folder, but MNIST's IDX file of that name is expected there"),
    (label_out_of_range, "holds label 200, but MNIST's labels are the digits 0-9"),
])
def test_broken_mnist_files(spoil, expected, tmp_path, capsys):
    write_mnist(tmp_path / "data" / "mnist", spoil)
    code, err = run_main(["recipe=vae_mnist", f"data.root={tmp_path / 'data'}", "data.val_size=5",
                          f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert ("download the file again" in err or "replace it with the file" in err) and str(tmp_path) in err
    assert one_message(err) and not (tmp_path / "runs").exists()


def test_data_root_that_is_a_file(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("")  # said "MNIST not found in notes.txt/mnist"
    code, err = run_main(["recipe=vae_mnist", f"data.root={tmp_path / 'notes.txt'}", f"run_dir={tmp_path}/runs"],
                         capsys)
    assert code == 2 and "is a file, not a folder" in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_omniglot_png_that_is_not_an_image(tmp_path, capsys):
    for split in ("images_background", "images_evaluation"):  # else PIL's UnidentifiedImageError
        char = tmp_path / "omniglot" / split / "Alphabet" / "character01"
        char.mkdir(parents=True)
        (char / "1.png").write_bytes(b"not a png")
    code, err = run_main(["recipe=maml_omniglot_5w1s", f"data.root={tmp_path}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "1.png is not a readable image" in err and "unzip it again" in err, err
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def svhn_not_a_mat_file(root: Path) -> None:  # else scipy's MatReadError
    (root / "svhn").mkdir()
    for name in ("train_32x32.mat", "test_32x32.mat"):
        (root / "svhn" / name).write_bytes(b"junk")


def svhn_label_out_of_range(root: Path) -> None:  # else read as label 11 % 10 = 1
    from scipy.io import savemat

    (root / "svhn").mkdir()
    for name in ("train_32x32.mat", "test_32x32.mat"):
        savemat(str(root / "svhn" / name), {"X": np.zeros((32, 32, 3, 4), np.uint8), "y": np.full((4, 1), 11)})


def cifar_label_out_of_range(root: Path) -> None:  # else 256 classes, and a failure after the run folder
    write_cifar10(root)
    batch = root / "cifar-10-batches-bin" / "data_batch_2.bin"
    raw = bytearray(batch.read_bytes())
    raw[0] = 255
    batch.write_bytes(bytes(raw))


@pytest.mark.parametrize("recipe, spoil, expected", [
    ("ood_svhn_ce", svhn_not_a_mat_file, "train_32x32.mat is not an SVHN .mat file"),
    ("ood_svhn_ce", svhn_label_out_of_range, "train_32x32.mat holds label 11, but this dataset's labels are 1-10"),
    ("ood_cifar10_ce", cifar_label_out_of_range, "data_batch_2.bin holds label 255, but this dataset's labels are 0-9"),
])
def test_broken_ood_dataset_files(recipe, spoil, expected, tmp_path, capsys):
    spoil(tmp_path)
    code, err = run_main([f"recipe={recipe}", f"data.root={tmp_path}", "data.val_size=2", f"run_dir={tmp_path}/runs"],
                         capsys)
    assert code == 2 and expected in err and "download it again" in err.lower() and "Traceback" not in err, err
    assert one_message(err) and not (tmp_path / "runs").exists()


def test_a_missing_ood_set_says_it_can_be_dropped(tmp_path, capsys):
    write_cifar10(tmp_path)  # SVHN serves only as an OOD set of this recipe
    code, err = run_main(["recipe=ood_cifar10_ce", f"data.root={tmp_path}", "data.val_size=10",
                          f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "SVHN not found" in err and "drop it from data.ood" in err, err
    assert "data.ood=[folder:LSUN_resize,folder:Imagenet_resize,uniform,gaussian]" in err
    assert not (tmp_path / "runs").exists()


def test_karpathy_split_file_that_is_a_folder(tmp_path, capsys):
    (tmp_path / "flickr8k" / "dataset_flickr8k.json").mkdir(parents=True)  # said "not found"
    (tmp_path / "flickr8k" / "images").mkdir()
    code, err = run_main(["recipe=sat_flickr8k", f"data.root={tmp_path}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and "dataset_flickr8k.json is a folder" in err and "data.json=PATH" in err, err
    assert not (tmp_path / "runs").exists()


def random_bytes(tmp_path: Path) -> Path:  # else trained on, read with errors="replace"
    path = tmp_path / "corpus.txt"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 30_000, dtype=np.uint8).tobytes())
    return path


@pytest.mark.parametrize("make, override, expected", [
    (random_bytes, "data.path", "is not UTF-8 text"),
    (lambda tmp_path: tmp_path, "data.path", "is a folder: give the text file inside it"),  # said "not found"
    (lambda tmp_path: tmp_path / "params.npz", "data.oracle_params", "is not a valid .npz of oracle parameters"),
])
def test_bad_seqgan_inputs(make, override, expected, tmp_path, capsys):
    (tmp_path / "params.npz").write_text("junk\n")  # numpy's reply blamed allow_pickle
    recipe = "seqgan_oracle_small" if override == "data.oracle_params" else "seqgan_text"
    code, err = run_main([f"recipe={recipe}", f"{override}={make(tmp_path)}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert one_message(err) and not (tmp_path / "runs").exists()
