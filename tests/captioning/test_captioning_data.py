"""Shapes scenes generator and the Karpathy-split loader (on tiny files written here)."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from zoo.errors import UserError
from zoo.models.captioning import shapes as S
from zoo.models.captioning.data import KarpathyData, ShapesData
from zoo.models.captioning.vocab import SPECIALS, Vocab, build_vocab, collate_captions


def test_shapes_generator_is_deterministic_and_splits_differ():
    a = S.generate_split(20, seed=3, split="train")
    b = S.generate_split(20, seed=3, split="train")
    assert np.array_equal(a.images, b.images) and a.refs == b.refs
    c = S.generate_split(20, seed=3, split="test")
    d = S.generate_split(20, seed=4, split="train")
    assert not np.array_equal(a.images, c.images) and a.refs != d.refs


def test_captions_name_every_object_and_masks_match_pixels():
    sp = S.generate_split(60, seed=0, split="val")
    counts = set()
    for img, scene, refs in zip(sp.images, sp.scenes, sp.refs):
        counts.add(len(scene))
        assert len(refs) == 3 and len(set(refs)) == 3  # three different phrasings
        masks = S.scene_masks(scene, 64)
        assert masks.sum(0).max() <= 1  # objects never overlap
        for k, o in enumerate(scene):
            assert all(f"{o.colour} {o.shape}" in r for r in refs)  # every reference names every object
            pix = img[:, masks[k] > 0].astype(float) / 255  # (3, n) pixels of the object
            assert masks[k].sum() > 10
            assert np.abs(pix.mean(1) - np.array(S.COLOURS[o.colour])).max() < 0.08  # painted in its colour
        if len(scene) == 2:  # the stated relation is the geometric one
            a, b = sorted(scene, key=lambda o: o.cx)
            r = S.relation(a, b)
            assert f"{a.phrase()} {r} {b.phrase()}" == refs[0]
            dx, dy = b.cx - a.cx, b.cy - a.cy
            assert (r == "left of") == (abs(dx) >= abs(dy) and dx > 0)
    assert counts == {1, 2, 3}


def test_shapes_datamodule_batches_and_info():
    dm = ShapesData({"n_train": 12, "n_val": 6, "n_test": 6, "batch_size": 4})
    info = dm.info()
    assert info["vocab"][:4] == SPECIALS and "circle" in info["vocab"] and "left" in info["vocab"]
    assert isinstance(info["baseline_caption"], str)
    assert len(dm.sets["train"]) == 36  # 12 scenes x 3 references
    batch = next(iter(dm.test_dataloader()))
    assert batch["image"].shape == (4, 3, 64, 64) and batch["image"].max() <= 1
    assert batch["obj_masks"].shape == (4, 3, 64, 64) and batch["obj_words"].shape == (4, 3, 2)
    vocab = Vocab(info["vocab"])
    for b in range(4):
        caption = vocab.decode(batch["caption"][b, 1:].tolist())
        assert caption == batch["refs"][b][0]  # first reference, round-tripped through the vocabulary
        for colour, shape in batch["obj_words"][b].tolist():
            if colour >= 0:
                assert f"{vocab.tokens[colour]} {vocab.tokens[shape]}" in caption
    assert (batch["caption"][:, 0] == vocab.start).all()
    assert (batch["length"] == (batch["caption"] != 0).sum(1) - 1).all()


def test_vocab_min_frequency_and_unknown_words():
    tokens = build_vocab(["a b c", "a b", "a d"], min_freq=2)
    assert tokens == [*SPECIALS, "a", "b"]  # count descending; c, d seen once
    v = Vocab(tokens)
    assert v.encode_batch(["a zebra b"], max_len=10) == [[1, 4, 3, 5, 2]]
    assert v.encode_batch(["a b a b"], max_len=2) == [[1, 4, 5, 2]]  # cut to max_len words
    assert v.decode([4, 3, 5, 2, 4]) == "a <unk> b"


def _write_karpathy(root, with_filepath=True):
    (root / "images" / "sub").mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = []
    for i, split in enumerate(["train", "train", "restval", "val", "test"]):
        name = f"im{i}.png" if i % 2 == 0 else f"im{i}.jpg"
        folder = root / "images" / ("sub" if with_filepath else "")
        Image.fromarray(rng.integers(0, 255, (40, 50, 3), dtype=np.uint8)).save(folder / name)
        entry = {"filename": name, "split": split, "imgid": i,
                 "sentences": [{"tokens": ["a", "dog", "runs"]}, {"tokens": ["a", "dog", "on", f"grass{i}"]}]}
        if with_filepath:
            entry["filepath"] = "sub"
        images.append(entry)
    (root / "dataset_flickr8k.json").write_text(json.dumps({"images": images, "dataset": "flickr8k"}))


def test_karpathy_loader_on_tiny_files(tmp_path):
    _write_karpathy(tmp_path)
    cfg = {"root": str(tmp_path), "json": str(tmp_path / "dataset_flickr8k.json"),
           "image_dir": str(tmp_path / "images"), "image_size": 32, "min_freq": 2, "batch_size": 2,
           "num_workers": 0}
    dm = KarpathyData(cfg)
    info = dm.info()
    assert info["vocab"] == [*SPECIALS, "a", "dog", "on", "runs"]  # ties alphabetical; grass<i> -> <unk>
    assert len(dm.sets["train"]) == 6 and len(dm.sets["val"]) == 1  # restval joined train: 3 images x 2
    batch = collate_captions([dm.sets["train"][i] for i in range(2)])
    assert batch["image"].shape == (2, 3, 32, 32)
    assert batch["refs"][0] == ["a dog runs", "a dog on grass0"]
    assert Vocab(info["vocab"]).decode(batch["caption"][1].tolist()[1:]) == "a dog on <unk>"
    assert abs(float(batch["image"].mean())) < 1.0  # ImageNet-normalised


def test_karpathy_default_layout_without_filepath(tmp_path):
    _write_karpathy(tmp_path / "flickr8k", with_filepath=False)
    dm = KarpathyData({"root": str(tmp_path), "image_size": 24, "min_freq": 1, "num_workers": 0})
    dm.setup()
    assert len(dm.sets["test"]) == 1 and dm.sets["test"][0]["image"].shape == (3, 24, 24)


def test_karpathy_missing_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="dataset_coco.json"):
        KarpathyData({"root": str(tmp_path), "dataset": "coco"}).setup()
    _write_karpathy(tmp_path)
    (tmp_path / "images" / "sub" / "im3.jpg").unlink()
    js = str(tmp_path / "dataset_flickr8k.json")
    dm = KarpathyData({"json": js, "image_dir": str(tmp_path / "images")})
    with pytest.raises(UserError, match="im3.jpg"):
        dm.setup()
    with pytest.raises(UserError, match="image folder not found"):
        KarpathyData({"json": js, "image_dir": str(tmp_path / "nope")}).setup()


def test_karpathy_split_file_read_from_caption_datasets_zip(tmp_path):
    """Karpathy's caption_datasets.zip as downloaded: data.json=the zip, or the zip in <root>/ when
    <root>/<dataset>/dataset_<dataset>.json is absent, gives the JSON's splits; a zip without the
    dataset's file names what it holds."""
    import zipfile

    _write_karpathy(tmp_path / "flickr8k", with_filepath=False)
    opts = {"root": str(tmp_path), "image_size": 24, "min_freq": 1, "num_workers": 0}
    from_json = KarpathyData(dict(opts))
    from_json.setup()
    js = tmp_path / "flickr8k" / "dataset_flickr8k.json"
    with zipfile.ZipFile(tmp_path / "caption_datasets.zip", "w") as archive:
        archive.writestr("dataset_coco.json", '{"images": []}')
        archive.write(js, "dataset_flickr8k.json")
    js.unlink()
    for cfg in ({}, {"json": str(tmp_path / "caption_datasets.zip")}):
        dm = KarpathyData({**opts, **cfg})
        dm.setup()
        assert {k: len(v) for k, v in dm.sets.items()} == {k: len(v) for k, v in from_json.sets.items()}
        assert dm.info()["vocab"] == from_json.info()["vocab"]
    with pytest.raises(UserError, match=r"(?s)caption_datasets.zip holds no dataset_flickr30k.json: .*\n  it holds "
                                        r"dataset_coco.json, dataset_flickr8k.json"):
        KarpathyData({**opts, "dataset": "flickr30k", "json": str(tmp_path / "caption_datasets.zip"),
                      "image_dir": str(tmp_path / "flickr8k" / "images")}).setup()


def test_collate_pads_with_zero():
    img = torch.zeros(3, 4, 4)
    items = [{"image": img, "caption": torch.tensor([1, 5, 2]), "refs": ["x"], "index": 0},
             {"image": img, "caption": torch.tensor([1, 5, 6, 7, 2]), "refs": ["y"], "index": 1}]
    b = collate_captions(items)
    assert b["caption"].tolist() == [[1, 5, 2, 0, 0], [1, 5, 6, 7, 2]] and b["length"].tolist() == [2, 4]
