"""User mistakes vs bugs: a UserError becomes one message (its details, if any, on the lines below) and exit
status 2, no traceback."""

import errno
import os
import re
from pathlib import Path

LONG_MESSAGE = 300  # characters: a message longer than this puts its details (files, sizes, checksums, addresses)
FIRST_LINE = 200  # on the lines below a first line of at most this many, which says what is wrong and the fix


class UserError(Exception):
    """A mistake the user can fix (bad recipe, bad key, missing data, bad checkpoint). ``message``: what is wrong
    and the fix, one line; ``details``: lines shown below it (files, sizes, checksums, addresses), each indented."""

    exit_code = 2

    def __init__(self, message: str = "", details: list[str] | None = None):
        super().__init__(message, *([list(details)] if details else []))  # both in args: it pickles as it is

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def details(self) -> list[str]:
        """The lines below the message (a detail of several lines, e.g. another library's error, is split)."""
        return [part for line in (self.args[1] if len(self.args) > 1 else []) for part in str(line).splitlines()]

    def __str__(self) -> str:
        return "\n".join([self.message, *(f"  {line}" for line in self.details)])


def reads_well(err: UserError) -> bool:
    """A long message (over LONG_MESSAGE characters) has a first line of at most FIRST_LINE: what is wrong and the
    fix, its details below."""
    text = str(err)
    return len(text) <= LONG_MESSAGE or len(text.splitlines()[0]) <= FIRST_LINE


def as_user_error(err: BaseException) -> UserError | None:
    """``err`` itself when it is a UserError, a UserError for an allocation the machine cannot serve,
    for a file or folder the user may not read or write, for a full disk, for a path too long, or for
    a warning the user's filters made an error; None for anything else (a bug: its traceback is shown)."""
    if isinstance(err, UserError):
        return err
    return (out_of_memory(err) or permission_denied(err) or disk_full(err) or name_too_long(err)
            or warning_as_error(err) or image_too_large(err))


