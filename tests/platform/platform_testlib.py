"""Helpers for the platform tests (a plain module: `conftest` names clash between test folders)."""

import os
from pathlib import Path

PLATFORM = Path(__file__).resolve().parent
ROOT = PLATFORM.parent.parent


def subprocess_env() -> dict:
    """Environment for `python -m zoo...` subprocesses: the toy model importable, one thread."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PLATFORM), str(ROOT), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_main(argv: list[str], capsys) -> tuple[int, str]:
    """``python -m zoo.train ARGV`` in this process: (exit status, what it wrote to stderr)."""
    from zoo.train import main

    code = main(argv)
    return code, capsys.readouterr().err
