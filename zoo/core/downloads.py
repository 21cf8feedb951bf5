"""Real datasets fetched on first use: where each file is published, its checksum, and the fetch.

A datamodule whose reader finds no files calls ``fetch(name, folder, download, missing=err)``: every
file of the dataset not yet in ``folder`` is fetched with pooch (checked against the publisher's md5
or sha256, or torchvision's where it has one), tried at ``$ZOO_DATA_MIRROR/<file name>`` first, then
at the publisher's address and its mirrors. A cut-off file resumes where it stopped (HTTP Range),
and the checked file is renamed into place (never half of one under its name). One process fetches
at a time (a file lock in the folder): DDP ranks started together, or two runs sharing a data
folder, wait for the first and then find the files there.

Switches: ``data.download=false`` never touches the network (the error says what to do, then names
each file, its addresses and the folder to put it in, a line each); ``ZOO_OFFLINE=1`` refuses every
address outside 127.0.0.1 (the test suite sets it); ``ZOO_DATA_MIRROR=URL`` is looked at first.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pooch
import requests
from filelock import FileLock, Timeout
from tqdm.auto import tqdm

from zoo.errors import UserError

CONNECT_TIMEOUT = 5.0  # seconds to open a connection: no network is an error in seconds, never a hang
READ_TIMEOUT = 60.0  # seconds without a byte before a transfer counts as cut off (then resumed)
RESUMES = 5  # times one address may be resumed after a cut-off transfer that brought new bytes
LOCK_WAIT = 24 * 3600.0  # seconds a process waits for another's fetch of the same folder (13 GB of COCO)
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # what ZOO_OFFLINE=1 still lets through (test servers)


@dataclass(frozen=True)
class Remote:
    """One published file."""

    name: str  # its file name, as published and as kept in the folder (a mirror serves URL/<name>)
    urls: tuple[str, ...]  # the publisher's address first, then mirrors (torchvision's where it has them)
    checksum: str | None  # "md5:<hex>" / "sha256:<hex>" as published; None where none is published
    size: str  # its size, for messages and docs
    unpack_to: str = ""  # a zip unpacked to this name beside it (text8.zip -> text8); "": kept as it is


@dataclass(frozen=True)
class Published:
    """A dataset: its files and where they were published."""

    title: str  # the dataset's name in messages
    page: str  # where its publisher describes it
    files: tuple[Remote, ...]  # every file the readers need
    note: str = ""  # said when every address failed (a publisher whose files are gone)


_TV = "torchvision's md5"  # checksums taken from torchvision.datasets where it has them
_MNIST = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")  # torchvision's
_FASHION = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_OMNIGLOT = "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/"
_IDX = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz")

DATASETS: dict[str, Published] = {
    "mnist": Published("MNIST", "http://yann.lecun.com/exdb/mnist/", tuple(
        Remote(n, tuple(m + n for m in _MNIST), f"md5:{h}", s) for n, h, s in zip(_IDX, (  # torchvision's md5s
            "f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
            "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
            ("9.9 MB", "29 KB", "1.6 MB", "5 KB")))),
    "fashion_mnist": Published("Fashion-MNIST", "https://github.com/zalandoresearch/fashion-mnist", tuple(
        Remote(n, (_FASHION + n,), f"md5:{h}", s) for n, h, s in zip(_IDX, (  # torchvision's md5s
            "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
            "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"),
            ("26 MB", "29 KB", "4.4 MB", "5 KB")))),
    "cifar10": Published("CIFAR-10 (binary version)", "https://www.cs.toronto.edu/~kriz/cifar.html", (
        Remote("cifar-10-binary.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz",),
               "md5:c32a1d4ab5d03f1284b67883e8d87530", "162 MB"),)),  # the md5 on the publisher's page
    "svhn": Published("SVHN (cropped digits, format 2)", "http://ufldl.stanford.edu/housenumbers/", (
        Remote("train_32x32.mat", ("http://ufldl.stanford.edu/housenumbers/train_32x32.mat",),
               "md5:e26dedcc434d2e4c54c9b2d4a06d8373", "182 MB"),  # torchvision's md5s
        Remote("test_32x32.mat", ("http://ufldl.stanford.edu/housenumbers/test_32x32.mat",),
               "md5:eb5a983be6a315427106f1b164d9cef3", "64 MB"))),
    "omniglot": Published("Omniglot", "https://github.com/brendenlake/omniglot", (
        Remote("images_background.zip", (_OMNIGLOT + "images_background.zip",),
               "md5:68d2efa1b9178cc56df9314c21c6e718", "9.5 MB"),  # torchvision's md5s
        Remote("images_evaluation.zip", (_OMNIGLOT + "images_evaluation.zip",),
               "md5:6b91aef0f799c5bb55b94e3f2daec811", "6.5 MB"))),
    "text8": Published("text8", "http://mattmahoney.net/dc/textdata.html", (
        Remote("text8.zip", ("http://mattmahoney.net/dc/text8.zip",), None, "31 MB", unpack_to="text8"),)),
    "karpathy": Published("Karpathy's caption splits", "https://cs.stanford.edu/people/karpathy/deepimagesent/", (
        Remote("caption_datasets.zip", ("https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip",),
               None, "36 MB"),)),
    "flickr8k": Published(
        "Flickr8k images", "https://hockenmaier.cs.illinois.edu/8k-pictures.html", (
            Remote("Flickr8k_Dataset.zip",
                   ("https://github.com/jbrownlee/Datasets/releases/download/Flickr8k/Flickr8k_Dataset.zip",),
                   "md5:f18a1e2920de5bd84dae7cf08ec78978", "1.1 GB"),),
        note="The publisher (University of Illinois, hockenmaier.cs.illinois.edu/8k-pictures.html, by a request "
             "form) no longer serves Flickr8k; the address above is a copy on GitHub."),
    "coco": Published("COCO 2014 images", "https://cocodataset.org/#download", (
        Remote("train2014.zip", ("http://images.cocodataset.org/zips/train2014.zip",),
               "md5:0da8c0bd3d6becc4dcb32757491aca88", "13 GB"),
        Remote("val2014.zip", ("http://images.cocodataset.org/zips/val2014.zip",),
               "md5:a3d79f5ed8d289b7a7554ce06a5782b3", "6.2 GB"))),
    "LSUN_resize": Published(
        "LSUN (resized, ODIN)", "https://github.com/facebookresearch/odin", (
            Remote("LSUN_resize.tar.gz", ("https://www.dropbox.com/s/raw/moqh2wh8696c3yl/LSUN_resize.tar.gz",),
                   "md5:278b7b31c8cb7e804a1465a8ce03a2dc", "17 MB"),),  # pytorch-ood's md5
        note="ODIN's authors published it on Dropbox (github.com/facebookresearch/odin); a link they withdraw "
             "has no other public source."),
    "Imagenet_resize": Published(
        "TinyImageNet (resized, ODIN)", "https://github.com/facebookresearch/odin", (
            Remote("Imagenet_resize.tar.gz", ("https://www.dropbox.com/s/raw/kp3my3412u5k9rl/Imagenet_resize.tar.gz",),
                   "md5:0f9ff11d45babf2eff5fe12281d1ac31", "19 MB"),),  # pytorch-ood's md5
        note="ODIN's authors published it on Dropbox (github.com/facebookresearch/odin); a link they withdraw "
             "has no other public source."),
}


def offline() -> bool:
    """``ZOO_OFFLINE=1``: no address outside 127.0.0.1 is fetched from (the test suite sets it)."""
    return os.environ.get("ZOO_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")


def addresses(remote: Remote) -> list[str]:
    """Where ``remote`` is looked for, in order: ``$ZOO_DATA_MIRROR/<name>``, then its own addresses."""
    mirror = os.environ.get("ZOO_DATA_MIRROR", "").strip()
    return ([f"{mirror.rstrip('/')}/{remote.name}"] if mirror else []) + list(remote.urls)


def _where(data: Published, folder: Path, files: list[Remote]) -> list[str]:
    """The details of a refused fetch, a line each: the folder the files go to, then each file with its size,
    checksum and addresses, and the publisher's note."""
    each = [f"  {r.name} ({r.size}{', ' + r.checksum if r.checksum else ''}) from {' or '.join(addresses(r))}"
            for r in files]
    return [f"{data.title} ({data.page}) into {folder}/:", *each, *([data.note] if data.note else [])]


