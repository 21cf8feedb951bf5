"""Omniglot's files (Lake et al. 2015; MAML paper section 5.2): found, read and decoded into one tensor; the
N-way K-shot episodes drawn from it and their datamodule (``OmniglotData``) are data.py's.

Expected layout (the official release, unzipped or as its two zips; torchvision's ``omniglot-py``
folder works too):

    <root>/omniglot/images_background/<alphabet>/<character>/*.png    (964 characters)
    <root>/omniglot/images_evaluation/<alphabet>/<character>/*.png    (659 characters)
    or <root>/omniglot/images_background.zip and images_evaluation.zip, read as they are

As in the paper's setup (Santoro et al. 2016): all 1,623 characters are pooled, shuffled with a
fixed seed, 1,200 are the training characters and the other 423 the test characters; images are
resized to 28x28 with strokes = 1; each character rotated by 0/90/180/270 degrees is a class of its
own (4,800 training classes). Validation tasks come from the held-out characters too, with a
different seed from the test tasks. The decoded images are cached as ``omniglot_<size>.pt`` in
the Omniglot folder (plain tensors, loaded with ``weights_only=True``).
"""

from __future__ import annotations

import contextlib
import hashlib
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, NamedTuple

import torch
from PIL import Image, UnidentifiedImageError

from zoo.core.data import load_cache, save_cache
from zoo.errors import UserError, permission_denied
from zoo.paths import readable

SPLITS = ("images_background", "images_evaluation")
LAYOUT = ("<root>/omniglot/images_background/<alphabet>/<character>/*.png and "
          "<root>/omniglot/images_evaluation/<alphabet>/<character>/*.png")


def has_split(folder: Path, split: str) -> bool:
    return (folder / split).is_dir() or (folder / f"{split}.zip").is_file()


def find_omniglot(root: str | Path) -> Path:
    root = Path(root)
    candidates = [root / "omniglot", root / "omniglot-py", root]
    for folder in candidates:
        if all(has_split(folder, s) for s in SPLITS):
            return folder
    for folder in candidates:
        if folder.is_dir() and any(folder.iterdir()) and folder != root:
            raise UserError(f"a folder is not in Omniglot's layout: put the folders {' and '.join(SPLITS)} inside it, "
                            "or the zips images_background.zip and images_evaluation.zip (below)",
                            details=[f"folder: {folder}", f"layout: {LAYOUT}",
                                     "zips from https://github.com/brendenlake/omniglot (python/ folder)"])
    raise UserError("Omniglot not found: put its two zips (below) in omniglot/ under data.root (read as they are, or "
                    "unzipped), or point data.root at the folder that holds omniglot/",
                    details=[f"data.root: {root}; folders looked in: {', '.join(str(c) for c in candidates)}",
                             f"layout: {LAYOUT}",
                             "images_background.zip and images_evaluation.zip from "
                             "https://github.com/brendenlake/omniglot (python/ folder)"])


def character_folders(folder: Path, split: str) -> list[Path]:
    """The character folders of one split of an unzipped release."""
    return sorted(c for a in sorted((folder / split).iterdir()) if a.is_dir() for c in a.iterdir() if c.is_dir())


class Drawing(NamedTuple):
    name: str  # split/alphabet/character/file.png, as in the release
    stamp: str  # what identifies its contents: size and modification time, or size and CRC in a zip
    open: Callable[[], IO[bytes]]


