"""Writing files so that a kill, a full disk or an error never leaves half of one; reading text as UTF-8
whatever the locale."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
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
        raise UserError(f"{what} {path} is not UTF-8 text (byte 0x{byte}): convert it, e.g. for Latin-1 "
                        f"iconv -f latin1 -t utf-8 {shlex.quote(str(path))} > converted{Path(path).suffix}") from None


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