def _found(missing: UserError | None) -> list[str]:
    """The reader's own message (the layouts it looked for) and its details, among the refusal's details."""
    if missing is None:
        return []
    return [" ".join(missing.message.split()), *(f"  {line}" for line in missing.details)]


def _present(folder: Path, remote: Remote) -> bool:
    return (folder / remote.name).is_file() or bool(remote.unpack_to) and (folder / remote.unpack_to).is_file()


def fetch(name: str, folder: str | Path, download: bool = True, missing: UserError | None = None,
          only: list[str] | None = None) -> Path:
    """Fetch the files of dataset ``name`` that ``folder`` lacks (``only``: of these file names);
    ``missing``: the reader's error (it leads every message, as it names the layouts looked for).
    Returns ``folder``."""
    data, folder = DATASETS[name], Path(folder)
    todo = [r for r in data.files if not _present(folder, r) and (only is None or r.name in only)]
    if not todo:
        return folder
    if not download:
        raise UserError(f"{data.title} is missing and data.download=false: nothing is fetched. Put the files below "
                        "in place, or drop data.download=false to have them fetched (ZOO_DATA_MIRROR=URL first)",
                        details=[*_found(missing), *_where(data, folder, todo)])
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot make the folder to fetch {data.title} into: point data.root at a folder you may "
                        "write in", details=[f"folder: {folder}", f"error: {err}", *_found(missing)]) from None
    try:
        with FileLock(str(folder / f".{name}.fetch.lock"), timeout=LOCK_WAIT):  # one process fetches, others wait
            for remote in todo:
                if not _present(folder, remote):  # another process may have fetched it while this one waited
                    _fetch_one(data, remote, folder, missing, todo)
    except Timeout:
        raise UserError(f"another process held {folder}/.{name}.fetch.lock for {LOCK_WAIT:.0f} s: if none "
                        "is fetching any more, remove the lock file", details=_found(missing)) from None
    return folder


