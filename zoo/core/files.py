"""Writing files so that a kill, a full disk or an error never leaves half of one; reading text as UTF-8
whatever the locale, compressed or not."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import re
import shlex
import sys
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from zoo.errors import UserError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary name beside ``path`` to write to: renamed over ``path`` when the block ends
    without an error (a rename within a folder is atomic), removed otherwise. ``path`` holds the old
    file or the new one, never a part of either."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def missing_folders(folder: str | Path) -> list[Path]:
    """``folder`` and the folders above it that do not exist yet, innermost first: what making it
    creates, and what ``remove_empty`` takes away again if the work in it fails."""
    folder = Path(folder)
    return [p for p in (folder, *folder.parents) if not p.exists()]


def remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (innermost first) as far as they are empty: another run's files stop it."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            break


@contextlib.contextmanager
def open_utf8(path: str | Path, what: str = "file") -> Iterator[TextIO]:
    """``path`` opened as UTF-8 text whatever the locale, a byte-order mark skipped; a file in another
    encoding (Latin-1, UTF-16) is a UserError naming it and the conversion, not a UnicodeDecodeError."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            yield f
    except UnicodeDecodeError as err:
        byte = err.object[err.start:err.start + 1].hex()
        raise UserError(f"{what} {Path(path).name} is not UTF-8 text (byte 0x{byte}): convert it (for Latin-1, the "
                        "command below)",
                        details=[f"{what}: {path}",
                                 f"iconv -f latin1 -t utf-8 {shlex.quote(str(path))} > converted{Path(path).suffix}"]
                        ) from None


_UNDECODED = re.compile("[\udc80-\udcff]")  # the bytes errors="surrogateescape" could not decode
_warned_undecoded: set[str] = set()


def replace_undecoded(text: str, path: str | Path) -> str:
    """Text read with ``errors="surrogateescape"``: each byte that is not UTF-8 becomes U+FFFD, as with
    ``errors="replace"`` (a stray byte costs a word), and the first such text of a file gets one
    warning line naming it: a whole file in Latin-1 (every "café" read as "caf" and U+FFFD) is then no
    surprise."""
    found = _UNDECODED.search(text)
    if found is None:
        return text
    if str(path) not in _warned_undecoded:
        _warned_undecoded.add(str(path))
        word = re.search(r"\S*$", text[:found.start()]).group() + re.match(r"\S*", text[found.start():]).group()
        print(f"warning: {path} is not all UTF-8 text (e.g. {word.encode('utf-8', 'surrogateescape')!r}); such "
              "bytes are read as U+FFFD. If the file is Latin-1, convert it: iconv -f latin1 -t utf-8 "
              f"{shlex.quote(str(path))} > converted{Path(path).suffix}", file=sys.stderr)
    return _UNDECODED.sub("\ufffd", text)


# A file's first bytes -> how it is compressed (by content, not by name: text8.zip renamed is still a zip)
_MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip"}
_OPENERS = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}
# what a damaged compressed file raises while it is read (gzip.BadGzipFile is an OSError)
_DAMAGED = (EOFError, OSError, zlib.error, lzma.LZMAError, zipfile.BadZipFile)


def compression(path: str | Path) -> str | None:
    """"gzip", "bzip2", "xz" or "zip" when the file starts with that format's magic bytes, else None."""
    with open(path, "rb") as f:
        head = f.read(6)
    return next((kind for magic, kind in _MAGIC.items() if head.startswith(magic)), None)


@contextlib.contextmanager
def open_text(path: str | Path, what: str = "file") -> Iterator[TextIO]:
    """``path`` as a UTF-8 text stream (a byte-order mark skipped; bytes that are not UTF-8 kept as
    surrogates for ``replace_undecoded``), decompressed while it is read when it is gzip, bzip2, xz or a
    zip of one file, as gensim's ``LineSentence`` reads .gz and .bz2. A damaged or truncated compressed
    file, or a zip of several files, is a UserError naming it."""
    kind = compression(path)
    text = {"encoding": "utf-8-sig", "errors": "surrogateescape"}
    try:
        with contextlib.ExitStack() as stack:
            if kind is None:
                stream = stack.enter_context(open(path, **text))
            elif kind == "zip":
                archive = stack.enter_context(zipfile.ZipFile(path))
                members = [m for m in archive.infolist()  # not macOS's __MACOSX/ and ._ resource forks
                           if not m.is_dir() and not m.filename.startswith("__MACOSX/")
                           and not Path(m.filename).name.startswith("._")]
                if len(members) != 1:
                    names = ", ".join(m.filename for m in members[:5]) + (", ..." if len(members) > 5 else "")
                    raise UserError(f"{what} {Path(path).name} is a zip of {len(members)} files: give a zip of one "
                                    "text file, or unzip it and name the files", details=[f"{what}: {path}",
                                                                           f"it holds {names or 'none'}"])
                stream = stack.enter_context(io.TextIOWrapper(archive.open(members[0]), **text))
            else:
                stream = stack.enter_context(_OPENERS[kind](path, "rt", **text))
            yield stream
    except _DAMAGED as err:
        if kind is None:
            raise
        raise UserError(f"{what} {Path(path).name} is {kind}-compressed but cannot be read to its end: the file is "
                        "damaged or was cut short; download or compress it again",
                        details=[f"{what}: {path}", f"error: {err}"]) from None


_CONTROL = re.compile("[\x00-\x08\x0e-\x1f]")  # control codes that text does not hold (tabs, line ends excepted)


def refuse_binary(text: str, path: str | Path, fix: str) -> None:
    """A UserError when ``text`` (the start of a file read by ``open_text``) is not text: over 1 % control
    codes (binary data, UTF-16's zero bytes) or over 30 % bytes that are not UTF-8 (a Latin-1 text stays
    under that: its accented letters are a few per cent). ``fix`` ends the message."""
    if not text:
        return
    control = len(_CONTROL.findall(text)) / len(text)
    undecoded = len(_UNDECODED.findall(text)) / len(text)
    if control > 0.01 or undecoded > 0.3:
        what = f"{control:.0%} control codes" if control > 0.01 else f"{undecoded:.0%} bytes that are not UTF-8"
        raise UserError(f"{Path(path).name} is not UTF-8 text ({what} in its first {len(text):,} characters): {fix}",
                        details=[f"file: {path}",
                                 "convert another encoding with `iconv -t UTF-8`, e.g. iconv -f utf-16"])
