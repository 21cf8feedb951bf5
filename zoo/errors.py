"""User mistakes vs bugs: a UserError becomes one message and exit status 2, no traceback."""

import argparse
import sys


class UserError(Exception):
    """A mistake the user can fix (bad recipe, bad key, missing data, bad checkpoint)."""

    exit_code = 2


class CommandLineParser(argparse.ArgumentParser):
    """argparse whose usage mistakes (a missing argument, an unknown flag or sub-command) are one
    'error:' line and exit status 2, like every other user mistake (argparse prints its usage block
    first); ``--help`` shows the usage as before."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def as_user_error(err: BaseException) -> UserError | None:
    """``err`` itself when it is a UserError, a UserError for an allocation the machine cannot serve,
    or None for anything else (a bug: its traceback is shown)."""
    return err if isinstance(err, UserError) else out_of_memory(err)


def out_of_memory(err: BaseException) -> UserError | None:
    """An allocation the machine cannot serve (most often a size or count with a zero too many):
    a UserError that names the request, or None when ``err`` is something else."""
    import re

    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if not (isinstance(err, MemoryError) or type(err).__name__ == "OutOfMemoryError"
            or "can't allocate memory" in text or "out of memory" in text.lower()):
        return None
    asked = re.search(r"tried to allocate (\d+) bytes", text)
    what = f"{int(asked.group(1)) / 2**30:.1f} GiB requested" if asked else " ".join(text.split())[:200]
    return UserError(f"out of memory ({what}): lower the sizes or counts asked for (batch_size, n, "
                     "hidden sizes, dims) or use a machine with more memory")