def _fetch_one(data: Published, remote: Remote, folder: Path, missing: UserError | None, todo: list[Remote]) -> None:
    """``remote`` into ``folder``, from the first address that serves it; ``todo``: every file still missing,
    named in the error when none does; ``missing``: the reader's error, among the details."""
    pooch.get_logger().setLevel("WARNING")  # its lines go to a handler bound at import; the zoo says its own
    tried = []
    for url in addresses(remote):
        if offline() and urlsplit(url).hostname not in (None, *LOCAL_HOSTS):  # None: no host, nothing to reach
            tried.append(f"{url} (not tried: ZOO_OFFLINE=1)")
            continue
        part = folder / f"{remote.name}.part"
        print(f"fetching {remote.name} ({remote.size}) from {url} into {folder}/", file=sys.stderr, flush=True)
        for _ in range(1 + RESUMES):
            before = part.stat().st_size if part.exists() else 0
            try:
                pooch.retrieve(url, known_hash=remote.checksum, fname=remote.name, path=folder,
                               downloader=RangeDownloader(part), progressbar=False)
                break
            except requests.RequestException as err:  # first: a bad URL is also a ValueError
                now = part.stat().st_size if part.exists() else 0
                if now > before:  # cut off after bringing new bytes: resume from there
                    continue
                tried.append(f"{url} ({type(err).__name__}: {_reason(err)})")
                break
            except ValueError as err:  # pooch: the checksum differs (the file is removed)
                part.unlink(missing_ok=True)
                got = re.search(r"but got (\w+)", str(err))
                raise UserError(f"{remote.name} does not match its published checksum; the file was removed. Fetch "
                                "it again, or from another address, into the folder below",
                                details=[f"into {folder}/", f"{remote.name} from {url}: {remote.checksum} published, "
                                         f"{got.group(1) if got else str(err)[:100]} received", *_found(missing)]
                                ) from None
        else:
            tried.append(f"{url} (cut off {1 + RESUMES} times; run again to resume from {part})")
            continue
        if (folder / remote.name).is_file():
            _unpack(remote, folder)
            return
    raise UserError(f"{data.title} is missing and could not be fetched: on a machine with internet, fetch the files "
                    "below; or serve them at a mirror (ZOO_DATA_MIRROR=URL looks for URL/<file name>)",
                    details=[*_found(missing), f"{remote.name} tried at:", *(f"  {t}" for t in tried),
                             *_where(data, folder, todo)])


