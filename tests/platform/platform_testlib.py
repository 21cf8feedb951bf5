"""Helpers for the platform tests (a plain module: `conftest` names clash between test folders)."""

import os
import re
import subprocess
import sys
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


def one_message(err: str) -> bool:
    """``err`` (what a command wrote to stderr) is one message: its ``error:`` line, then only that error's
    details (files, lists, addresses), each indented below it."""
    lines = err.strip().splitlines()
    return bool(lines) and lines[0].startswith("error: ") and all(line.startswith("  ") for line in lines[1:])


def assert_refused(code: int, err: str, expected: str, runs: Path) -> None:
    """A refused command: exit status 2, one ``error:`` line (its details, if any, indented below it) that with
    its details matches ``expected``, no traceback, and no run folder written under ``runs``."""
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and all(line.startswith("  ") for line in lines[1:]), err
    assert re.search(expected, "\n".join(lines)), err
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


def heavy_modules_imported_by(code: str) -> list[str]:
    """Runs ``code`` in a fresh interpreter (it must exit 0) and returns which of torch and Lightning it imported:
    the checks a user's mistake meets before a run starts stay light."""
    probe = "\nimport sys\nprint('heavy:', ','.join(m for m in ('torch', 'lightning') if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code + probe], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.rsplit("heavy:", 1)[1].strip().split(",") if m]


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


# what a test forkserver imports once (a fresh interpreter: ~7 s of CPU for torch and Lightning), so that each
# child it forks starts in milliseconds
PRELOAD = ["platform_testlib", "torch", "lightning.pytorch", "zoo.train"]


def forkserver():
    """multiprocessing's forkserver context with the zoo preloaded. One server per test process, started by the
    first child; every caller names the same modules (the server keeps the first list it was given)."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def command_in_child(module: str, argv: list[str], env: dict, log: str) -> None:
    """``python -m MODULE ARGV`` with environment ``env`` in a forkserver's child, stdout and stderr in ``log``.
    The exit handlers run before the child ends, as the interpreter's exit runs them (a forked child skips them)."""
    import atexit
    import runpy

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1), os.dup2(fd, 2)
    os.environ.clear()
    os.environ.update(env)
    import torch

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        atexit._run_exitfuncs()


class ForkedCommand:
    """``python -m MODULE ARGV`` started as a forkserver's child rather than a new interpreter (milliseconds
    rather than seconds), with the part of ``subprocess.Popen(..., stdout=PIPE, stderr=STDOUT, text=True)`` the
    tests use: ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``communicate`` and ``returncode``. The
    command runs as it would from the shell, signal handlers, exit status and output included; what it cannot
    show is what happens while an interpreter starts (warnings at import, an environment read at start-up):
    tests of those start a real ``python``."""

    def __init__(self, module: str, argv: list[str], env: dict, log_dir: Path):
        import tempfile

        fd, log = tempfile.mkstemp(prefix="command-", suffix=".log", dir=log_dir)  # output; one per command
        os.close(fd)
        self.log = Path(log)
        self._process = forkserver().Process(target=command_in_child, args=(module, argv, env, str(self.log)))
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(f"python -m ... (pid {self.pid})", timeout)
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self._process.kill()

    def communicate(self, timeout: float | None = None) -> tuple[str, None]:
        self.wait(timeout)
        return self.log.read_text(errors="replace"), None


def run_forked(module: str, argv: list[str], env: dict, log_dir: Path,
               timeout: float = 600) -> subprocess.CompletedProcess:
    """``subprocess.run([python, -m, MODULE, *ARGV], env=env, capture_output=True, text=True)`` through a
    ``ForkedCommand``: ``stdout`` and ``stderr`` both hold the command's whole output."""
    command = ForkedCommand(module, argv, env, log_dir)
    try:
        out, _ = command.communicate(timeout)
    except subprocess.TimeoutExpired:
        command.kill()
        raise
    return subprocess.CompletedProcess([module, *argv], command.returncode, out, out)


def released_checkpoint(path: Path, model: str = "dvae", estimator: str | None = None, data: str | None = None) -> str:
    """A zoo checkpoint (as zoo.train writes it) of the released dvae-digits weights, no training needed; its run
    info names ``model``, ``estimator`` and ``data`` (the datamodule), e.g. a dotted path of someone else's."""
    import json

    import torch
    from safetensors.torch import load_file

    from zoo.loading import PRETRAINED_DIR, pretrained_cards

    card = pretrained_cards()["dvae-digits"]
    hparams = json.loads(json.dumps(card["hyper_parameters"]))
    if estimator is not None:
        hparams["cfg"]["estimator"] = {"name": estimator}
    info = {"format": 1, "model": model, "data": {**card["data"], "name": data or card["data"]["name"]},
            "recipe": "dvae_digits", "command": "python -m zoo.train recipe=dvae_digits", "config": {"seed": 0}}
    torch.save({"zoo": info, "state_dict": load_file(str(PRETRAINED_DIR / card["weights"])),
                "hyper_parameters": hparams, "epoch": 0, "global_step": 1}, path)
    return str(path)
