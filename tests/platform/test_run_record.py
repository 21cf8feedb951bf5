"""The run's record (``zoo.record``): the git commit and dirty flag of the zoo's checkout, the versions, the host,
CPU and threads, the device, and the estimator with its resolved options, in ``run.json`` (``run.resume-N.json``
for a resume) and in every checkpoint's run info; a checkpoint without it loads as before."""

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import lightning as L
import pytest
import torch

import zoo
import zoo.loading
from zoo.config import load_config
from zoo.record import SOURCE, git_state, run_record
from zoo.train import train

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="making a test repository needs the git program")


def git(folder: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([GIT, "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A git repository with one commit of one tracked file, on branch main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    return repo


@needs_git
def test_git_state_commit_branch_and_dirty(checkout, tmp_path, monkeypatch):
    head = git(checkout, "rev-parse", "HEAD")
    assert git_state(checkout) == {"commit": head, "branch": "main", "dirty": False}
    (checkout / "new.py").write_text("untracked\n")
    assert git_state(checkout)["dirty"] is False, "an untracked file is not a change to the code that ran"
    (checkout / "a.py").write_text("x = 2\n")
    assert git_state(checkout)["dirty"] is True
    git(checkout, "pack-refs", "--all")  # the branch's ref now only in packed-refs
    assert not (checkout / ".git" / "refs" / "heads" / "main").exists() and git_state(checkout)["commit"] == head
    git(checkout, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"))  # a `.git` file, a detached HEAD
    assert git_state(tmp_path / "linked") == {"commit": head, "branch": None, "dirty": False}
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs"))  # no git program: the files still name the commit
    assert git_state(checkout) == {"commit": head, "branch": "main", "dirty": None}


def test_git_state_outside_a_checkout_is_none(tmp_path):
    assert git_state(tmp_path) is None
    (tmp_path / ".git").write_text("not a gitdir line\n")
    assert git_state(tmp_path) is None
    (tmp_path / ".git").unlink()
    (tmp_path / ".git").mkdir()  # a damaged one: no HEAD
    assert git_state(tmp_path) is None


def test_an_estimator_named_alone_is_recorded_with_its_resolved_options():
    run = load_config("dvae_digits", ["model.estimator=rloo"])
    assert run_record(run.model_options)["estimator"] == {
        "name": "rloo", "baseline": "rloo", "decay": 0.9, "entropy_weight": 0.0, "n": 2, "context_dim": None,
        "hidden": 64, "baseline_weight": 1.0}
    run = load_config("sat_shapes_soft", [])  # soft attention: nothing sampled, no estimator trains
    assert run_record(run.model_options)["estimator"] is None


def test_a_run_records_its_code_versions_machine_and_estimator(tmp_path):
    result = train(["recipe=dvae_digits", "model.estimator=rloo", "trainer.max_steps=1", "trainer.limit_val_batches=1",
                    "test_after_fit=false", "trainer.accelerator=cpu", f"run_dir={tmp_path}/runs"])
    record = json.loads((result.run_dir / "run.json").read_text())
    assert record["versions"] == {"zoo": zoo.__version__, "python": record["versions"]["python"],
                                  "torch": torch.__version__, "lightning": L.__version__, "cuda": torch.version.cuda}
    assert record["host"]["name"] == socket.gethostname() and record["host"]["cpu"]
    assert record["host"]["threads"] == torch.get_num_threads() and record["host"]["cores"] == os.cpu_count()
    assert record["device"] == {"name": "cpu", "model": None, "processes": 1}
    assert record["estimator"]["name"] == "rloo" and record["estimator"]["n"] == 2
    assert record["git"] == git_state(SOURCE)
    if (SOURCE / ".git").exists():  # the tests run from a checkout: its commit is recorded
        assert record["git"] is not None and len(record["git"]["commit"]) == 40
    saved = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)  # plain data only
    assert saved["zoo"]["record"] == record


def test_a_resume_writes_its_own_record_and_an_old_checkpoint_loads(toy_recipe, tmp_path):
    common = [f"recipe={toy_recipe}", f"run_dir={tmp_path}", "test_after_fit=false"]
    first = train([*common, "trainer.max_epochs=1"])
    train([*common, "trainer.max_epochs=2", "ckpt_path=last"])
    names = sorted(p.name for p in first.run_dir.iterdir() if p.suffix in (".json", ".yaml"))
    assert names == ["config.resume-1.yaml", "config.yaml", "run.json", "run.resume-1.json"]
    resumed = json.loads((first.run_dir / "run.resume-1.json").read_text())
    last = first.run_dir / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    assert saved["zoo"]["record"] == resumed and resumed["estimator"] is None  # the toy model samples nothing
    del saved["zoo"]["record"]  # a checkpoint written before runs had a record
    old = tmp_path / "old.ckpt"
    torch.save(saved, old)
    model, info = zoo.loading.load_any(str(old), trust_code=True)  # the toy model is named by dotted path
    assert "record" not in info and type(model).__name__ == "Toy"
