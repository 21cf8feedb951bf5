"""Writing files so that a kill, a full disk or an error never leaves half of one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
