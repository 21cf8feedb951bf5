"""What a training run prints (zoo/callbacks/runlog.py) and the curves it draws (zoo/callbacks/curves.py): off a
terminal one plain line per epoch, no carriage return or cursor code, the run folder at the start and lines in the
order they were written; at the end the time, epochs, steps, best checkpoint and the weights the test used."""

import csv
import io
import re
from pathlib import Path
from unittest.mock import ANY

import pytest
from platform_testlib import run_forked, subprocess_env

from zoo.callbacks import runlog
from zoo.callbacks.curves import curves_figure, logged_losses, metrics_files
from zoo.errors import UserError

CLOCK = r"\d+:\d\d:\d\d"


def csv_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "logs" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_into_a_file_prints_a_plain_line_per_epoch_and_a_summary(tmp_path):
    # `python -m zoo.train ... > log 2>&1`: the progress bar wrote hundreds of carriage returns and cursor codes,
    # and with trainer.enable_progress_bar=false nothing between the model summary and the end
    argv = ["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_epochs=3", "checkpoint.every_n_epochs=1",
            "model.iwae_samples=2"]
    proc = run_forked("zoo.train", argv, subprocess_env(), tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    assert "\r" not in out and "\x1b" not in out
    lines = [ln for ln in out.splitlines() if not ln.startswith("<frozen runpy>")]  # the forkserver's, not the run's
    run_dir = next((tmp_path / "runs" / "vae_digits").iterdir())
    assert lines[0] == f"run: {run_dir}"  # before Lightning's device lines and model summary
    epochs = [ln for ln in lines if ln.startswith("epoch ")]
    assert [ln.split("  ")[:2] for ln in epochs] == [["epoch 1/3", "step 19"], ["epoch 2/3", "step 38"],
                                                     ["epoch 3/3", "step 57"]]
    val = [float(r["val/loss"]) for r in csv_rows(run_dir) if r["val/loss"]]
    for line, logged in zip(epochs, val):  # the epoch's validation metrics, as logged
        assert re.fullmatch(rf"epoch \d/3  step \d+  train/loss \S+  val/loss (\S+)  .*  {CLOCK}", line), line
        assert f"val/loss {logged:.4g}  " in line and "val/rec " in line and "val/kl " in line
    order = [next(i for i, ln in enumerate(lines) if ln.startswith(start))
             for start in ("run: ", "GPU available", "  | Name", "epoch 1/3", "epoch 3/3", "`Trainer.fit` stopped",
                           "run folder: ", "  trained: ", "  test/loss")]
    assert order == sorted(order), lines  # stdout's lines and stderr's (Lightning's) in the order written
    end = lines[lines.index(f"run folder: {run_dir}"):]
    assert re.fullmatch(rf"  trained: 3 epochs, 57 steps in {CLOCK}, test {CLOCK}", end[1]), end
    best = min(val)
    epoch = val.index(best)
    assert end[2] == (f"  best checkpoint: checkpoints/best-{epoch}-{19 * (epoch + 1)}.ckpt (val/loss {best:.4g}, "
                      "min)"), end
    assert (run_dir / end[2].split()[2]).is_file()
    assert end[3] == "  test used: the weights at the end of training (those of last.ckpt), not the best checkpoint"
    assert end[4].startswith("  test/")
    assert (run_dir / "plots" / "curves.png").is_file()


def test_lines_inside_a_long_epoch_and_a_summary_without_a_test(tmp_path, capsys, monkeypatch):
    from zoo.train import main

    monkeypatch.setenv("ZOO_PROGRESS_EVERY", "0")  # a line after every batch (else at most one every 30 s)
    argv = ["recipe=vae_digits", f"run_dir={tmp_path}", "trainer.max_epochs=1", "trainer.limit_train_batches=3",
            "trainer.limit_val_batches=1", "trainer.log_every_n_steps=1", "test_after_fit=false",
            "trainer.enable_model_summary=false"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    run_dir = next(tmp_path.glob("vae_digits/*"))
    epochs = [ln for ln in lines if ln.startswith("epoch ")]
    assert [ln.split("  ")[:4] for ln in epochs[:2]] == [["epoch 1/1", "batch 1/3", "step 1", ANY],
                                                        ["epoch 1/1", "batch 2/3", "step 2", ANY]]
    assert all(ln.split("  ")[3].startswith("train/loss ") and "val/" not in ln for ln in epochs[:2])
    assert len(epochs) == 3 and epochs[2].startswith("epoch 1/1  step 3  train/loss ") and "  val/loss " in epochs[2]
    assert lines[-4:-1] == [f"run folder: {run_dir}", lines[-3], "  best checkpoint: none saved (by val/loss): one is "
                            "saved every checkpoint.every_n_epochs=5 epochs"]
    assert re.fullmatch(rf"  trained: 1 epoch, 3 steps in {CLOCK}", lines[-3])  # no test time: not tested
    assert lines[-1].startswith("  not tested (test_after_fit=false)")
    assert not any("test used" in ln for ln in lines)


class Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("env", "tty", "bar_off", "expected"), [
    ("", True, False, "bar"),  # a terminal: Lightning's bar
    ("", False, False, "lines"),  # a file, a pipe, SLURM's output
    ("", True, True, "lines"),  # trainer.enable_progress_bar=false: the lines, not silence
    ("auto", False, False, "lines"),
    ("bar", False, False, "bar"),  # forced either way
    ("lines", True, False, "lines"),
    ("LINES", True, False, "lines"),
])
def test_the_terminal_decides_unless_zoo_progress_does(env, tty, bar_off, expected, monkeypatch, tmp_path):
    monkeypatch.setenv("ZOO_PROGRESS", env)
    monkeypatch.setattr("sys.stdout", Stream(tty))
    opts = {"max_epochs": 1, **({"enable_progress_bar": False} if bar_off else {})}
    log, _ = runlog.run_console(opts, [], tmp_path)
    assert log.lines == (expected == "lines")
    assert opts.get("enable_progress_bar", True) is (expected == "bar")  # Lightning's bar off where lines replace it


def test_a_progress_bar_named_in_the_recipe_is_left_alone(monkeypatch, tmp_path):
    from lightning.pytorch.callbacks import TQDMProgressBar

    monkeypatch.setenv("ZOO_PROGRESS", "lines")
    opts: dict = {}
    log, _ = runlog.run_console(opts, [TQDMProgressBar()], tmp_path)
    assert not log.lines and opts == {}


@pytest.mark.parametrize(("name", "value"), [("ZOO_PROGRESS", "tty"), ("ZOO_PROGRESS_EVERY", "often"),
                                             ("ZOO_PROGRESS_EVERY", "-5")])
def test_a_wrong_progress_setting_is_one_message(name, value, monkeypatch, tmp_path, capsys):
    from zoo.train import main

    monkeypatch.setenv("ZOO_PROGRESS", "lines")
    monkeypatch.setenv(name, value)
    with pytest.raises(UserError, match=f"{name}='{value}'"):
        runlog.run_console({}, [], tmp_path)
    assert main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1"]) == 2
    assert not (tmp_path / "runs").exists()  # refused before the run folder is kept


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def test_curves_join_a_resumed_run_and_draw_a_line_per_logged_loss(tmp_path):
    logs = tmp_path / "logs"
    # the first start logged steps 9..29, was killed after its checkpoint at step 19; the resume logs 29 again
    write_csv(logs / "metrics.csv", [{"epoch": 0, "step": 9, "train/loss": 3.0, "train/acc": 0.1},
                                     {"epoch": 0, "step": 9, "val/loss": 3.5, "val/acc": 0.2},
                                     {"epoch": 1, "step": 19, "train/loss": 2.0},
                                     {"epoch": 2, "step": 29, "train/loss": 9.0}])
    write_csv(logs / "resume-1" / "metrics.csv", [{"epoch": 2, "step": 29, "train/loss": 1.5},
                                                  {"epoch": 2, "step": 29, "val/nll": 1.7}])
    write_csv(logs / "resume-10" / "metrics.csv", [{"epoch": 3, "step": 39, "train/loss": 1.0}])
    write_csv(logs / "resume-2" / "metrics.csv", [{"epoch": 3, "step": 39, "train/loss": 1.2}])
    assert [p.parent.name for p in metrics_files(logs)] == ["logs", "resume-1", "resume-2", "resume-10"]
    curves = logged_losses(metrics_files(logs))
    assert curves == {"train/loss": [(9, 3.0), (19, 2.0), (29, 1.5), (39, 1.0)], "val/loss": [(9, 3.5)],
                      "val/nll": [(29, 1.7)]}  # accuracies are not losses
    fig = curves_figure(curves)
    drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for ax in fig.axes
             for line in ax.get_lines()}
    assert drawn == {k: tuple(map(list, zip(*v))) for k, v in curves.items()}
    assert sorted(ax.get_title() for ax in fig.axes if ax.get_visible()) == ["loss", "nll"]


