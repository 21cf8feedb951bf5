"""The run's record: what a run's numbers depend on besides its config. The code (the git commit of the zoo's
checkout, and whether tracked files had uncommitted changes), the versions of the zoo, Python, torch and
Lightning, the machine (host, CPU model, cores, torch's threads: bit-reproducibility on the CPU depends on the CPU
type and the thread count) and the device the model trained on, and the estimator with every option resolved
(``estimator: rloo`` in a recipe names its options' defaults). Written as ``run.json`` in the run folder
(``run.resume-N.json`` beside a resumed run's ``config.resume-N.yaml``) and kept in every checkpoint, under
``checkpoint["zoo"]["record"]`` (a checkpoint without it loads as before)."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

import zoo
from zoo.estimators.seam import resolved_estimator

SOURCE = Path(zoo.__file__).resolve().parent.parent  # the folder that holds the zoo package: a git checkout's root
GIT_TIMEOUT_S = 10.0  # `git status` on a checkout of the zoo's size takes well under a second


def run_record(model_options: Any = None) -> dict:
    """The record of a run about to start, as plain data (JSON; a checkpoint loaded with weights_only=True holds
    it). ``model_options``: the model's validated options object (``zoo.config.LoadedRun.model_options``), whose
    checked estimator it names; None (or a plain dict of options) leaves the estimator out."""
    record = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git": git_state(SOURCE),
              "versions": {"zoo": zoo.__version__, "python": platform.python_version(), "torch": torch.__version__,
                           "lightning": L.__version__, "cuda": torch.version.cuda},
              "host": {"name": socket.gethostname(), "os": platform.platform(), "cpu": cpu_model(),
                       "cores": os.cpu_count(), "threads": torch.get_num_threads()},
              "device": None,  # set once fit starts (RunRecord), in the process that trains
              "estimator": resolved_estimator(model_options) if model_options is not None else None}
    return json.loads(json.dumps(record, default=str))  # a user's estimator option of another type: its text


def git_state(folder: Path) -> dict | None:
    """``{"commit", "branch", "dirty"}`` of the git checkout whose root is ``folder``, None where it is none (an
    installed zoo). Read from the files under ``.git`` (a worktree's ``.git`` file, packed refs): no git program
    needed. ``dirty``: whether tracked files differ from the commit, from ``git status`` where git is installed,
    else None (unknown); ``branch`` None on a detached HEAD."""
    try:
        gitdir = _gitdir(folder)
        if gitdir is None:
            return None
        common = gitdir
        if (gitdir / "commondir").is_file():  # a linked worktree: its refs live in the main checkout's folder
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        head = (gitdir / "HEAD").read_text().strip()
        branch = head[len("ref: "):] if head.startswith("ref: ") else None
        commit = _ref(branch, gitdir, common) if branch else head
    except (OSError, UnicodeDecodeError):
        return None
    if commit is None or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        return None  # a branch with no commit yet, or files this reading does not know
    return {"commit": commit, "branch": branch.removeprefix("refs/heads/") if branch else None,
            "dirty": _dirty(folder)}


def _gitdir(folder: Path) -> Path | None:
    dot = folder / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
        text = dot.read_text().strip()
        if text.startswith("gitdir: "):
            return (folder / text[len("gitdir: "):]).resolve()
    return None


def _ref(name: str, gitdir: Path, common: Path) -> str | None:
    for folder in (gitdir, common):
        if (folder / name).is_file():
            return (folder / name).read_text().strip()
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text().splitlines():
            sha, _, ref = line.partition(" ")
            if ref.strip() == name:
                return sha
    return None


def _dirty(folder: Path) -> bool | None:
    """Whether tracked files have changes (staged or not); untracked files do not count. None without git."""
    try:
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(folder), "status", "--porcelain",
                               "--untracked-files=no"], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):  # no git program, or it hung
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None  # 128: e.g. git's "dubious ownership"


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what Python's platform module knows of it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_state(device: torch.device) -> dict:
    """The device a model trains on: its name (``cuda:0``) and, for a GPU, its model."""
    state = {"name": str(device), "model": None}
    if device.type == "cuda":
        state["model"] = torch.cuda.get_device_name(device)
    return state


class RunRecord(L.Callback):
    """Completes ``record`` with the device once fit starts (in the process that trains: a GPU is asked its name
    only there) and writes it to ``path`` (set by ``zoo.runner.fit``: the run folder's ``run.json``) from the
    process of rank 0. ``record`` is the dict the checkpoints' run info holds, so they keep the device too."""

    def __init__(self, record: dict):
        self.record, self.path = record, None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.record["device"] = {**device_state(pl_module.device), "processes": trainer.world_size}
        if trainer.is_global_zero and self.path is not None:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(self.record, indent=2) + "\n")
            os.replace(tmp, self.path)
