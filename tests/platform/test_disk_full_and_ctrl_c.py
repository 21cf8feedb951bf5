"""A full disk (or quota): one 'error:' line, exit status 2, no traceback, no partial checkpoint file,
and the last good checkpoint kept. Ctrl-C outside training: one line, exit status 130. Not
Python tracebacks (OSError ENOSPC from whichever write meets it; KeyboardInterrupt)."""

import errno
import os
from pathlib import Path

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
import torch
from platform_testlib import run_main

SHORT = ["trainer.max_epochs=3", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1",
         "checkpoint.every_n_epochs=1", "test_after_fit=false", "trainer.enable_progress_bar=false"]


@pytest.fixture
def disk_fills_after(monkeypatch):
    """``disk_fills_after(n)``: torch.save writes n files, then every later one fails part-way with
    ENOSPC, as on a full disk."""
    real_save = torch.save

    def fill(n: int) -> None:
        calls = {"n": 0}

        def save(obj, f, *args, **kwargs):
            calls["n"] += 1
            if calls["n"] <= n:
                return real_save(obj, f, *args, **kwargs)
            f.write(b"PK\x03\x04 partial")  # some bytes got out before the disk filled up
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(torch, "save", save)

    return fill


def leftovers(runs: Path) -> list[Path]:
    return [p for p in runs.rglob("*") if ".tmp-" in p.name]


def test_a_full_disk_at_the_first_checkpoint_leaves_no_run(tmp_path, capsys, disk_fills_after):
    disk_fills_after(0)
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", *SHORT], capsys)
    assert code == 2 and "Traceback" not in err, err
    error = [line for line in err.strip().splitlines() if not line.startswith("  ")][-1]  # details: indented
    assert error.startswith("error: no space left (no space left on device)"), err
    runs = tmp_path / "runs"
    assert not leftovers(runs) and (not runs.exists() or not any(runs.iterdir())), list(runs.rglob("*"))


def test_a_full_disk_later_keeps_the_last_good_checkpoint(tmp_path, capsys, disk_fills_after):
    disk_fills_after(2)  # epoch 0's best and last checkpoints are written; epoch 1's are not
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", *SHORT], capsys)
    assert code == 2 and "Traceback" not in err and "no space left" in err, err
    last = next((tmp_path / "runs").glob("vae_digits/*/checkpoints/last.ckpt"))
    assert "the last good checkpoint is kept" in err and f"\n  kept: {last}" in err and "ckpt_path=last" in err, err
    assert not leftovers(tmp_path / "runs")
    saved = torch.load(last, weights_only=True)  # whole, from before the disk filled up
    assert saved["epoch"] == 0 and saved["global_step"] == 2


def test_predict_onto_a_full_device_is_one_message(tmp_path, capsys):
    from zoo.predict import main

    full = Path("/dev/full")  # Linux: every write fails with ENOSPC
    assert full.exists(), "this test writes to /dev/full (Linux)"
    out = tmp_path / "samples.png"
    out.symlink_to(full)
    code = main(["vae-digits", f"out={out}", "n=4"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.startswith("error: no space left"), err


def test_disk_full_finds_the_error_behind_another_librarys():
    from zoo.errors import as_user_error, disk_full

    quota = OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/scratch/me/run/last.ckpt")
    wrapped = RuntimeError("PytorchStreamWriter failed writing file")
    wrapped.__cause__ = quota
    message = str(as_user_error(wrapped))
    assert "no space left" in message and "\n  writing /scratch/me/run/last.ckpt" in message and "quota" in message
    assert disk_full(OSError(errno.EIO, "I/O error")) is None and disk_full(RuntimeError("a bug")) is None


@pytest.mark.parametrize("command", ["train", "evaluate", "predict"])
def test_ctrl_c_outside_training_is_one_line_and_leaves_no_run(command, tmp_path, capsys, monkeypatch):
    """Ctrl-C while the data or the model is being built (training itself saves and stops on its own:
    tests/platform/test_train_runs.py): one line, not Python's KeyboardInterrupt traceback."""
    import importlib

    import zoo.evaluate
    import zoo.predict
    import zoo.runner

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(zoo.runner, "build", ctrl_c)  # zoo.train's run: building the data and the model
    monkeypatch.setattr(zoo.evaluate, "load_any", ctrl_c)  # zoo.evaluate / zoo.predict: loading the model
    monkeypatch.setattr(zoo.predict, "load_any", ctrl_c)
    main = importlib.import_module(f"zoo.{command}").main
    args = {"train": ["recipe=vae_digits", f"run_dir={tmp_path}/runs"], "evaluate": ["vae-digits"],
            "predict": ["vae-digits", f"out={tmp_path}/samples.png"]}[command]
    assert main(args) == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C)\n"
    assert not (tmp_path / "runs").exists() and not (tmp_path / "samples.png").exists()


def test_lightnings_exit_on_ctrl_c_becomes_the_zoos_interruption():
    """Lightning answers Ctrl-C inside fit / test with sys.exit(1) after marking the trainer interrupted:
    zoo.evaluate and zoo.train turn that into the KeyboardInterrupt exit_status gives 130; any other
    SystemExit passes through."""
    import sys

    from zoo.cli import ctrl_c_in_lightning

    class Trainer:
        interrupted = True

    with pytest.raises(KeyboardInterrupt, match="the run is kept"):
        with ctrl_c_in_lightning(Trainer(), lambda: "the run is kept"):
            sys.exit(1)
    Trainer.interrupted = False
    with pytest.raises(SystemExit):
        with ctrl_c_in_lightning(Trainer()):
            sys.exit(1)