def out_of_memory(err: BaseException) -> UserError | None:
    """An allocation the machine cannot serve (most often a size or count with a zero too many):
    a UserError that names the request, or None when ``err`` is something else."""
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if not (isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    asked = re.search(r"tried to allocate (\d+) bytes", text)
    what = f"{int(asked.group(1)) / 2**30:.1f} GiB requested" if asked else " ".join(text.split())[:200]
    return UserError(f"out of memory ({what}): lower the sizes or counts asked for (batch_size, n, "
                     "hidden sizes, dims) or use a machine with more memory")


DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
FULL = (errno.ENOSPC, errno.EDQUOT)  # the disk, or the user's quota on it


def _os_errors(err: BaseException | None):
    """``err`` and the errors behind it (its cause, else its context), the OSErrors among them."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            yield err
        seen.add(id(err))
        err = err.__cause__ or (None if err.__suppress_context__ else err.__context__)


def permission_denied(err: BaseException) -> UserError | None:
    """A file or folder this process may not read or write (an OSError that names it, or the cause of
    another library's error): the UserError of ``no_access``; None for anything else."""
    for os_err in _os_errors(err):
        if os_err.errno in DENIED and os_err.filename:
            return no_access(os.fsdecode(os_err.filename), read_only_fs=os_err.errno == errno.EROFS)
    return None


def disk_full(err: BaseException) -> UserError | None:
    """A write the disk (or the user's quota) had no room for; None for anything else. Checkpoints
    are written to a temporary file first, so the last good one is still there."""
    for os_err in _os_errors(err):
        if os_err.errno in FULL:
            where = [f"writing {os.fsdecode(os_err.filename)}"] if os_err.filename else []
            return UserError(f"no space left ({os.strerror(os_err.errno).lower()}): free some space (or ask for more "
                             "quota), or write elsewhere (run_dir=, out=)", details=where)
    return None


def name_too_long(err: BaseException) -> UserError | None:
    """A path the file system refuses for its length (ENAMETOOLONG); None for anything else."""
    for os_err in _os_errors(err):
        if os_err.errno == errno.ENAMETOOLONG:
            path = os.fsdecode(os_err.filename or "")
            longest = max(Path(path).parts or [path], key=lambda part: len(os.fsencode(part)))
            if len(os.fsencode(longest)) > 255:
                why = f"its part {_shorten(longest, 40)} has {len(os.fsencode(longest))} bytes (a name may have 255)"
            else:
                why = f"it has {len(os.fsencode(path))} bytes (a path may have 4096)"
            return UserError(f"path too long: {_shorten(path)}: {why}; choose a shorter path (run_dir=, "
                             "data.root=, ...)")
    return None


def _shorten(text: str, keep: int = 100) -> str:
    return text if len(text) <= keep else f"{text[:keep // 2]}...{text[-keep // 2:]}"


def image_too_large(err: BaseException, path: str | os.PathLike | None = None) -> UserError | None:
    """An image PIL refuses to open for its size (DecompressionBombError: over 2 x 89 million pixels, a
    guard against decompression bombs); None for anything else. ``path``: the file, where it is known."""
    if type(err).__name__ != "DecompressionBombError":
        return None

    pixels, limit = (re.findall(r"(\d+) pixels", str(err)) + ["?", "?"])[:2]  # "Image size (N pixels) ... limit of M"
    what = f"{os.fspath(path)} is" if path is not None else "an image is"
    return UserError(f"{what} too large to read: {pixels} pixels, over PIL's limit of {limit} (a guard against "
                     "decompression bombs); scale it down first (e.g. convert IN -resize 4000x4000 OUT)")


def warning_as_error(err: BaseException) -> UserError | None:
    """A warning raised as an exception because the user's warning filters say so (PYTHONWARNINGS=error,
    python -W error); None for anything else."""
    if not isinstance(err, Warning):
        return None
    text = " ".join(str(err).split())
    return UserError(f"{type(err).__name__}: {text} (a warning, made an error by PYTHONWARNINGS or python -W: "
                     "act on it, or let this warning pass)")


def no_access(path: str | Path, write: bool | None = None, instead: str | None = None,
              read_only_fs: bool = False) -> UserError:
    """The message for a file or folder this process may not read (or write, ``write``): it names the
    file or folder whose permissions stop it and the chmod that fixes them, or ``instead`` another
    path. ``write=None``: judged from the permissions (a path that is missing, or that can be read,
    was being written)."""
    full = Path(os.path.abspath(path))
    closed = next((f for f in _existing_folders(full) if not os.access(f, os.X_OK)), None)
    if closed is not None:
        return _one_line_or_details(
            f"cannot reach {path}: permission denied on the folder {closed}; make it accessible "
            f"(chmod +rx {closed}) or {instead or 'give another path'}",
            f"cannot reach {Path(path).name}: permission denied on a folder above it; make it accessible (below) "
            f"or {instead or 'give another path'}", [f"path: {full}", f"chmod +rx {closed}"])
    is_dir, exists = os.path.isdir(full), os.path.lexists(full)
    if write is None:
        write = not exists or os.access(full, os.R_OK | (os.X_OK if is_dir else 0))
    if not write and not exists:
        return UserError(f"{path} not found; {instead or 'give another path'}")
    if not write:
        what, mode = ("the folder ", "+rx") if is_dir else ("", "+r")
        return _one_line_or_details(
            f"cannot read {what}{path}: permission denied; make it readable (chmod {mode} {full}) "
            f"or {instead or 'give another path'}",
            f"cannot read {what}{Path(path).name}: permission denied; make it readable (below) "
            f"or {instead or 'give another path'}", [f"path: {full}", f"chmod {mode} {full}"])
    if exists and not os.access(full, os.W_OK | (os.X_OK if is_dir else 0)):
        target = full
    else:  # a file or folder to be made (or a temporary file beside it): its folder is the obstacle
        target = next(p for p in full.parents if os.path.isdir(p))
    if read_only_fs:
        return UserError(f"cannot write {path}: {target} is on a read-only file system; "
                         f"{instead or 'choose another path'}")
    what, mode = ("the folder ", "u+wx") if os.path.isdir(target) else ("", "u+w")
    where = "permission denied" if target == full else f"{what}{target} is not writable"
    short = "permission denied" if target == full else f"{what}above it is not writable"
    return _one_line_or_details(
        f"cannot write {path}: {where}; make it writable (chmod {mode} {target}) or {instead or 'choose another path'}",
        f"cannot write {Path(path).name}: {short}; make it writable (below) or {instead or 'choose another path'}",
        [f"path: {full}", f"chmod {mode} {target}"])


def _one_line_or_details(line: str, short: str, details: list[str]) -> UserError:
    """``line`` where it fits FIRST_LINE; else ``short`` (what is wrong and the fix, without the long paths) with
    ``details`` (the paths and the command) on the lines below."""
    return UserError(line) if len(line) <= FIRST_LINE else UserError(short, details=details)


def _existing_folders(path: Path) -> list[Path]:
    """The folders above ``path`` from / down, as far as they exist."""
    folders = []
    for folder in reversed(path.parents):
        if not os.path.isdir(folder):
            break
        folders.append(folder)
    return folders


