"""Paths in options as a shell user writes them: ``run_dir=~/runs`` or ``data.root=$SCRATCH/data`` in
a recipe, in quotes, or in a shell that leaves ``~`` after ``=`` alone (zsh, sh) reach the zoo as
typed; taken literally they made a folder named ``~`` or ``$SCRATCH`` in the working directory."""

from __future__ import annotations

import os
import re
from typing import Any

from zoo.errors import UserError

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
        if expanded.startswith("~") and "/" in value:  # ~nosuchuser/x made a folder '~nosuchuser' in the working one
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
