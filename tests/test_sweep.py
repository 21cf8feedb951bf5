"""python -m zoo.sweep on the platform tests' toy regression (tests/platform/toymodel.py, one epoch of
8 steps a run): the table, the JSON, the paired differences against a hand calculation, a failing
combination kept with its exit status and error line, a restart that skips the runs that ended, bad
input refused before any run starts, and the SLURM launcher through submitit's local executor."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from platform_testlib import subprocess_env

from zoo import sweep as zsweep
from zoo.sweep.command import machine_cores, resources, split_values

TOY = """\
description: toy regression for the sweep tests
model: {name: "toymodel:Toy"}
data: {name: "toymodel:ToyData"}
trainer: {max_epochs: 1, accelerator: cpu, enable_progress_bar: false, enable_model_summary: false,
          log_every_n_steps: 1, num_sanity_val_steps: 0}
"""
# lr=1e6 diverges at step 2: a combination that passes every check and fails when it runs (exit status 1)
ARGS = ["model.lr=0.05,0.1,1e6", "seed=0,1", "--parallel", "2", "--name", "toy"]


def sweep_cmd(recipe: Path, root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zoo.sweep", f"recipe={recipe}", f"run_dir={root}", *args],
                          env=subprocess_env(), capture_output=True, text=True, timeout=600, cwd=root.parent)


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recipe") / "toy.yaml"
    path.write_text(TOY)
    return path


@pytest.fixture(scope="module")
def swept(toy, tmp_path_factory):
    """The sweep's folder and its first run's completed process (6 runs, 2 at a time)."""
    root = tmp_path_factory.mktemp("sweep") / "runs"
    proc = sweep_cmd(toy, root, *ARGS)
    return root / "sweeps" / "toy", proc


def metrics_of(folder: Path, label: str) -> float:
    result = json.loads((folder / label / "result.json").read_text())
    ran = json.loads((Path(result["run_dir"]) / "metrics.json").read_text())  # what zoo.train wrote
    assert result["metrics"] == ran
    return ran["test/loss"]


@pytest.mark.slow
def test_sweep_table_paired_differences_and_failures(swept):
    folder, proc = swept
    assert proc.returncode == 1, proc.stderr[-3000:]  # a run failed: the sweep says so
    summary = json.loads((folder / "summary.json").read_text())
    loss = {(lr, s): metrics_of(folder, f"model.lr={lr}__seed={s}") for lr in ("0.05", "0.1") for s in "01"}
    table = {e["setting"]["model.lr"]: e for e in summary["table"]}
    assert list(table) == ["0.05", "0.1", "1e6"] and summary["metrics"] == ["test/loss"]
    for lr in ("0.05", "0.1"):
        s = table[lr]["metrics"]["test/loss"]
        runs = [loss[lr, "0"], loss[lr, "1"]]
        assert s["values"] == runs and table[lr]["seeds"] == ["0", "1"]
        assert s["mean"] == pytest.approx(sum(runs) / 2) and s["sd"] == pytest.approx(abs(runs[0] - runs[1]) / 2 ** .5)
    assert table["1e6"]["metrics"]["test/loss"]["values"] == [None, None]
    # paired by seed against the first value: d_s = loss(0.1, s) - loss(0.05, s); se = sd(d) / sqrt(2)
    d = [loss["0.1", s] - loss["0.05", s] for s in "01"]
    diff = next(x for x in summary["differences"] if x["value"] == "0.1")
    assert diff["option"] == "model.lr" and diff["against"] == "0.05" and diff["seeds"] == ["0", "1"]
    assert diff["diffs"] == pytest.approx(d) and diff["mean"] == pytest.approx((d[0] + d[1]) / 2)
    assert diff["se"] == pytest.approx(statistics.stdev(d) / math.sqrt(2))
    assert diff["mean"] < 0, "the larger learning rate fits the toy regression better in one epoch"
    nothing = next(x for x in summary["differences"] if x["value"] == "1e6")
    assert nothing["diffs"] == [] and nothing["mean"] is None  # no seed where both ran: said, not dropped
    # the failures: kept, with exit status and the run's last error line
    failed = {f["label"]: f for f in summary["failures"]}
    assert set(failed) == {"model.lr=1e6__seed=0", "model.lr=1e6__seed=1"}
    for f in failed.values():
        assert f["rc"] == 1 and f["error"].startswith("error: the training loss became inf"), f
    assert len(summary["runs"]) == 6
    # the printed table: every run's value, the paired difference, the failures
    assert f"runs [{loss['0.05', '0']:.4g}, {loss['0.05', '1']:.4g}]" in proc.stdout
    assert "model.lr=0.1 - model.lr=0.05: " in proc.stdout
    assert "FAILED model.lr=1e6__seed=0: exit status 1" in proc.stdout
    # each run its own process with cores / parallel threads
    plan = json.loads((folder / "sweep.json").read_text())
    threads = max(1, machine_cores() // 2)
    assert all(f"threads={threads}" in r["overrides"] for r in plan["runs"])


@pytest.mark.slow
def test_started_again_skips_the_runs_that_ended(swept, toy):
    folder, _ = swept
    gone = folder / "model.lr=0.1__seed=1"  # as if killed before its first checkpoint: nothing left
    before = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("*/result.json") if p.parent != gone}
    for p in sorted(gone.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    proc = sweep_cmd(toy, folder.parent.parent, *ARGS)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.count("succeeded before, skipped") == 3
    assert proc.stdout.count("failed (exit status 1; --retry-failed) before, skipped") == 2
    assert "model.lr=0.1__seed=1: ok" in proc.stdout
    after = {p.parent.name: p.stat().st_mtime_ns for p in folder.glob("*/result.json") if p.parent != gone}
    assert after == before, "the runs that ended were not run again"
    assert json.loads((gone / "result.json").read_text())["rc"] == 0


@pytest.mark.slow
def test_collect_remakes_the_summary(swept, capsys):
    folder, _ = swept
    first = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").unlink()
    assert zsweep.main(["--collect", str(folder)]) == 1
    again = json.loads((folder / "summary.json").read_text())
    assert again["table"] == first["table"] and again["failures"] == first["failures"]
    assert "FAILED model.lr=1e6__seed=1" in capsys.readouterr().out


@pytest.mark.slow
def test_a_stopped_run_resumes_only_with_training_left(swept):
    """No result.json and a last.ckpt: ``ckpt_path=last`` while training is left (a killed or requeued
    job), a fresh start when the checkpoint finished training (a run stopped while testing)."""
    folder, _ = swept
    run = zsweep.Run("model.lr=0.05__seed=0", {}, ["model.lr=0.05", "seed=0"], limits={"max_epochs": 1})
    where = folder / run.label
    (where / "result.json").rename(where / "kept.json")
    try:
        assert "ckpt_path=last" not in zsweep.train_command("toy", run, where)  # 1 epoch of 1 trained
        run.limits = {"max_epochs": 2}
        assert "ckpt_path=last" in zsweep.train_command("toy", run, where)
        (where / "kept.json").rename(where / "result.json")
        assert "ckpt_path=last" not in zsweep.train_command("toy", run, where)  # it ended: not resumed
    finally:
        if (where / "kept.json").exists():
            (where / "kept.json").rename(where / "result.json")


@pytest.mark.parametrize("args, expected", [
    (["model.lrr=0.05,0.1", "seed=0,1"], r"run 1 of 4 \(model.lrr=0.05, seed=0\) is refused: unknown .*lrr"),
    (["model.lr=0.05,nan"], r"run 2 of 2 \(model.lr=nan\) is refused: .*finite"),
    (["seed=0,,1"], r"seed=0,,1 has an empty value"),
    ([f"seed={','.join(map(str, range(51)))}"], r"makes 51 runs .* more than 50: add --yes"),
    (["seed=0,1", "seed=2"], r"seed is given twice"),
    (["seed=0,1", "ckpt_path=last"], r"ckpt_path= is not a sweep option"),
    (["seed=0,1", "--slurm", "partition=gpu"], r"needs --launcher slurm"),
])
def test_bad_input_is_refused_before_any_run(toy, tmp_path, capsys, args, expected):
    import re

    code = zsweep.main([f"recipe={toy}", f"run_dir={tmp_path / 'runs'}", *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(expected, lines[0]), err
    assert not (tmp_path / "runs").exists(), "nothing started"


def test_split_values_keeps_commas_inside_brackets_and_quotes():
    assert split_values("{name: rloo, n: 4},reinforce") == ["{name: rloo, n: 4}", "reinforce"]
    assert split_values("[csv,wandb],[csv]") == ["[csv,wandb]", "[csv]"]
    assert split_values("'a,b',c") == ["'a,b'", "c"]


def test_resources_come_from_the_trainer_section():
    cfg = {"trainer": {"accelerator": "gpu", "devices": 4, "num_nodes": 2, "max_time": "00:01:30:00"}, "threads": 8}
    assert resources(cfg) == {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4, "cpus_per_task": 8,
                                     "timeout_min": 100}
    assert resources({"trainer": {"accelerator": "cpu"}, "threads": 0}) == {"nodes": 1, "tasks_per_node": 1}


@pytest.mark.slow
def test_slurm_launcher_through_submitits_local_executor(toy, tmp_path, monkeypatch):
    """The same code path as on a cluster (a job a run, waited for, then the summary), with submitit's
    local executor; the job requeues itself with the same call (which resumes from last.ckpt)."""
    env = {**subprocess_env(), "ZOO_SUBMITIT_CLUSTER": "local"}
    root = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "zoo.sweep", f"recipe={toy}", f"run_dir={root}", "seed=3",
                           "--launcher", "slurm", "--name", "s"], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    folder = root / "sweeps" / "s"
    result = json.loads((folder / "run" / "result.json").read_text())  # one combination: nothing swept
    assert result["rc"] == 0 and "seed=3" in result["command"] and result["metrics"]["test/loss"] > 0
    assert any((folder / "slurm").glob("*/*_result.pkl")), "run as a submitit job"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["table"][0]["metrics"]["test/loss"]["values"] == [result["metrics"]["test/loss"]]
    from zoo.sweep.slurm import RunJob

    job = RunJob("toy", zsweep.Run("seed=3", {"seed": "3"}, ["seed=3"]), str(folder / "seed=3"), None, None)
    assert job.checkpoint().function is job


def test_slurm_launcher_without_submitit_is_one_message(toy, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # import submitit -> ImportError
    code = zsweep.main([f"recipe={toy}", f"run_dir={tmp_path / 'runs'}", "seed=0,1", "--launcher", "slurm"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --launcher slurm needs the submitit package: pip install 'zoo[slurm]'")
    assert not (tmp_path / "runs").exists()


def test_runs_logging_to_wandb_are_grouped_by_the_sweeps_name(toy, tmp_path):
    sweep = zsweep.make_sweep(str(toy), {"seed": ["0", "1"]}, [f"run_dir={tmp_path}", "logger=[csv,wandb]"], 2,
                              "grouped", False, "cmd")
    assert sweep.wandb and all("logger=[csv,wandb]" in r.overrides for r in sweep.runs)
    assert zsweep.run_env(sweep.runs[0], sweep.name)["WANDB_RUN_GROUP"] == "grouped"  # wandb.init's group
    assert not zsweep.make_sweep(str(toy), {"seed": ["0", "1"]}, [f"run_dir={tmp_path}"], 1, None, False, "").wandb