def character_drawings(folder: Path, stack: contextlib.ExitStack) -> tuple[list[str], list[list[Drawing]]]:
    """(character names split/alphabet/character, their drawings), each split from its folder or, where
    there is none, from its zip (held open in ``stack``)."""
    found: dict[str, list[Drawing]] = {}
    for split in SPLITS:
        if (folder / split).is_dir():
            for c in character_folders(folder, split):  # (glob sees nothing in a folder it may not read)
                found[str(c.relative_to(folder))] = [_file_drawing(f, folder) for f in readable(c).glob("*.png")]
            if not any(name.startswith(f"{split}/") for name in found):
                raise UserError(f"{folder / split} holds no character folders; expected {LAYOUT}")
            continue
        path = folder / f"{split}.zip"
        try:
            archive = stack.enter_context(zipfile.ZipFile(path))
        except (zipfile.BadZipFile, OSError) as err:
            raise permission_denied(err) or UserError(
                f"{path.name} is not a readable zip: download it again (the address below)",
                details=[f"file: {path}", f"error: {err}",
                         "from https://github.com/brendenlake/omniglot (python/ folder)"]) from None
        for info in archive.infolist():
            parts = info.filename.rstrip("/").split("/")  # the release's: split/alphabet/character/file.png
            if info.is_dir() or len(parts) < 4 or parts[-4] != split or not parts[-1].endswith(".png"):
                continue  # (a zip made again from the folder may put one more folder above split/)
            found.setdefault("/".join(parts[-4:-1]), []).append(
                Drawing("/".join(parts[-4:]), f"{info.file_size}\0{info.CRC}", lambda a=archive, i=info: a.open(i)))
        if not any(name.startswith(f"{split}/") for name in found):  # else skipped: a later
            members = [i.filename for i in archive.infolist() if not i.is_dir()]  # message would blame data.query
            raise UserError(f"{path.name} holds no drawings laid out as {split}/<alphabet>/<character>/*.png: "
                            "download it again (the address below), or unzip it into the folder below",
                            details=[f"file: {path} ({len(members)} files"
                                     f"{', e.g. ' + members[0] if members else ''})",
                                     "from https://github.com/brendenlake/omniglot (python/ folder)",
                                     f"folder: {folder}"])
    if not found:
        raise UserError(f"{folder}: no character folders found; expected {LAYOUT}")
    names = sorted(found)
    return names, [sorted(found[n], key=lambda d: d.name) for n in names]


def _file_drawing(f: Path, folder: Path) -> Drawing:
    stat = f.stat()
    return Drawing(str(f.relative_to(folder)), f"{stat.st_size}\0{stat.st_mtime_ns}", lambda: open(f, "rb"))


def drawings_stamp(drawings: list[list[Drawing]]) -> str:
    """What a cache was decoded from: every drawing's name and stamp (a drawing replaced under the same
    name is decoded again)."""
    digest = hashlib.sha1()
    for files in drawings:
        for d in files:
            digest.update(f"{d.name}\0{d.stamp}\n".encode())
    return digest.hexdigest()


def load_images(folder: Path, size: int) -> tuple[torch.Tensor, list[str]]:
    """(characters, drawings, size, size) uint8 images (strokes = 255), cached in the folder."""
    cache = folder / f"omniglot_{size}.pt"
    with contextlib.ExitStack() as stack:
        names, drawings = character_drawings(folder, stack)
        stamp = drawings_stamp(drawings)
        saved = load_cache(cache) or {}  # absent, unreadable or cut short: decoded again
        if saved.get("names") == names and saved.get("stamp") == stamp and "images" in saved:
            return saved["images"], names

        per_char = []
        for name, files in zip(names, drawings):
            if not files:
                raise UserError(f"{folder / name} holds no .png drawings; expected {LAYOUT}")
            imgs = []
            for d in files:
                try:
                    with d.open() as fh:
                        im = Image.open(fh)
                        im.load()
                except (UnidentifiedImageError, OSError, zipfile.BadZipFile) as err:
                    why = "not an image format PIL reads" if isinstance(err, UnidentifiedImageError) else err
                    raise permission_denied(err) or UserError(
                        f"{d.name} is not a readable image ({why}): unzip it again from "
                        "images_background.zip / images_evaluation.zip, or delete it",
                        details=[f"file: {folder / d.name}",
                                 "from https://github.com/brendenlake/omniglot (python/ folder)"]) from None
                with im:
                    im = im.convert("L").resize((size, size), Image.Resampling.LANCZOS)
                    imgs.append(255 - torch.frombuffer(bytearray(im.tobytes()), dtype=torch.uint8).view(size, size))
            per_char.append(torch.stack(imgs))
    n = min(len(p) for p in per_char)
    images = torch.stack([p[:n] for p in per_char])  # (C, n, S, S), strokes bright
    save_cache({"images": images, "names": names, "stamp": stamp}, cache)  # read-only folder: decoded next time
    return images, names
