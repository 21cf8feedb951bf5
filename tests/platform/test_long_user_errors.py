"""Long user errors (zoo.errors.UserError): the first line says what is wrong and the fix, the files, lists and
addresses go to the details below it, so that a long path does not make the first line long. Each message here
is provoked with a file whose path is over 200 characters."""

import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from zoo.errors import FIRST_LINE, UserError, reads_well


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    """A folder whose path is over 200 characters (a cluster's scratch space, say)."""
    folder = tmp_path.joinpath(*["a-long-folder-name-on-a-shared-cluster"] * 5)
    folder.mkdir(parents=True)
    assert len(str(folder)) > FIRST_LINE
    return folder


def refused(call, *args) -> UserError:
    """The UserError ``call(*args)`` raises, checked to read well and to name the path on a details line."""
    with pytest.raises(UserError) as info:
        call(*args)
    err = info.value
    assert reads_well(err) and len(err.message) <= FIRST_LINE, str(err)
    return err


def named(err: UserError, path: Path) -> bool:
    return any(str(path) in line for line in err.details)


def test_text_that_is_not_utf8(deep):
    from zoo.core.files import open_utf8, refuse_binary

    latin = deep / "similarity.txt"
    latin.write_bytes("café 1.0\n".encode("latin-1"))

    def read():
        with open_utf8(latin, "similarity file") as f:
            f.read()

    err = refused(read)
    assert "not UTF-8" in err.message and named(err, latin) and any("iconv -f latin1" in d for d in err.details)
    err = refused(refuse_binary, "\x00\x01" * 100, latin, "give a UTF-8 text file")
    assert "not UTF-8" in err.message and "give a UTF-8 text file" in err.message and named(err, latin)


def test_a_zip_of_several_text_files(deep):
    from zoo.core.files import open_text

    path = deep / "corpus.zip"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(3):
            z.writestr(f"part{i}.txt", "a b c\n")

    def read():
        with open_text(path, "corpus file") as f:
            f.read()

    err = refused(read)
    assert "zip of 3 files" in err.message and named(err, path) and "part0.txt" in str(err)


def test_seqgan_oracle_files(deep):
    from zoo.models.seqgan.oracle import load_oracle_npz

    missing = deep / "absent.npz"
    assert named(refused(load_oracle_npz, missing), missing)
    not_zip = deep / "oracle.npz"
    not_zip.write_bytes(b"not a zip at all")
    err = refused(load_oracle_npz, not_zip)
    assert "is not a valid .npz" in err.message and named(err, not_zip)
    bad_zip = deep / "broken.npz"
    bad_zip.write_bytes(b"PK\x03\x04 cut short")
    err = refused(load_oracle_npz, bad_zip)
    assert "is not a valid .npz" in err.message and named(err, bad_zip)
    wrong = deep / "wrong.npz"
    np.savez(wrong, embedding=np.zeros((3, 2)))
    err = refused(load_oracle_npz, wrong)
    assert "wrong keys" in err.message and named(err, wrong) and "U_f" in str(err)


def test_cifar_archive_that_lacks_batches(deep):
    from zoo.models.ood.readers import CIFAR_ARCHIVE, CIFAR_URL, load_cifar10

    with tarfile.open(deep / CIFAR_ARCHIVE, "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-bin/data_batch_1.bin")
        info.size = 3073
        tar.addfile(info, io.BytesIO(bytes(3073)))
    err = refused(load_cifar10, deep)
    assert "lacks 5 of CIFAR-10's batches" in err.message and named(err, deep / CIFAR_ARCHIVE)
    assert any(CIFAR_URL in d for d in err.details) and "test_batch.bin" in str(err)


def test_karpathy_split_files(deep):
    from zoo.models.captioning.config import KarpathyConfig
    from zoo.models.captioning.data import KarpathyData, check_karpathy_images

    json_path = deep / "dataset_flickr8k.json"
    err = refused(check_karpathy_images, [{"filename": "a.jpg", "split": "train"}], json_path)
    assert "has no 'sentences' list" in err.message and named(err, json_path) and "'tokens'" in str(err)
    json_path.write_text(json.dumps({"pictures": []}))
    (deep / "images").mkdir()
    dm = KarpathyData(KarpathyConfig(root=str(deep.parent), dataset=deep.name, json=str(json_path),
                                     image_dir=str(deep / "images")))
    err = refused(dm.setup, "fit")
    assert "not a Karpathy split file" in err.message and named(err, json_path) and "'images'" in str(err)


def test_idx_files(deep):
    from zoo.models.vae.data import MNIST_URL, read_idx

    path = deep / "train-images-idx3-ubyte"
    path.write_bytes(b"\x00\x00\x08\x03" + bytes(5))
    err = refused(read_idx, path)
    assert "truncated" in err.message and named(err, path) and any(MNIST_URL in d for d in err.details)


def test_checkpoints_and_run_folders(deep):
    from zoo.loading import check_checkpoint_file
    from zoo.run_folder import check_writable

    ckpt = deep / "last.ckpt"
    ckpt.write_bytes(b"garbage")
    err = refused(check_checkpoint_file, ckpt)
    assert "not a PyTorch file" in err.message and named(err, ckpt)
    (deep / "link").symlink_to(deep / "nowhere")
    err = refused(check_writable, deep / "link" / "runs")
    assert "symbolic link" in err.message and named(err, deep / "link")


def test_an_unknown_name_lists_the_known_ones_below():
    from zoo.registry import ESTIMATORS

    err = refused(ESTIMATORS.entry, "rlooo")
    assert "unknown estimator 'rlooo' (did you mean: rloo" in err.message
    assert err.details[0].startswith("Known: ") and "gumbel_softmax" in err.details[0]


def test_a_detail_of_several_lines_is_indented_line_by_line():
    """Another library's error of several lines (tarfile's, say) stays below the message, each line indented."""
    err = UserError("what is wrong: the fix", details=["file: x.tar.gz", "error: could not open:\n- gz: not gzip"])
    assert err.details == ["file: x.tar.gz", "error: could not open:", "- gz: not gzip"]
    assert str(err) == "what is wrong: the fix\n  file: x.tar.gz\n  error: could not open:\n  - gz: not gzip"