REASONS = (("NameResolutionError", "host name not resolved: no network, or no DNS"),
           ("timed out", f"no answer within {CONNECT_TIMEOUT:.0f} s"), ("Connection refused", "connection refused"),
           ("Network is unreachable", "network unreachable"), ("IncompleteRead", "cut off"))


def _reason(err: Exception) -> str:
    """What went wrong, in a few words (requests' own text nests three exceptions deep)."""
    response = getattr(err, "response", None)
    if response is not None:
        return f"HTTP {response.status_code} {response.reason or ''}".strip()
    text = " ".join(str(err).split())
    return next((say for key, say in REASONS if key in text), text if len(text) < 200 else text[:197] + "...")


def _unpack(remote: Remote, folder: Path) -> None:
    """A zip published around one file (text8.zip): that file, renamed into place once written whole."""
    if not remote.unpack_to:
        return
    archive, target = folder / remote.name, folder / remote.unpack_to
    tmp = folder / f".{remote.unpack_to}.unpacking-{os.getpid()}"
    try:
        with zipfile.ZipFile(archive) as z, z.open(remote.unpack_to) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(tmp, target)
    except (zipfile.BadZipFile, KeyError, OSError, tarfile.TarError) as err:
        raise UserError(f"{archive.name} cannot be unpacked: remove it and fetch it again",
                        details=[f"file: {archive}", f"error: {err}"]) from None
    finally:
        tmp.unlink(missing_ok=True)


class RangeDownloader:
    """A pooch downloader that resumes: pooch's own HTTPDownloader starts every try from byte 0 into a
    temporary file it removes on failure, which for COCO's 13 GB zip means starting over after every
    dropped connection. This one keeps the bytes received in ``part`` (beside the file), asks for the
    rest with an HTTP Range header, and hands the whole file to pooch, which checks its hash and
    renames it into place."""

    def __init__(self, part: Path):
        self.part = part  # where the bytes received so far stay between tries

    def __call__(self, url: str, output_file, pooch_obj, check_only: bool = False) -> bool | None:
        if check_only:  # pooch asks whether the file exists at all
            with requests.head(url, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), allow_redirects=True) as r:
                return r.status_code == 200
        have = self.part.stat().st_size if self.part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        with requests.get(url, headers=headers, stream=True, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)) as r:
            if r.status_code == 416 and have:  # asked past the end: every byte is here already
                self._hand_over(output_file)
                return None
            r.raise_for_status()
            if have and r.status_code != 206:  # the server ignores Range: it sends the whole file again
                have = 0
            rest = int(r.headers.get("content-length", 0) or 0)
            with open(self.part, "ab" if have else "wb") as f, tqdm(
                    total=have + rest or None, initial=have, unit="B", unit_scale=True, leave=False,
                    desc=self.part.name[: -len(".part")], disable=None) as bar:
                for chunk in r.iter_content(chunk_size=1 << 16):  # small: a cut-off read loses its chunk
                    f.write(chunk)
                    bar.update(len(chunk))
            if rest and self.part.stat().st_size < have + rest:  # a server that closes early without an error
                raise requests.ConnectionError(f"transfer ended at {self.part.stat().st_size} of {have + rest} bytes")
        self._hand_over(output_file)
        return None

    def _hand_over(self, output_file) -> None:
        """The whole file to pooch's temporary name (same folder: a rename), which it checks and moves."""
        if isinstance(output_file, (str, os.PathLike)):
            os.replace(self.part, output_file)
        else:  # an open file object
            with open(self.part, "rb") as src:
                shutil.copyfileobj(src, output_file, 1 << 20)
            self.part.unlink()
