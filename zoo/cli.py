"""The home of the zoo's commands (``python -m zoo.train`` / ``evaluate`` / ``predict`` / ``pretrained`` /
``estimators`` and their ``zoo-*`` console scripts): how a command runs and ends, and what its
failures look like.

- ``run(main)``: every command's entry point. Standard streams that a shell closed (``>&-``, a cron
  job), a reader that went away (``| head -1``) or a full device (``> /dev/full``) lose what is
  printed, never the run; a working folder deleted under the shell and a HOME that is unset or
  read-only are answered before torch loads (``zoo.paths``); the interpreter's ~1 s teardown is skipped
  (``leave``).
- ``exit_status``: the zoo's rule for failures. A user's mistake (a ``zoo.errors.UserError``, or an
  allocation, a permission, a full disk it caused) is one ``error:`` line and status 2; Ctrl-C is one
  line and 130; anything else is a bug and keeps its traceback.
- Lightning's refusals: of a Trainer's settings (``build_trainer``), of settings that show only once
  fit or test runs (``user_error_in_fit``), and its Ctrl-C handling (``ctrl_c_in_lightning``).
- ``CommandLineParser`` (argparse, its mistakes as above) and the metric tables commands print.

Torch-free: a command imports it before torch.
"""

from __future__ import annotations

import _io  # the C base of every file object: a plain type check in leave (io.IOBase's ABC check is slow)
import argparse
import atexit
import contextlib
import errno
import gc
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from zoo.errors import UserError, as_user_error
from zoo.messages import HeldMessages, quiet_lightning
from zoo.paths import config_folders_elsewhere, working_folder_gone


def run(main: Callable[[], int]) -> NoReturn:
    """A command's entry point (its ``__main__`` block and its console script): ``main()`` with the
    streams guarded, its exit status, and no teardown (``leave``)."""
    config_folders_elsewhere()
    leave(run_command(main), sys._getframe(1))


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


def leave(code: int, frame: Any = None) -> NoReturn:
    """Exit with ``code`` once the command's work is done, without the interpreter's teardown: after
    torch and Lightning are loaded, freeing every module and the C++ libraries' statics takes ~1 s
    (`benchmarks/results/exit_teardown.json`). What that teardown does for the command's output still
    happens: the exit handlers run (loggers, W&B, temporary folders, data-loader workers), every file
    still open is flushed, then the standard streams. Python exits as usual (``sys.exit``) while a
    thread that is not a daemon still runs (it waits for the thread), and when the command was started
    by something that goes on after it: a profiler (``python -m cProfile -m zoo.train``), a debugger,
    or a program calling ``runpy``. ``frame``: the command's entry (default: the caller's)."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    if not _started_by_the_interpreter(frame or sys._getframe(1)):
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


class CommandLineParser(argparse.ArgumentParser):
    """argparse whose usage mistakes (a missing argument, an unknown flag or sub-command) are one
    'error:' line and exit status 2, like every other user mistake (argparse prints its usage block
    first); ``--help`` shows the usage as before."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def exit_status(run: Callable[[], int]) -> int:
    """``run()``'s exit status under the zoo's rule for failures, shared by every command: a user's
    mistake (or an allocation, a permission or a full disk it caused: ``as_user_error``) is one
    'error:' line (its details, where it has any, indented below) and status 2; Ctrl-C outside
    training (which saves and stops on its own) is one line and 130, as the shell gives a command
    stopped by SIGINT; anything else is a bug and keeps its traceback."""
    try:
        check_thread_variables()
        return run()
    except KeyboardInterrupt as err:  # its text, where raised by the zoo: what the interrupted run left
        print("interrupted (Ctrl-C)" + (f": {err}" if str(err) else ""), file=sys.stderr)
        return 130
    except Exception as err:
        user = as_user_error(err)
        if user is None:
            raise
        one_line = " ".join(line.strip() for line in user.message.splitlines() if line.strip())  # Lightning's may wrap
        print(f"error: {one_line}", *(f"  {line}" for line in user.details), sep="\n", file=sys.stderr)
        return user.exit_code


