"""Helpers for the platform tests (a plain module: `conftest` names clash between test folders)."""

import os
import re
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


def assert_refused(code: int, err: str, expected: str, runs: Path) -> None:
    """A refused command: exit status 2, one ``error:`` line matching ``expected``, no traceback, and no
    run folder written under ``runs``."""
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(expected, lines[0]), err
    assert not runs.exists() or not any(runs.iterdir()), "nothing written for a refused run"


DROP = "-dac_override,-dac_read_search"


def enforced(argv: list[str]) -> list[str]:
    """``argv`` run so that file permissions apply: as root, under setpriv without the capabilities
    that bypass them; as another user, as it is."""
    import shutil

    import pytest

    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("these tests run as root, where chmod stops no read: they need setpriv (util-linux, "
                    "e.g. apt-get install util-linux) to drop CAP_DAC_OVERRIDE; it is not installed")
    return [setpriv, f"--inh-caps={DROP}", f"--bounding-set={DROP}", *argv]


def train_in_child(argv: list[str], log: str) -> None:
    """``zoo.train.train(argv)`` with its output in ``log``: the target of a process that a test kills (a
    forkserver's child: forked from a fresh interpreter that imported torch and Lightning once, not from the test
    process, whose state a fork would copy: numba's OpenMP pool, once started, sends a forked child SIGTERM)."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1), os.dup2(fd, 2)
    from zoo.train import train

    train(argv)


def exec_in_child(code: str, cwd: str, log: str) -> None:
    """``code`` run as a script in ``cwd``, its output in ``log``, W&B off and one torch thread: a forkserver's
    child (see ``train_in_child``), so what it registers or changes ends with it."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1), os.dup2(fd, 2)
    os.chdir(cwd)
    os.environ.update(WANDB_MODE="disabled", OMP_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)
    exec(compile(code, "<runner>", "exec"), {"__name__": "__main__"})
