"""Captioning datamodules: generated shapes scenes (embedded default) and Karpathy-split JSON.

Batches are dicts (see `vocab.collate_captions`):
    image (B, 3, H, W), caption (B, T) ids <start>..<end><pad>, length (B,), refs list[list[str]],
    index (B,); shapes evaluation batches add obj_masks (B, K, H, W) and obj_words (B, K, 2)
    = (colour id, shape id) of each object, -1 for absent objects.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import torch

from zoo.core.data import ZooDataModule, plain_loader, shuffled_loader
from zoo.core.downloads import fetch
from zoo.core.files import compression
from zoo.errors import UserError, permission_denied
from zoo.paths import readable

from . import shapes as S
from .config import KARPATHY_SPEC, SHAPES_SPEC
from .images import ImageZips, image_transform, load_image
from .vocab import CaptionSet, Vocab, build_vocab, collate_captions


class _CaptionData(ZooDataModule):
    """Loaders and `info()` shared by both datamodules; subclasses fill self.sets and self.vocab."""

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.sets: dict[str, CaptionSet] = {}
        self.vocab: Vocab | None = None

    def _loader(self, split: str, train: bool = False):
        if split not in self.sets:
            self.setup()
        kw = {"num_workers": self.cfg.num_workers, "collate_fn": collate_captions,
              "persistent_workers": self.cfg.num_workers > 0}
        if train:
            return shuffled_loader(self.sets[split], self.cfg.batch_size, seed=self.cfg.seed, **kw)
        return plain_loader(self.sets[split], self.cfg.batch_size, **kw)

    def train_dataloader(self):
        return self._loader("train", train=True)

    def val_dataloader(self):
        return self._loader("val")

    def test_dataloader(self):
        return self._loader("test")

    def predict_dataloader(self):
        return self._loader("test")

    def most_frequent_caption(self) -> str:
        """The most frequent training caption (the trivial baseline's output for every image)."""
        self.setup()
        counts: dict[str, int] = {}
        for refs in self.sets["train"].refs:
            for r in refs:
                counts[r] = counts.get(r, 0) + 1
        return min(counts, key=lambda r: (-counts[r], r))


class ShapesData(_CaptionData):
    """Generated shapes scenes with 3 reference captions and object masks (embedded, offline)."""

    spec = SHAPES_SPEC

    def setup(self, stage: str | None = None) -> None:
        if self.sets:
            return
        c = self.cfg
        if c.image_size < 24 or c.max_objects < 1:
            raise UserError(f"shapes: image_size must be >= 24 and max_objects >= 1 (got {c.image_size}, "
                            f"{c.max_objects})")
        splits = {name: S.generate_split(n, c.seed, name, c.image_size, c.max_objects)
                  for name, n in (("train", c.n_train), ("val", c.n_val), ("test", c.n_test))}
        self.vocab = Vocab(build_vocab((r for refs in splits["train"].refs for r in refs), 1))
        for name, sp in splits.items():
            ids = [self.vocab.encode_batch(refs, c.max_len) for refs in sp.refs]
            extra = None if name == "train" else self._objects_fn(sp)
            self.sets[name] = CaptionSet(self._image_fn(sp.images), sp.refs, ids, pairs=name == "train",
                                         extra=extra)

    @staticmethod
    def _image_fn(images: np.ndarray):
        return lambda i: torch.from_numpy(images[i]).float().div_(255.0)

    def _objects_fn(self, sp: S.ShapesSplit):
        K, size, ix = self.cfg.max_objects, self.cfg.image_size, self.vocab.index

        def extra(i: int) -> dict:
            words = torch.full((K, 2), -1, dtype=torch.long)
            for k, o in enumerate(sp.scenes[i]):
                words[k, 0], words[k, 1] = ix.get(o.colour, -1), ix.get(o.shape, -1)
            return {"obj_masks": torch.from_numpy(S.scene_masks(sp.scenes[i], size, K)), "obj_words": words}

        return extra

    def info(self) -> dict:
        self.setup()
        return {"dataset": "shapes", "vocab": self.vocab.tokens, "image_size": self.cfg.image_size,
                "max_len": self.cfg.max_len, "normalize": "unit",
                "baseline_caption": self.most_frequent_caption()}


KARPATHY_ZIP = "caption_datasets.zip"  # Karpathy's release: dataset_coco.json, dataset_flickr8k.json, ...30k.json
KARPATHY_LAYOUT = "{'images': [{'filename', 'filepath' (optional), 'split', 'sentences': [{'tokens': [...]}]}]}"


def check_karpathy_images(images, json_path: Path) -> None:
    """The entries of a Karpathy split file have the fields the loader reads (a hand-made or
    converted file otherwise fails with a KeyError / AttributeError deep inside setup)."""

    def bad(what: str) -> UserError:
        return UserError(f"the caption file is not a Karpathy split file: {what}. Fix the entry, or use the file "
                         "from Karpathy's caption_datasets.zip",
                         details=[f"file: {json_path}", f"layout: {KARPATHY_LAYOUT}"])

    if not isinstance(images, list):
        raise bad(f"'images' is a {type(images).__name__}, not a list")
    for i, im in enumerate(images):
        if not isinstance(im, dict):
            raise bad(f"images[{i}] is a {type(im).__name__}, not an object")
        if not isinstance(im.get("filename"), str) or not im["filename"]:
            raise bad(f"images[{i}] has no 'filename' (or it is not a string)")
        if not isinstance(im.get("filepath", ""), str):
            raise bad(f"images[{i}] has a 'filepath' that is not a string")
        if not isinstance(im.get("split"), str):
            raise bad(f"images[{i}] ({im['filename']}) has no 'split' (or it is not a string)")
        sentences = im.get("sentences")
        if not isinstance(sentences, list):
            raise bad(f"images[{i}] ({im['filename']}) has no 'sentences' list")
        for j, sentence in enumerate(sentences):
            tokens = sentence.get("tokens") if isinstance(sentence, dict) else None
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise bad(f"images[{i}] ({im['filename']}) sentences[{j}] has no 'tokens' list of words")


class KarpathyData(_CaptionData):
    """Flickr8k / Flickr30k / COCO from a Karpathy-split JSON and an image folder (local files)."""

    spec = KARPATHY_SPEC

    def paths(self) -> tuple[Path, Path]:
        """(the split file, the image folder). The split file may be Karpathy's caption_datasets.zip
        itself (data.json=..., or found at <root>/<dataset>/ or <root>/ when the JSON is absent)."""
        c = self.cfg
        base = Path(c.root) / c.dataset
        json_path = Path(c.json) if c.json else base / f"dataset_{c.dataset}.json"
        if not c.json and not json_path.exists():
            json_path = next((z for z in (base / KARPATHY_ZIP, Path(c.root) / KARPATHY_ZIP) if z.is_file()), json_path)
        return json_path, Path(c.image_dir) if c.image_dir else base / "images"

    def prepare_data(self) -> None:
        """Fetch Karpathy's caption_datasets.zip into <root> and the image zips into <root>/<dataset>
        (Flickr8k, COCO) where the defaults name nothing there (zoo/core/downloads.py)."""
        c = self.cfg
        json_path, image_dir = self.paths()
        if not c.json and not json_path.exists():
            fetch("karpathy", Path(c.root), c.download,
                  UserError(f"Karpathy split file not found at {json_path} nor {KARPATHY_ZIP} in {c.root}"))
        base = Path(c.root) / c.dataset
        if not c.image_dir and not image_dir.exists() and c.dataset in ("flickr8k", "coco"):
            fetch(c.dataset, base, c.download, UserError(f"image folder not found at {image_dir}"))

    def split_file_bytes(self, json_path: Path) -> bytes:
        """The split file's bytes; from a zip (caption_datasets.zip), its dataset_<dataset>.json member."""
        if compression(json_path) != "zip":
            return json_path.read_bytes()
        name = f"dataset_{self.cfg.dataset}.json"
        try:
            with zipfile.ZipFile(json_path) as archive:
                members = [m for m in archive.namelist() if Path(m).name == name]
                if not members:
                    listed = ", ".join(m for m in archive.namelist() if m.endswith(".json")) or "no JSON files"
                    raise UserError(f"{json_path.name} holds no {name}: set data.dataset to the one you want "
                                    "(flickr8k, flickr30k, coco), or data.json to the file itself",
                                    details=[f"zip: {json_path}", f"it holds {listed}"])
                return archive.read(members[0])
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            raise permission_denied(err) or UserError(
                f"{json_path} is a zip but cannot be read ({err}): download caption_datasets.zip again") from None

    def setup(self, stage: str | None = None) -> None:
        if self.sets:
            return
        c = self.cfg
        json_path, image_dir = self.paths()
        if json_path.is_dir():
            raise UserError(f"{json_path} is a folder, but the Karpathy split file dataset_{c.dataset}.json is "
                            "expected there: put the file itself in its place, or set data.json=PATH")
        if not json_path.is_file():
            raise UserError(
                f"Karpathy split file not found: put dataset_{c.dataset}.json where it was looked for (or the zip "
                "that holds it; below), or set data.json=PATH",
                details=[f"looked for {json_path}",
                         f"Karpathy's caption_datasets.zip holds it, and is read as it is there or in {c.root}"])
        zips = self.image_zips(image_dir)
        try:
            images = json.loads(self.split_file_bytes(json_path))["images"]  # bytes: UTF-8 whatever the locale
        except (ValueError, KeyError, TypeError) as err:
            raise UserError("the caption file is not a Karpathy split file: use the file from Karpathy's "
                            "caption_datasets.zip, or one in its layout (below)",
                            details=[f"file: {json_path}", f"error: {err}", f"layout: {KARPATHY_LAYOUT}"]) from None
        check_karpathy_images(images, json_path)
        by_split: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
        for im in images:
            split = "train" if (im.get("split") == "restval" and c.restval_as_train) else im.get("split")
            if split in by_split:
                by_split[split].append(im)
        for name, ims in by_split.items():
            if c.limit_images > 0:
                by_split[name] = ims[: c.limit_images]
            if not by_split[name]:
                raise UserError(f"{json_path} has no images in split '{name}'")
        refs = {name: [[" ".join(s["tokens"]) for s in im["sentences"]] for im in ims]
                for name, ims in by_split.items()}
        for name, rs in refs.items():
            if any(len(r) == 0 for r in rs):
                raise UserError(f"{json_path}: an image of split '{name}' has no sentences")
        self.vocab = Vocab(build_vocab((r for rs in refs["train"] for r in rs), c.min_freq))
        for name, ims in by_split.items():
            folder = image_dir if image_dir.is_dir() else None  # one stat, not one an image
            sources = [self._find_image(folder, zips, im) for im in ims]
            missing = [im for im, src in zip(ims, sources) if src is None]
            if missing:
                places = [str(image_dir)] * image_dir.is_dir() + ([", ".join(map(str, zips.paths))] if zips else [])
                first = Path(missing[0].get("filepath", "")) / missing[0]["filename"]
                raise UserError(f"{len(missing)} image file(s) of split '{name}' that the caption file lists are "
                                "missing: put them in the image folder, or set data.image_dir to where they are",
                                details=[f"caption file: {json_path}", f"looked in {' and '.join(places)}",
                                         f"e.g. {first}"])
            for f in sources:  # read only in training (DataLoader workers): one that cannot be read is refused now
                if isinstance(f, Path):
                    readable(f)
            ids = [self.vocab.encode_batch(rs, c.max_len) for rs in refs[name]]
            self.sets[name] = CaptionSet(self._image_fn(sources, zips), refs[name], ids, pairs=name == "train")

    def image_zips(self, image_dir: Path) -> ImageZips | None:
        """The zips to take images from where the folder does not hold them: data.image_dir=ZIP; the
        zips inside the image folder; with no folder, the zips in <root>/<dataset>/ as downloaded
        (Flickr8k_Dataset.zip; COCO's train2014.zip and val2014.zip). None: a folder of files only."""
        c = self.cfg
        if image_dir.is_file():
            if compression(image_dir) != "zip":
                raise UserError(f"data.image_dir={image_dir} is a file but not a zip: give the folder of "
                                f"{c.dataset} images or the zip they came in")
            zips = [image_dir]
        elif image_dir.is_dir():
            zips = sorted(z for z in image_dir.glob("*.zip") if z.name != KARPATHY_ZIP)
        else:
            base = Path(c.root) / c.dataset
            zips = [] if c.image_dir or not base.is_dir() else sorted(
                z for z in base.glob("*.zip") if z.name != KARPATHY_ZIP)
            if not zips:
                raise UserError(f"{c.dataset} image folder not found: put the images there (or their zips, below), "
                                "or set data.image_dir to a folder or zip",
                                details=[f"looked for: {image_dir}", "COCO: train2014/ and val2014/ inside it",
                                         f"the zips as downloaded, in {base}: Flickr8k_Dataset.zip; COCO: "
                                         "train2014.zip, val2014.zip"])
        return ImageZips(zips) if zips else None

    @staticmethod
    def _find_image(folder: Path | None, zips: ImageZips | None, im: dict) -> Path | tuple[int, str] | None:
        """Where an entry's image is: a file in the folder (None: no folder), else (archive, member) in the zips."""
        path = folder / im.get("filepath", "") / im["filename"] if folder is not None else None
        if path is not None and path.is_file():
            return path
        return zips.find(im.get("filepath", ""), im["filename"]) if zips else None

    def _image_fn(self, sources: list, zips: ImageZips | None):
        tf = image_transform(self.cfg.image_size, "imagenet")

        def load(i: int) -> torch.Tensor:
            src = sources[i]
            if isinstance(src, Path):
                return load_image(src, tf)
            return load_image(zips.name(src), tf, data=zips.read(src))

        return load

    def info(self) -> dict:
        self.setup()
        return {"dataset": self.cfg.dataset, "vocab": self.vocab.tokens, "image_size": self.cfg.image_size,
                "max_len": self.cfg.max_len, "normalize": "imagenet",
                "baseline_caption": self.most_frequent_caption()}
