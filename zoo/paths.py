"""Paths a command is given: expanded as a shell user writes them, and checked before any work.

``expand_path``: ``run_dir=~/runs`` or ``data.root=$SCRATCH/data`` in a recipe, in quotes, or in a
shell that leaves ``~`` after ``=`` alone (zsh, sh) reach the zoo as typed; taken literally they made
a folder named ``~`` or ``$SCRATCH`` in the working directory.
``check_input_file`` / ``readable`` / ``writable`` / ``make_folder`` / ``check_output_file``: files and
folders a command reads or writes, refused with one message before the work that would fail on them
later (the message itself: ``zoo.errors.no_access``); ``home_folder``: the XDG folders."""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from zoo.errors import UserError, no_access

_HOME = re.compile(r"~[\w.-]*(/|$)")  # ~ or ~user, alone or before a /
_VARIABLE = re.compile(r"\$([A-Za-z_]\w*)")


def expand_path(value: Any, key: str, where: str) -> Any:
    """``value`` with a leading ``~`` and the ``$VARIABLES`` of a path (a string with a /) expanded as
    the shell would (lists: every string); other values as they are. An unset variable is a UserError,
    unless the path exists as written."""
    if isinstance(value, list):
        return [expand_path(item, key, where) for item in value]
    if not isinstance(value, str):
        return value
    if _HOME.match(value):
        expanded = os.path.expanduser(value)
        if expanded.startswith("~") and "/" in value:  # else ~nosuchuser/x makes a folder '~nosuchuser' here
            user = value[1:].split("/", 1)[0]
            raise UserError(f"'{key}' in {where}: {value} names the home folder of a user '{user}', and this machine "
                            f"has none: write ~/ for your own home folder, or the path out")
        value = expanded
    if "/" not in value or "$" not in value or os.path.lexists(value):
        return value
    unset = [name for name in _VARIABLE.findall(value) if name not in os.environ]
    if unset:
        raise UserError(f"'{key}' in {where}: the environment variable ${unset[0]} in {value} is not set; set it "
                        f"(export {unset[0]}=...) or write the path out")
    return os.path.expandvars(value)


def writable(path: str | os.PathLike) -> bool:
    """Whether ``path`` can be written or made: the path itself if it exists, else the nearest folder above."""
    here = os.path.abspath(path)
    while not os.path.exists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return os.access(here, os.W_OK | os.X_OK if os.path.isdir(here) else os.W_OK)


def home_folder(variable: str, default: str) -> str | None:
    """An XDG folder: ``$variable``, else ``$HOME/default``; None without either."""
    home = os.environ.get("HOME")
    return os.environ.get(variable) or (os.path.join(home, default) if home else None)


def check_input_file(path: str | Path, what: str = "image") -> Path:
    """A file a command is about to read: a folder there gets its own message (else "not found" for a
    path that exists, or an IsADirectoryError from PIL)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder, not an {what}: give {what} files (e.g. {path / '*.png'})")
    if not path.is_file():
        raise UserError(f"{what} not found: {path}")
    return readable(path)


def readable(path: str | Path) -> Path:
    """``path`` when this process may read it (a folder: list and enter it), checked before a reader
    that would fail later (in a DataLoader worker, after training) or with another library's
    message; else the UserError of ``zoo.errors.no_access``."""
    path = Path(path)
    if not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
        raise no_access(path, write=False)
    return path


def make_folder(folder: str | Path, instead: str | None = None) -> Path:
    """``folder``, made with its parents when missing, to write files in; a UserError naming the folder
    that stops it (and the chmod that fixes it) when it cannot be made or written in."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except PermissionError as err:
        raise no_access(err.filename or folder, write=True, instead=instead) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise no_access(folder, write=True, instead=instead)
    return folder


def check_output_file(path: str | Path, option: str, writer: str | None = "image", example: str = "out.png",
                      inputs: list | None = None) -> Path:
    """A file a command is about to write: no file may stand where one of its folders would be (missing
    folders are made when it is written: ``make_folder(path.parent)``), the path must not be a
    folder, and its extension must name a format the writer knows (``image``: PIL's, which
    torchvision's save_image uses; ``figure``: matplotlib's savefig; None: any). save_image / savefig
    fail with a traceback only after the work is done. ``inputs``: files the command reads, which the
    output must not replace."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{option}={path} is a folder; give a file name, e.g. {option}={path / example}")
    for given in inputs or []:  # the command's own input files: an output there replaces the image it reads
        if path.is_file() and Path(given).is_file() and os.path.samefile(path, given):
            raise UserError(f"{option}={path} is one of the input files ({given}): writing there would replace it; "
                            f"choose another {option}= path")
    above = next((p for p in path.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"{option}={path}: {above} is a file, not a folder; choose another {option}= path")
    if not writable(path):
        raise no_access(path, write=True, instead=f"choose another {option}= path")
    if writer is None:
        return path
    formats = _output_formats(writer)
    if path.suffix.lower().lstrip(".") not in formats:
        what = f"'{path.suffix}' is not a format the zoo can write {writer}s in" if path.suffix else "no extension"
        shown = [f".{f}" for f in sorted(formats) if f in ("jpg", "pdf", "svg", "bmp", "gif", "tiff", "webp")]
        raise UserError(f"{option}={path}: {what}; end the file name in .png (or {', '.join(shown)})")
    return path


def _output_formats(writer: str) -> set[str]:
    if writer == "figure":
        from matplotlib.backend_bases import FigureCanvasBase  # imported when used: matplotlib

        return set(FigureCanvasBase.get_supported_filetypes())
    from PIL import Image  # imported when used: PIL

    Image.init()
    return {ext.lstrip(".") for ext, fmt in Image.registered_extensions().items() if fmt in Image.SAVE}


def config_folders_elsewhere() -> None:
    """A HOME that is unset or read-only (a container, a shared account): matplotlib, which torchmetrics
    imports with Lightning, warns on every command that it makes a temporary config folder instead.
    The command makes that folder itself, quietly (MPLCONFIGDIR). Before Lightning is imported."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    base = home_folder("XDG_CONFIG_HOME", ".config")
    if base is None or not writable(os.path.join(base, "matplotlib")):
        os.environ["MPLCONFIGDIR"] = folder = tempfile.mkdtemp(prefix="zoo-matplotlib-")
        atexit.register(shutil.rmtree, folder, True)


def working_folder_gone() -> bool:
    """True, with the error line printed, when the current folder was deleted or moved after the shell
    entered it: torch cannot even be loaded there (MKL's fatal error)."""
    try:
        os.getcwd()
    except FileNotFoundError:
        print("error: the current folder no longer exists (it was deleted or moved after this shell entered "
              "it): cd to an existing folder and run the command again", file=sys.stderr)
        return True
    return False


def sha256(path: Path) -> str:
    """The file's sha256 (hex), read in 1 MiB blocks: released weights and Hub folders are checked by it."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
