"""The README's SLURM path, simulated: ``#SBATCH --signal=SIGUSR1@90`` makes SLURM send SIGUSR1
before the time limit; Lightning's SLURM plugin answers by saving ``hpc_ckpt_<n>.ckpt`` in the run
folder and calling ``scontrol requeue <job id>``; SLURM then stops the job with SIGTERM, on which
the zoo saves ``checkpoints/last.ckpt``; the requeued job (same id, same command) finds its folder
``runs/<recipe>/slurm-<job id>/`` and resumes from the newer of the two checkpoints.

SLURM's environment variables are set by hand, ``scontrol`` is a script that records its
arguments, and the signals come from a callback (tests/platform/slurm_signals.py)."""

import os
import shutil
import subprocess
from pathlib import Path

import torch
from platform_testlib import run_forked, subprocess_env

from zoo.run_folder import resolve_run_dir
from zoo.train import train

SLURM_ENV = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "zoo", "SLURM_NTASKS": "1", "SLURM_PROCID": "0",
             "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost"}
COMMON = ["trainer.max_epochs=3", "trainer.deterministic=true", "test_after_fit=false"]


def slurm_env(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.log"}\n')
    scontrol.chmod(0o755)
    env = {**subprocess_env(), **SLURM_ENV}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def assert_same_weights(a: dict, b: dict) -> None:
    assert a["state_dict"].keys() == b["state_dict"].keys()
    for key in a["state_dict"]:
        assert torch.equal(a["state_dict"][key], b["state_dict"][key]), key


def run_job(toy_recipe: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """``python -m zoo.train`` as SLURM would start it (a forkserver's child: its own process and signals)."""
    argv = [f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", *COMMON, *extra]
    return run_forked("zoo.train", argv, slurm_env(tmp_path), tmp_path)


def test_sigusr1_requeue_saves_then_the_requeued_job_resumes(toy_recipe, tmp_path, monkeypatch):
    signals = "callbacks=[{name: 'slurm_signals:SlurmSignals', usr1_at: 3, term_at: 5}]"
    first = run_job(toy_recipe, tmp_path, signals)
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = tmp_path / "runs" / "toy" / "slurm-4242"  # one folder per job id, kept across requeues
    assert [p.name for p in (tmp_path / "runs" / "toy").iterdir()] == ["slurm-4242"]
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    hpc = torch.load(run_dir / "hpc_ckpt_1.ckpt", weights_only=True)  # Lightning's, on SIGUSR1
    last = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)  # the zoo's, on SIGTERM
    assert hpc["global_step"] == 3
    assert 5 <= last["global_step"] < 24, "SIGTERM stops the job early (3 epochs of 8 steps)"
    assert "SIGTERM received: saved" in first.stdout
    # the same folder as it would be if SLURM's SIGKILL had come before the zoo's save: hpc only
    killed = tmp_path / "killed" / "toy" / "slurm-4242"
    shutil.copytree(run_dir, killed)
    shutil.rmtree(killed / "checkpoints")

    # the requeued job (in this process: the same command and the same SLURM variables)
    for key, value in SLURM_ENV.items():
        monkeypatch.setenv(key, value)
    assert resolve_run_dir({"run_dir": str(tmp_path / "runs"), "recipe": "toy", "ckpt_path": None}) == (
        run_dir, str(run_dir / "checkpoints" / "last.ckpt"))  # the newer of the two checkpoints
    second = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", *COMMON])
    assert second.run_dir == run_dir and [p.name for p in (tmp_path / "runs" / "toy").iterdir()] == ["slurm-4242"]
    done = torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    # it goes on mid-epoch from the SIGTERM's step to the end of epoch 2 in the uninterrupted run's order
    # (README: "a resume from the middle of an epoch trains the rest of that epoch in the uninterrupted
    # run's order"): all 24 steps and the very weights of a run that is never stopped. A loader that lost
    # its position would start the interrupted epoch afresh and end it early (22 of 24 steps, other weights).
    straight = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight", *COMMON])
    assert done["epoch"] == 2 and done["global_step"] == 24
    assert_same_weights(done, torch.load(straight.run_dir / "checkpoints" / "last.ckpt", weights_only=True))

    assert resolve_run_dir({"run_dir": str(tmp_path / "killed"), "recipe": "toy", "ckpt_path": None}) == (
        killed, str(killed / "hpc_ckpt_1.ckpt"))
    third = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/killed", *COMMON[1:], "trainer.max_epochs=1"])
    done = torch.load(third.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert third.run_dir == killed and done["epoch"] == 0 and done["global_step"] == 8  # on from step 3 ...
    one_epoch = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight1", *COMMON[1:], "trainer.max_epochs=1"])
    assert_same_weights(done, torch.load(one_epoch.run_dir / "checkpoints" / "last.ckpt", weights_only=True))


def test_no_slurm_folder_outside_a_batch_job(tmp_path, monkeypatch):
    """An interactive allocation (job name bash) or no SLURM at all: timestamped folders as usual."""
    for key, value in SLURM_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("SLURM_JOB_NAME", "bash")
    run_dir, ckpt = resolve_run_dir({"run_dir": str(tmp_path), "recipe": "toy", "ckpt_path": None})
    assert run_dir.parent == tmp_path / "toy" and not run_dir.name.startswith("slurm") and ckpt is None
    monkeypatch.setenv("SLURM_JOB_NAME", "zoo")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "77")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    assert resolve_run_dir({"run_dir": str(tmp_path), "recipe": "toy", "ckpt_path": None}) == (
        tmp_path / "toy" / "slurm-77_3", None)
