"""Reading captioning images: the transform, one image from a file or from bytes, and the zips the
datasets come in (Flickr8k_Dataset.zip; COCO's train2014.zip and val2014.zip) read as downloaded."""

from __future__ import annotations

import io
import os
import sys
import zipfile
from pathlib import Path

import torch
from PIL import Image, UnidentifiedImageError
from torchvision.transforms import v2 as T

from zoo.errors import UserError, image_too_large, permission_denied
from zoo.paths import check_input_file, readable

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SHAPES_DATA = ("the shapes scenes: coloured shapes drawn on the 64x64 pixel grid with a little pixel noise; a "
               "box filter makes a bigger picture of one into the pixel averages")


def image_transform(size: int, normalize: str):
    """PIL image -> (3, size, size) float tensor: shorter side resized, centre crop, then ImageNet
    normalisation ('imagenet') or plain [0, 1] ('unit', the shapes scenes)."""
    steps = [T.Resize(size, antialias=True), T.CenterCrop(size), T.ToImage(),
             T.ToDtype(torch.float32, scale=True)]
    if normalize == "imagenet":
        steps.append(T.Normalize(IMAGENET_MEAN, IMAGENET_STD))
    return T.Compose(steps)


def load_image(path: Path | str, transform, size: int | None = None, data: bytes | None = None) -> torch.Tensor:
    """An image file through ``transform``; ``data``: the file's bytes, read from an archive (``path``
    then only names it in messages). With ``size`` (``zoo.predict``: the model's input size), a note
    on stderr when the image is smaller than the model's input or has no colour, which the transform
    would otherwise change silently."""
    try:
        with Image.open(check_input_file(path) if data is None else io.BytesIO(data)) as im:
            if size is not None:
                note = conversion_note(im, size)
                if note:
                    print(f"note: {path} {note}", file=sys.stderr)
            return transform(im.convert("RGB"))
    except UnidentifiedImageError:
        raise UserError(f"{path} is not an image file PIL can read") from None
    except Image.DecompressionBombError as err:  # past PIL's pixel limit
        raise image_too_large(err, path) from None
    except OSError as err:  # decoding: "image file is truncated" (a cut-short file); a file's own errors keep theirs
        if err.errno is not None:
            raise
        raise UserError(f"{Path(path).name} is not a readable image: a cut-short copy? Give the complete file",
                        details=[f"file: {path}", f"error: {err}"]) from None


GREY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F")  # PIL's modes without colour


def conversion_note(im, size: int) -> str | None:
    """What ``image_transform`` does to a PIL image the model would not see as it is: enlarged (smaller
    than ``size``) or given colour (greyscale: the same grey in the three channels, so no colour the
    captions name); None for a colour image at least ``size`` pixels on each side (scaled down and
    centre-cropped as the training images were)."""
    w, h = im.size
    small, grey = min(w, h) < size, im.mode in GREY_MODES
    if not (small or grey):
        return None
    kind = f"{w}x{h}" + (" greyscale" if grey else "")
    done = " ".join([f"resized to {size}x{size}"] * small + ["RGB" if small else "converted to RGB"] * grey)
    return f"is {kind}; {done} as the model expects" + (" (it sees no colour)" if grey else "")


class ImageZips:
    """Image files inside zip archives, found by file name: Karpathy's entries name an image by
    'filepath' (COCO: train2014 / val2014) and 'filename', and the zips hold them one folder down
    (Flickr8k_Dataset.zip: Flicker8k_Dataset/<filename>; train2014.zip: train2014/<filename>).
    Each process opens the archives itself (forked DataLoader workers must not share a file offset)."""

    def __init__(self, paths: list[Path]):
        self.paths = [readable(p) for p in paths]
        self.members: dict[str, list[tuple[int, str]]] = {}  # file name -> [(archive, member)]
        for i in range(len(self.paths)):
            for name in self._archive(i).namelist():
                if not name.endswith("/") and not name.startswith("__MACOSX/"):
                    self.members.setdefault(name.rsplit("/", 1)[-1], []).append((i, name))

    def _archive(self, i: int) -> zipfile.ZipFile:
        if getattr(self, "_pid", None) != os.getpid():
            self._pid, self._open = os.getpid(), {}
        if i not in self._open:
            try:
                self._open[i] = zipfile.ZipFile(self.paths[i])
            except (zipfile.BadZipFile, OSError, EOFError) as err:
                raise permission_denied(err) or UserError(
                    f"{self.paths[i].name} is not a readable zip: download it again, or unzip it and set "
                    "data.image_dir to the folder", details=[f"file: {self.paths[i]}", f"error: {err}"]) from None
        return self._open[i]

    def __getstate__(self) -> dict:  # DataLoader workers started by spawn open their own archives
        return {"paths": self.paths, "members": self.members}

    def find(self, filepath: str, filename: str) -> tuple[int, str] | None:
        """(archive, member) of an entry; of several with its file name, the one in a folder named
        'filepath' (COCO's names repeat no file across train2014 and val2014, but a user's zips may)."""
        found = self.members.get(filename, [])
        if len(found) > 1 and filepath:
            found = [f for f in found if f[1].rsplit("/", 2)[-2:-1] == [filepath]] or found
        return found[0] if found else None

    def read(self, where: tuple[int, str]) -> bytes:
        i, member = where
        try:
            return self._archive(i).read(member)
        except (zipfile.BadZipFile, OSError, EOFError) as err:  # a damaged member: CRC, cut-short archive
            raise UserError(f"{member} in {self.paths[i].name} cannot be read: download the zip again",
                            details=[f"zip: {self.paths[i]}", f"error: {err}"]) from None

    def name(self, where: tuple[int, str]) -> str:
        return f"{self.paths[where[0]]}:{where[1]}"
