"""One run of a sweep (``zoo.sweep``), whichever launcher starts it: its plan (``Run``, ``Sweep``), its
``python -m zoo.train`` process and its ``result.json``, and whether an earlier try ended or is resumed."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from zoo.errors import UserError
from zoo.loading import read_checkpoint
from zoo.run_folder import check_left_to_train


@dataclass
class Run:
    """One combination: its label (its folder's name), the swept options' values and its overrides."""

    label: str
    values: dict[str, str]  # swept key -> value, as given on the command line
    overrides: list[str]  # everything zoo.train gets after recipe= (fixed options, then swept ones)
    threads: int = 0  # torch / OpenMP threads (0: the recipe's)
    resources: dict = field(default_factory=dict)  # from the run's trainer section: nodes, tasks, gpus, cpus
    limits: dict = field(default_factory=dict)  # its trainer's max_epochs / max_steps: is a last.ckpt done training?


@dataclass
class Sweep:
    name: str
    folder: Path
    recipe: str
    options: dict[str, list[str]]  # swept key -> values, in the order given
    fixed: list[str]  # key=value every run gets
    runs: list[Run]
    command: str
    wandb: bool = False  # a run logs to W&B: the runs are grouped by the sweep's name
    parallel: int = 1
    retry_failed: bool = False  # started again: run the failed runs again too

    def plan(self) -> dict:
        return {"format": 1, "name": self.name, "recipe": self.recipe, "options": self.options, "fixed": self.fixed,
                "command": self.command, "runs": [asdict(r) for r in self.runs]}


# ---------------------------------------------------------------- one run


def run_folder(sweep_folder: Path, run: Run) -> Path:
    return sweep_folder / run.label


def read_result(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "result.json").read_text())
    except (OSError, ValueError):
        return None


def resumable(folder: Path, recipe: str, limits: dict) -> bool:
    """An earlier try of this run was stopped (no result.json: a kill, a requeued job; or an interrupt)
    after it saved ``last.ckpt`` with training left to do: it goes on from there with ``ckpt_path=last``
    (one stopped while testing starts again: a resume would be refused, with nothing left to train)."""
    before = read_result(folder)
    if before is not None and before.get("rc") not in INTERRUPTED:
        return False
    found = sorted((folder / Path(recipe).stem).glob("*/checkpoints/last.ckpt"), key=lambda p: p.stat().st_mtime)
    if not found:
        return False

    try:
        check_left_to_train(str(found[-1]), read_checkpoint(found[-1], mmap=True), limits)
    except UserError:
        return False
    return True


def train_command(recipe: str, run: Run, folder: Path) -> list[str]:
    cmd = [sys.executable, "-m", "zoo.train", f"recipe={recipe}", *run.overrides, f"run_dir={folder}"]
    if not any(o.startswith("trainer.enable_progress_bar=") for o in run.overrides):
        cmd.append("trainer.enable_progress_bar=false")  # its output goes to a file
    if resumable(folder, recipe, run.limits):
        cmd.append("ckpt_path=last")
    return cmd


def run_env(run: Run, group: str | None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    if run.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(run.threads)
    if group:
        env["WANDB_RUN_GROUP"] = group  # wandb.init's group when none is given: the sweep's runs together
    env.update(extra or {})
    return env


def last_error(stderr: str) -> str:
    """The run's last 'error:' line (the zoo's one-line message), else the last line of its stderr
    (a traceback's exception)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    return (errors or lines or [""])[-1]


def execute(recipe: str, run: Run, folder: Path, group: str | None = None, env: dict | None = None) -> dict:
    """``python -m zoo.train`` for one run in its own process; its output to <folder>/train.log and
    train.err, its outcome to <folder>/result.json (written whole, or not at all)."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = train_command(recipe, run, folder)
    t0 = time.time()
    with open(folder / "train.log", "w") as out, open(folder / "train.err", "w") as err:
        rc = subprocess.run(cmd, stdout=out, stderr=err, env=run_env(run, group, env)).returncode
    stdout, stderr = (folder / "train.log").read_text(), (folder / "train.err").read_text()
    result = {"label": run.label, "values": run.values, "rc": rc, "wall_s": round(time.time() - t0, 1),
              "command": shlex.join(["python", *cmd[1:]]), "resumed": "ckpt_path=last" in cmd, "metrics": {}}
    found = re.findall(r"^run folder: (.+)$", stdout, re.M)
    if found:
        result["run_dir"] = found[-1]
        metrics = Path(found[-1]) / "metrics.json"
        if metrics.is_file():
            result["metrics"] = json.loads(metrics.read_text())
    if rc == 0 and re.search(r"^  not tested \(interrupted\)", stdout, re.M):  # Ctrl-C / SIGTERM: saved, exit 0
        rc = result["rc"] = 130
    if rc:
        result["error"] = last_error(stderr) if rc != 130 else "interrupted (its last.ckpt is kept: started again, " \
            "the sweep resumes it)"
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(folder / "result.json")
    return result


INTERRUPTED = (130, -2, -9, -15)  # Ctrl-C, SIGINT, SIGKILL, SIGTERM: stopped, not failed


def finished(folder: Path, retry_failed: bool = False) -> dict | None:
    """The result of a run that ended before (skipped when the sweep is started again): one that
    succeeded, or failed on its own (with ``retry_failed``: succeeded only). A run stopped from
    outside (Ctrl-C, a kill, a requeued job) is not finished: it goes on from its last.ckpt."""
    result = read_result(folder)
    if result is None or result.get("rc") in INTERRUPTED:
        return None
    return result if result.get("rc") == 0 or not retry_failed else None