def test_the_curves_are_logged_to_wandb_and_tensorboard_as_the_models_figures_are(toy_recipe, tmp_path, monkeypatch):
    import importlib.util

    from zoo.train import train

    if importlib.util.find_spec("wandb") is None:
        pytest.skip("wandb is not installed (tests/platform/test_tracking_and_hub.py checks the message)")
    monkeypatch.setenv("WANDB_MODE", "offline")
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "logger=[csv,wandb,tensorboard]",
                    "trainer.max_epochs=2"])
    assert (result.run_dir / "plots" / "curves.png").is_file()
    offline = next((result.run_dir / "wandb").glob("offline-run-*"))
    assert list(offline.rglob("media/images/plots/curves_*.png")), "the curves logged to W&B"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(result.run_dir / "tensorboard")).Reload()
    assert "plots/curves" in events.Tags()["images"]


def test_the_summary_of_a_resumed_run_with_an_average(tmp_path):
    """A resumed run says where it resumed; an averaging callback's average is what the test scored."""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import ModelCheckpoint

    from zoo.callbacks.ema import EMAWeights

    log = runlog.RunLog(tmp_path, lines=True)
    log.fit_s, log.test_s, log.first = 65.4, 2.0, (6, 114)
    best = ModelCheckpoint(dirpath=tmp_path / "checkpoints", monitor="val/acc", mode="max")
    best.best_model_path, best.best_model_score = str(tmp_path / "checkpoints" / "best-8-170.ckpt"), 0.953125
    trainer = SimpleNamespace(callbacks=[log, EMAWeights(), best], checkpoint_callbacks=[best], current_epoch=12,
                              global_step=228, callback_metrics={})
    assert runlog.end_summary(trainer, tmp_path, tested=True) == [
        "  trained: 12 epochs, 228 steps (resumed at epoch 7, step 114) in 0:01:05, test 0:00:02",
        "  best checkpoint: checkpoints/best-8-170.ckpt (val/acc 0.9531, max)",
        "  test used: the average of EMAWeights, copied into the weights when training ended (not the best "
        "checkpoint)"]
    trainer.checkpoint_callbacks = []  # validation off: no checkpoint chooses a best one
    assert runlog.end_summary(trainer, tmp_path, tested=False)[1:] == [
        "  best checkpoint: none (no checkpoint chooses one by a metric in this run)"]
