"""A resumed run continues its W&B run: the id kept in ``<run>/wandb/run-id`` is handed to wandb.init
(resume="allow") on every start of the run folder, so ``ckpt_path=last`` and a SLURM requeue log on
under the first start's id, from the step they resume at. Offline here (WANDB_MODE=offline): each start
writes ``wandb/offline-run-<time>-<id>``, which ``wandb sync`` uploads as one run."""

import re
from pathlib import Path

import pytest
from lightning.pytorch.loggers import WandbLogger
from test_slurm import COMMON, SLURM_ENV, run_job

from zoo.errors import UserError
from zoo.tracking import RUN_ID_FILE, make_wandb_logger, wandb_run_id
from zoo.train import train


def offline_ids(run_dir: Path) -> list[str]:
    """The W&B run id of each offline start in the run folder, oldest first: ``offline-run-<time>-<id>``, and
    ``...-<id>-1`` for a second start of the same id in the same second."""
    names = sorted(folder.name for folder in (run_dir / "wandb").glob("offline-run-*"))
    return [re.fullmatch(r"offline-run-\d{8}_\d{6}-([a-z0-9]+)(?:-\d+)?", name)[1] for name in names]


@pytest.fixture
def logged(monkeypatch) -> list[tuple[str, int]]:
    """(W&B run id, step) of every metrics row the W&B loggers hand to their experiment."""
    rows: list[tuple[str, int]] = []
    original = WandbLogger.log_metrics.__wrapped__  # under Lightning's rank_zero_only

    def log_metrics(self, metrics, step=None):
        rows.append((self.experiment.id, step))
        return original(self, metrics, step)

    monkeypatch.setattr(WandbLogger, "log_metrics", log_metrics)
    return rows


def test_a_resumed_run_continues_its_wandb_run(toy_recipe, tmp_path, monkeypatch, logged):
    monkeypatch.setenv("WANDB_MODE", "offline")
    common = [f"recipe={toy_recipe}", f"run_dir={tmp_path}", "logger=[csv,wandb]", "test_after_fit=false"]
    first = train([*common, "trainer.max_epochs=1"])
    run_id = (first.run_dir / RUN_ID_FILE).read_text().strip()
    before = list(logged)
    second = train([*common, "trainer.max_epochs=2", "ckpt_path=last"])
    after = logged[len(before):]
    assert second.run_dir == first.run_dir
    assert offline_ids(first.run_dir) == [run_id, run_id], "one W&B run id across the resume, in two offline starts"
    assert {rid for rid, _ in logged} == {run_id}
    assert min(s for _, s in after) >= max(s for _, s in before) > 0, "its steps go on from the checkpoint's"


def test_the_logger_takes_the_folders_id_and_a_new_folder_a_new_one(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    cfg = {"recipe": "toy", "wandb": {"project": "p", "entity": None, "tags": [], "mode": None, "log_model": False}}
    a, b = tmp_path / "a", tmp_path / "b"
    first, again, other = (make_wandb_logger(cfg, folder) for folder in (a, a, b))  # no W&B run started
    assert first._wandb_init["id"] == again._wandb_init["id"] == (a / RUN_ID_FILE).read_text().strip()
    assert first._wandb_init["resume"] == "allow" and other._wandb_init["id"] != first._wandb_init["id"]


@pytest.mark.slow  # ~14 s: a SLURM job in a subprocess, then its requeue
def test_a_slurm_requeue_continues_its_wandb_run(toy_recipe, tmp_path, monkeypatch, logged):
    """The job stopped by SIGTERM at step 5 and its requeue (same job id, same folder): one W&B run."""
    signals = "callbacks=[{name: 'slurm_signals:SlurmSignals', usr1_at: 3, term_at: 5}]"
    monkeypatch.setenv("WANDB_MODE", "offline")  # inherited by the subprocess's environment
    # a job of its own, as on SLURM: not attached to the wandb service an earlier test started in this process
    # (which would still hold the SIGTERM'd job's run open when the requeue asks for its id)
    monkeypatch.delenv("WANDB_SERVICE", raising=False)
    first = run_job(toy_recipe, tmp_path, signals, "logger=[csv,wandb]")
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = tmp_path / "runs" / "toy" / "slurm-4242"
    for key, value in SLURM_ENV.items():
        monkeypatch.setenv(key, value)
    second = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", *COMMON, "logger=[csv,wandb]"])
    assert second.run_dir == run_dir
    run_id = (run_dir / RUN_ID_FILE).read_text().strip()
    assert offline_ids(run_dir) == [run_id, run_id], "the job and its requeue: one W&B run"
    assert {rid for rid, _ in logged} == {run_id}
    assert min(s for _, s in logged) >= 5, "the requeued job logs on from the SIGTERM's step (5)"


def test_a_damaged_run_id_file_is_one_user_error(tmp_path):
    (tmp_path / "wandb").mkdir()
    (tmp_path / RUN_ID_FILE).write_text("not an id!\n")
    with pytest.raises(UserError, match="does not hold a W&B run id"):
        wandb_run_id(tmp_path)
    (tmp_path / RUN_ID_FILE).unlink()
    made = wandb_run_id(tmp_path)
    assert len(made) == 8 and wandb_run_id(tmp_path) == made  # written once, then read back


def test_wandb_run_id_from_a_sweep_agent_wins(tmp_path, monkeypatch):
    """`wandb agent` hands each run its id in WANDB_RUN_ID: the run must take it to join the sweep."""
    monkeypatch.setenv("WANDB_RUN_ID", "agent123")
    assert wandb_run_id(tmp_path) == "agent123" == (tmp_path / RUN_ID_FILE).read_text().strip()
    monkeypatch.delenv("WANDB_RUN_ID")
    assert wandb_run_id(tmp_path) == "agent123"  # a resume without the agent continues it
