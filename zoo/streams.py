"""The standard streams of a command, whatever the shell gave it: closed (``>&-``, a cron job), a
reader that went away (``| head -1``), a full device (``> /dev/full``). What a command prints can
then be lost, never the run: a progress bar that cannot be drawn does not stop training half-way.

``leave(run_command(main))`` is every command's ``__main__`` entry. The folders around a command are
checked here too, before torch loads: a working folder deleted under the shell, a HOME that is unset or
read-only."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class LossyStream:
    """A text stream that drops what it cannot write: at the first failure its file descriptor is
    pointed at /dev/null, so later writes, the interpreter's last flush and child processes that
    inherit it go nowhere; ``failure`` keeps the error."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.failure: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as err:
            self._lost(err)
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as err:
            self._lost(err)

    def _lost(self, err: OSError) -> None:
        if self.failure is None:
            self.failure = err
            try:
                _to_devnull(self.stream.fileno())
            except (OSError, ValueError):  # no descriptor (a stream in memory): the writes are dropped all the same
                pass

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, ...: the stream's
        return getattr(self.stream, name)


def _to_devnull(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def guard_streams() -> LossyStream | None:
    """Standard input, output and error that a command can always use: a descriptor the shell closed
    is opened on /dev/null (else the next file opened takes its number and gets what is printed),
    and output and error drop what cannot be written. Returns the guarded standard output (None: none)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if not _is_open(fd):
            _to_devnull(fd)
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, LossyStream):
            setattr(sys, name, LossyStream(stream))
    return sys.stdout if isinstance(sys.stdout, LossyStream) else None


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


def config_folders_elsewhere() -> None:
    """A HOME that is unset or read-only (a container, a shared account): matplotlib, which torchmetrics
    imports with Lightning, warned on every command that it made a temporary config folder instead.
    The command makes that folder itself, quietly (MPLCONFIGDIR). Before Lightning is imported."""
    import tempfile

    if os.environ.get("MPLCONFIGDIR"):
        return
    base = home_folder("XDG_CONFIG_HOME", ".config")
    if base is None or not writable(os.path.join(base, "matplotlib")):
        import atexit
        import shutil

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


def run_command(main: Callable[[], int]) -> int:
    """``main()``'s exit status, with the streams guarded. Output lost to a reader that went away
    (``| head -1``) is what the reader asked for; lost otherwise (a full disk) it is one error line
    and exit status 2, though the command did its work (a run folder is whole)."""
    out = guard_streams()
    if working_folder_gone():
        return 2
    code = main()
    if out is None:
        return code
    out.flush()
    lost = out.failure
    if lost is not None and lost.errno != errno.EPIPE and not code:
        print(f"error: cannot write the standard output ({os.strerror(lost.errno or errno.EIO).lower()}): what "
              "this command printed there is lost, though it ran to its end; send the output elsewhere (a file "
              "on a disk with room, or the screen)", file=sys.stderr)
        return 2
    return code


def leave(code: int) -> NoReturn:
    """Exit with ``code`` once the command's work is done, without the interpreter's teardown: after
    torch and Lightning are loaded, freeing every module and the C++ libraries' statics takes ~1 s
    (`benchmarks/results/exit_teardown.json`). What that teardown does for the command's output still
    happens: the exit handlers run (loggers, W&B, temporary folders, data-loader workers), every file
    still open is flushed, then the standard streams. Python exits as usual (``sys.exit``) while a
    thread that is not a daemon still runs (it waits for the thread), and when the command was started
    by something that goes on after it: a profiler (``python -m cProfile -m zoo.train``), a debugger,
    or a program calling ``runpy``."""
    import _io  # the C base of every file object: a plain type check (io.IOBase's ABC check costs ~0.4 s here)
    import atexit
    import gc
    import signal
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    if not _started_by_the_interpreter(sys._getframe(1)):
        sys.exit(code)
    if threading.current_thread() is threading.main_thread():  # Ctrl-C from here on: a traceback of the exit
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit._run_exitfuncs()  # what sys.exit runs first, in the same order (the last registered first)
    for obj in gc.get_objects():  # files opened and never closed: written as the teardown would
        # type(), not isinstance: that reads obj.__class__, which some deprecated objects answer with a warning
        if issubclass(type(obj), _io._IOBase):
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except (OSError, ValueError):  # a broken pipe, a full disk: lost either way
                pass
    for stream in (sys.stdout, sys.stderr):  # the zoo's LossyStream wrappers are not file objects
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _started_by_the_interpreter(frame: Any) -> bool:
    """True when only the interpreter's own start-up lies below ``frame`` (the command's ``__main__``
    code or console-script function): ``python -m`` (runpy's ``_run_module_as_main``), a script, or
    a console script's module. Anything else below it (cProfile, pdb, a program's ``runpy.run_module``)
    has work left to do once the command returns."""
    below = frame.f_back
    while below is not None:
        code = below.f_code
        interpreter = (code.co_name in ("_run_module_as_main", "_run_code") and "runpy" in code.co_filename) or (
            code.co_name == "<module>" and below.f_back is None)
        if not interpreter:
            return False
        below = below.f_back
    return True


def zoo_train() -> NoReturn:
    """The ``zoo-train`` console script (pyproject.toml): ``python -m zoo.train``, streams guarded."""
    config_folders_elsewhere()
    from zoo.train import main

    leave(run_command(main))
