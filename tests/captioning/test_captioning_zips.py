"""Caption images read from the zips they are downloaded as (Flickr8k_Dataset.zip holds
Flicker8k_Dataset/<name>.jpg; COCO's train2014.zip and val2014.zip hold train2014/..., val2014/...),
written here in that layout from the tiny Karpathy files."""

import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from tests.captioning.tiny_karpathy import write_tiny_karpathy
from zoo.errors import UserError
from zoo.models.captioning.data import KarpathyData


def _zip_folder(folder: Path, archive: Path, top: str) -> None:
    """Every file under ``folder`` as <top>/<file name>, plus the __MACOSX entry a Mac's zip adds."""
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f"{top}/{f.name}")
        z.writestr(f"__MACOSX/{top}/._junk.jpg", b"not an image")


def _all_images(dm: KarpathyData) -> dict[str, list[torch.Tensor]]:
    dm.setup()
    return {name: [s.load_image(i) for i in range(len(s.refs))] for name, s in dm.sets.items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        len(a[k]) == len(b[k]) and all(torch.equal(x, y) for x, y in zip(a[k], b[k])) for k in a)


OPTS = {"image_size": 24, "min_freq": 1, "num_workers": 0, "batch_size": 2}


def test_flickr8k_images_from_the_zip_as_downloaded(tmp_path):
    """No image folder, Flickr8k_Dataset.zip in <root>/flickr8k/: the same images, pixel for pixel, as
    from the unzipped folder; data.image_dir=the zip gives them too."""
    base = tmp_path / "flickr8k"
    _, images = write_tiny_karpathy(base, "flickr8k")
    from_folder = _all_images(KarpathyData({**OPTS, "root": str(tmp_path)}))
    _zip_folder(images, base / "Flickr8k_Dataset.zip", "Flicker8k_Dataset")
    shutil.rmtree(images)
    assert _same(_all_images(KarpathyData({**OPTS, "root": str(tmp_path)})), from_folder)
    explicit = KarpathyData({**OPTS, "root": str(tmp_path), "image_dir": str(base / "Flickr8k_Dataset.zip")})
    assert _same(_all_images(explicit), from_folder)


def test_coco_images_from_train2014_and_val2014_zips(tmp_path):
    """COCO's two zips, found by the entries' filepath (train2014 / val2014); restval joins training."""
    base = tmp_path / "coco"
    _, images = write_tiny_karpathy(base, "coco")
    from_folder = _all_images(KarpathyData({**OPTS, "root": str(tmp_path), "dataset": "coco"}))
    for split in ("train2014", "val2014"):
        _zip_folder(images / split, base / f"{split}.zip", split)
    shutil.rmtree(images)
    from_zips = KarpathyData({**OPTS, "root": str(tmp_path), "dataset": "coco"})
    assert _same(_all_images(from_zips), from_folder)
    assert len(from_zips.sets["train"].refs) == 6  # of the 10: 5 train + 1 restval


def test_zip_images_through_dataloader_workers(tmp_path):
    """Two DataLoader worker processes each open the zip themselves: a whole epoch of batches."""
    base = tmp_path / "flickr8k"
    _, images = write_tiny_karpathy(base, "flickr8k")
    _zip_folder(images, base / "Flickr8k_Dataset.zip", "Flicker8k_Dataset")
    shutil.rmtree(images)
    dm = KarpathyData({**OPTS, "root": str(tmp_path), "num_workers": 2})
    dm.setup()
    batches = list(dm.train_dataloader())
    assert sum(len(b["image"]) for b in batches) == len(dm.sets["train"])
    assert all(b["image"].shape[1:] == (3, 24, 24) and torch.isfinite(b["image"]).all() for b in batches)


def test_zip_mistakes_are_user_errors(tmp_path):
    base = tmp_path / "flickr8k"
    _, images = write_tiny_karpathy(base, "flickr8k")
    shutil.rmtree(images)
    opts = {**OPTS, "root": str(tmp_path)}
    with pytest.raises(UserError, match=r"(?s)image folder not found: .*\(or their zips.*looked for: .*images.*"
                                        r"the zips as downloaded, in .*flickr8k"):
        KarpathyData(opts).setup()
    archive = base / "Flickr8k_Dataset.zip"
    archive.write_bytes(b"PK\x03\x04" + b"\x00" * 64)  # a zip's first bytes, then nothing of one
    with pytest.raises(UserError, match="Flickr8k_Dataset.zip is not a readable zip"):
        KarpathyData(opts).setup()
    with zipfile.ZipFile(archive, "w") as z:  # one image short
        z.writestr("Flicker8k_Dataset/0_img.png", b"x")
    with pytest.raises(UserError, match=r"(?s)image file\(s\) of split 'train' .* missing: .*\n  looked in "
                                        r".*Flickr8k_Dataset.zip\n  e\.g\. 1_img.jpg"):
        KarpathyData(opts).setup()
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(UserError, match="is a file but not a zip"):
        KarpathyData({**opts, "image_dir": str(text)}).setup()


def test_damaged_image_in_zip_is_a_user_error(tmp_path):
    """A member whose bytes do not match its CRC (a damaged download) is named, with what to do."""
    base = tmp_path / "flickr8k"
    _, images = write_tiny_karpathy(base, "flickr8k")
    archive = base / "Flickr8k_Dataset.zip"
    _zip_folder(images, archive, "Flicker8k_Dataset")
    shutil.rmtree(images)
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("Flicker8k_Dataset/0_img.png")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 40] ^= 0xFF  # inside the stored PNG bytes
    archive.write_bytes(bytes(data))
    dm = KarpathyData({**OPTS, "root": str(tmp_path)})
    dm.setup()
    with pytest.raises(UserError, match=r"Flicker8k_Dataset/0_img.png in Flickr8k_Dataset.zip cannot be read: .*"
                                        r"download the zip again"):
        dm.sets["train"].load_image(0)
