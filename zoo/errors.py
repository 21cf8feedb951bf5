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