def check_thread_variables() -> None:
    """OMP_NUM_THREADS, read by torch's OpenMP runtime as torch loads: a value it cannot read (``abc``, ``0``,
    ``1.5``) was two lines of libgomp's before anything else, and the run went on with its own default."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.strip() and not re.fullmatch(r"\s*[1-9]\d*(\s*,\s*[1-9]\d*)*\s*", value):
        raise UserError(f"the environment variable OMP_NUM_THREADS={value!r} is not a number of threads: set it to "
                        "a whole number >= 1 (e.g. OMP_NUM_THREADS=1), or unset it")


@contextlib.contextmanager
def ctrl_c_in_lightning(trainer: Any, left: Callable[[], str] = lambda: "") -> Iterator[None]:
    """Ctrl-C inside ``trainer.fit`` / ``test``: Lightning prints its own line and calls ``sys.exit(1)``
    (status 1 reads as a failure, not an interruption); turned into the KeyboardInterrupt that
    ``exit_status`` answers with one line and 130, saying what ``left()`` says was kept."""
    try:
        yield
    except SystemExit:
        if not trainer.interrupted:
            raise
        raise KeyboardInterrupt(left()) from None


def user_error_in_fit(err: Exception) -> UserError | None:
    """Lightning's complaints about the user's settings that only show once training or testing runs
    (a monitored metric the model never logs, a validation interval longer than the epoch): a
    UserError (``err`` itself when it is one), or None for anything else (a bug)."""
    message = " ".join(str(err).split())
    if type(err).__name__ == "MisconfigurationException":
        return lightning_refusal("settings", message)
    if isinstance(err, ValueError) and message.startswith("`val_check_interval`"):
        return UserError(f"trainer.val_check_interval: {message}")
    if isinstance(err, RuntimeError) and message.startswith("Early stopping conditioned on metric"):
        return UserError(f"callback 'early_stopping': {message}")
    return as_user_error(err)  # out of memory, a file the user may not read or write


def lightning_refusal(what: str, reason: str, details: list[str] | None = None) -> UserError:
    """Lightning's refusal of a setting as "invalid <what>: <its first sentence>", the fix where one is known;
    the rest of Lightning's words and ``details`` below."""
    text = " ".join(reason.split())
    first, _, rest = text.partition(". ")
    return UserError(f"invalid {what}: {first}{'.' if rest else ''}{_fix_hint(text)}",
                     details=[*([rest] if rest else []), *(details or [])])


def build_trainer(make: Callable[[], Any], what: str, details: list[str] | None = None) -> Any:
    """``make()`` (which builds a lightning.Trainer) with Lightning's start-up lines held back; a
    setting Lightning refuses, on the way in or halfway through its __init__, is one UserError
    "invalid <what>: ..." (nothing is written yet: run folders are made after this); ``details``: lines
    below it (the settings)."""
    quiet_lightning()
    try:
        with HeldMessages():
            return make()
    except (ValueError, TypeError) as err:
        raise lightning_refusal(what, str(err), details) from None
    except ImportError as err:  # e.g. trainer.accelerator=tpu without torch_xla
        raise UserError(f"the trainer settings need a package that is not installed: {err}") from None
    except Exception as err:
        if type(err).__name__ == "MisconfigurationException":  # e.g. limit_train_batches=1.5
            raise lightning_refusal(what, str(err), details) from None
        message = " ".join(str(err).split())
        if isinstance(err, RuntimeError) and message.startswith("Found more than one stateful callback"):
            # callbacks=[ema, ema]: two instances whose checkpointed states would share one key
            raise UserError(f"callbacks: {message.split('. In the current')[0]}: list it once") from None
        raise


def _fix_hint(reason: str) -> str:
    """The fix for the refusals met most (Lightning's reason names only what is wrong)."""
    if "gpu backend" in reason or "accelerator is not available" in reason:
        return " Use trainer.accelerator=cpu, or auto (a GPU when there is one)"
    if "Trainer(devices=" in reason and "not a valid input" in reason:
        return " trainer.devices must be >= 1, -1 (all devices) or auto"
    if "You requested gpu" in reason and "only has" in reason:  # trainer.devices=[0,1] on a machine with one GPU
        return " trainer.devices lists GPU indices this machine has, or is a count: use trainer.devices=1"
    if "selected with `CPUAccelerator`" in reason:  # devices=[0] or "1,2": GPU indices on a machine without one
        return " On the CPU, trainer.devices is a number of processes, e.g. trainer.devices=1"
    return ""


def in_order(metrics: dict[str, float]) -> list[tuple[str, float]]:
    """Metrics sorted by name, numbers inside names by value (loss_2 before loss_10)."""
    return sorted(metrics.items(), key=lambda kv: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", kv[0])])


def format_table(metrics: dict[str, float]) -> str:
    width = max((len(k) for k in metrics), default=6)
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  ---------"]
    lines += [f"{k:<{width}}  {v:.4f}" for k, v in in_order(metrics)]
    return "\n".join(lines)
