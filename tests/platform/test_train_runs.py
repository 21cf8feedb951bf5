"""Runs: folder layout, resume, exact resume after SIGKILL, SIGTERM save, NaN guard, DDP."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from platform_testlib import ForkedCommand, subprocess_env

from zoo.train import main, train


def state(ckpt: Path) -> dict:
    return torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]


def test_run_folder_layout_and_learning(toy_recipe, tmp_path):
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=6"])
    run = result.run_dir
    assert run.parent == tmp_path / "runs" / "toy"
    for name in ("config.yaml", "checkpoints/last.ckpt", "logs/metrics.csv", "metrics.json"):
        assert (run / name).is_file(), name
    assert list((run / "checkpoints").glob("best-*.ckpt"))
    metrics = json.loads((run / "metrics.json").read_text())
    rows = (run / "logs" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    val = [float(r.split(",")[header.index("val/loss")]) for r in rows[1:] if r.split(",")[header.index("val/loss")]]
    assert val[-1] < 0.5 * val[0], "the toy regression should learn"
    assert metrics["test/loss"] < val[0]
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["zoo"]["model"] == "toymodel:Toy" and ckpt["zoo"]["recipe"] == "toy"


def test_log_train_logs_only_the_steps_the_loggers_write(toy_recipe, tmp_path):
    """8 steps an epoch x 3 epochs, log_every_n_steps=5: Lightning writes steps 4, 9, 14, 19; the
    model's training-step values reach metrics.csv on exactly those, without Lightning's self.log
    (zoo.callbacks.train_logs), which ran 4 times before, and 24 before log_train."""
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.log_every_n_steps=5",
                    "test_after_fit=false"])
    rows = (result.run_dir / "logs" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    steps = [int(r.split(",")[header.index("step")]) for r in rows[1:] if r.split(",")[header.index("train/loss")]]
    assert steps == [4, 9, 14, 19]
    assert getattr(result.model, "train_log_calls", 0) == 0


def test_last_ckpt_is_the_latest_state_even_without_a_new_best(toy_recipe, tmp_path, monkeypatch):
    # mode=max on a falling loss: the "best" stays at epoch 0, last.ckpt must still move on (a loss maximised is
    # refused with the recipe: that check is left out here, to test the checkpoints themselves)
    monkeypatch.setattr("zoo.config.check_validation_and_test", lambda cfg, monitor, callbacks: None)
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=4", "checkpoint.mode=max"])
    last = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 3 and last["global_step"] == 4 * 8
    assert [p.name for p in (result.run_dir / "checkpoints").glob("best-*")] == ["best-0-8.ckpt"]


def test_resume_last_continues_same_folder(toy_recipe, tmp_path):
    first = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=2"])
    again = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=4", "ckpt_path=last"])
    assert again.run_dir == first.run_dir
    ckpt = torch.load(again.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt["epoch"] == 3
    assert (again.run_dir / "logs" / "resume-1" / "metrics.csv").is_file()


HANG = 600  # seconds after which a run that should have ended is called hung: a guard, never a window to hit


def _launch(recipe, run_dir, *extra, hold: str = ""):
    """``python -m zoo.train`` started in the background; with ``hold`` (the toy's ``hold_at``), the run waits there
    for the test's handshake in ``run_dir`` (see ``Toy.hold``): a signal sent then lands in that phase, however
    slowly this process is scheduled. A forkserver's child (``ForkedCommand``: its own process, signal handlers and
    exit status, without a new interpreter's ~7 s of imports); under DDP a new interpreter, as Lightning's launcher
    starts the other rank by running the command line again."""
    gate = [f"model.hold_at={hold}", f"model.hold_dir={run_dir}"] if hold else []
    argv = [f"recipe={recipe}", f"run_dir={run_dir}", *gate, *extra]
    if "trainer.devices=2" not in extra:
        return ForkedCommand("zoo.train", argv, subprocess_env(), Path(run_dir).parent)
    return subprocess.Popen([sys.executable, "-m", "zoo.train", *argv], env=subprocess_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_for_file(path: Path, proc) -> None:
    """Until ``path`` exists; fails at once if the run ended first (its output in the message)."""
    deadline = time.monotonic() + HANG
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path.name} never appeared: {proc.communicate()[0]}")
        time.sleep(0.05)


def _signal_and_release(proc, gate: Path, sig: int) -> None:
    """The held run gets ``sig``; once the zoo's handler has taken it, the run goes on."""
    proc.send_signal(sig)
    _wait_for_file(gate / "signalled.0", proc)
    (gate / "release").touch()


def test_sigkill_then_resume_matches_uninterrupted_run(toy_recipe, tmp_path):
    """CPU, deterministic: a run killed with SIGKILL and resumed from last.ckpt ends with exactly
    the same weights as a run that was never interrupted (dropout makes this depend on RNG state)."""
    common = ["trainer.max_epochs=6", "trainer.deterministic=true", "test_after_fit=false"]
    train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight", *common])
    proc = _launch(toy_recipe, tmp_path / "killed", *common, hold="step:12")  # epoch 1's 5th step
    _wait_for_file(tmp_path / "killed" / "held.0", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(HANG)
    done = torch.load(next((tmp_path / "killed").glob("*/*/checkpoints/last.ckpt")), weights_only=True)
    assert done["global_step"] == 8, "killed mid-epoch 1: epoch 0's checkpoint is the last"
    train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/killed", *common, "ckpt_path=last"])
    a = state(next((tmp_path / "straight").glob("*/*/checkpoints/last.ckpt")))
    b = state(next((tmp_path / "killed").glob("*/*/checkpoints/last.ckpt")))
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sigterm_saves_last_and_exits_cleanly(toy_recipe, tmp_path):
    # with trainer.min_epochs the stop waited for them, saving and printing at every step until then
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=50", "trainer.min_epochs=45", hold="step:12")
    _wait_for_file(tmp_path / "held.0", proc)
    _signal_and_release(proc, tmp_path, signal.SIGTERM)
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, out
    assert out.count("SIGTERM received: saved") == 1 and "ckpt_path=last" in out, out
    ckpt = torch.load(next(tmp_path.glob("*/*/checkpoints/last.ckpt")), weights_only=True)
    assert ckpt["global_step"] == 13  # at the end of the step the signal came in, not once min_epochs were done
    assert not list(tmp_path.glob("*/*/checkpoints/.*tmp*")), "no temporary files left behind"


def test_sigterm_during_validation_saves_when_it_ends_and_the_run_resumes(toy_recipe, tmp_path):
    """A signal that arrives during validation is acted on when the validation ends; it waited for
    the next training step (a long one could outlast SLURM's grace period before SIGKILL)."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=50", hold="validation")
    _wait_for_file(tmp_path / "held.0", proc)
    _signal_and_release(proc, tmp_path, signal.SIGTERM)
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, out
    assert "SIGTERM received: saved" in out and "at step 8;" in out, out
    last = next(tmp_path.glob("*/*/checkpoints/last.ckpt"))
    assert torch.load(last, weights_only=True)["global_step"] == 8  # the first epoch's 256 / 32 steps, no more
    again = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=2", "ckpt_path=last",
                   "test_after_fit=false"])
    assert again.run_dir == last.parent.parent
    assert torch.load(last, weights_only=True)["global_step"] == 16  # the second epoch, then done


@pytest.mark.slow
def test_sigterm_to_the_launching_process_stops_every_ddp_rank(toy_recipe, tmp_path):
    """Under DDP a signal may reach one rank only (here the launching process, rank 0): the ranks
    agree on stopping every step, so all save together instead of rank 0 waiting alone in the
    checkpoint's barrier."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=50", "trainer.devices=2", "trainer.strategy=ddp",
                   hold="step:6")  # both ranks wait there (4 steps an epoch: epoch 1's 3rd)
    _wait_for_file(tmp_path / "held.0", proc)
    _signal_and_release(proc, tmp_path, signal.SIGTERM)  # to rank 0 only
    try:
        out, _ = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the DDP run hung after SIGTERM") from None
    assert proc.returncode == 0, out
    assert "SIGTERM received: saved" in out
    ckpt = torch.load(next(tmp_path.glob("*/*/checkpoints/last.ckpt")), weights_only=True)
    assert ckpt["global_step"] == 7  # both ranks stopped at the end of the step the signal came in
    assert not (tmp_path / "signalled.1").exists(), "the signal reached rank 0 only"


def test_nan_loss_stops_with_message_and_keeps_good_checkpoint(toy_recipe, tmp_path, capsys):
    code = main([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "model.explode_at=20", "trainer.max_epochs=5"])
    err = capsys.readouterr().err
    assert code == 1 and "became nan at step 20" in err and "the last good checkpoint is kept in" in err
    assert "options changed from the recipe: model.explode_at=20." in err  # the cause, when it is an option
    ckpt = torch.load(next(tmp_path.glob("*/*/checkpoints/last.ckpt")), weights_only=True)
    assert ckpt["global_step"] <= 20
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())


def test_nan_loss_before_the_first_checkpoint_leaves_no_run_folder(toy_recipe, tmp_path, capsys):
    code = main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "model.explode_at=1"])
    err = capsys.readouterr().err
    assert code == 1 and "became nan at step 1" in err and "before its first checkpoint" in err
    assert not (tmp_path / "runs").exists()  # the message promised no checkpoint it did not write


def test_ddp_two_cpu_processes_match_single_process(toy_recipe, tmp_path):
    """Full-batch gradient descent: 2 processes x 32 examples (gloo all-reduce averages the
    gradients) must equal 1 process x 64 examples. Tolerance 1e-5."""
    common = ["data.n=64", "model.dropout=0.0", "trainer.max_epochs=5", "test_after_fit=false"]
    train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/one", "data.batch_size=64", *common])
    proc = subprocess.run([sys.executable, "-m", "zoo.train", f"recipe={toy_recipe}", f"run_dir={tmp_path}/two",
                           "data.batch_size=32", "trainer.devices=2", "trainer.strategy=ddp", *common],
                          env=subprocess_env(), capture_output=True, text=True, timeout=HANG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list((tmp_path / "two" / "toy").iterdir())
    assert len(runs) == 1, "all ranks write one run folder"
    a = state(next((tmp_path / "one").glob("*/*/checkpoints/last.ckpt")))
    b = state(runs[0] / "checkpoints" / "last.ckpt")
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5), key


def test_rng_state_round_trips_through_a_safe_load_and_ignores_foreign_cuda_states(tmp_path):
    """RNGState restores the CPU generator from a weights_only checkpoint; a CUDA state saved on a
    machine with another number of GPUs (here: 7, none visible) is skipped, not an error.
    The CUDA half itself is tests/test_gpu.py::test_rng_state_restores_cuda_generators."""
    from zoo.callbacks.checkpoints import RNGState

    cb = RNGState()
    torch.manual_seed(0)
    state = cb.state_dict()
    expected = torch.rand(5)
    state["cuda"] = [torch.zeros(16, dtype=torch.uint8)] * 7
    torch.save({"rng": state}, tmp_path / "s.pt")
    torch.rand(100)
    cb.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True)["rng"])
    assert torch.equal(torch.rand(5), expected)


def test_sigint_mid_epoch_runs_no_extra_validation_and_the_resumed_run_keeps_one_best(toy_recipe, tmp_path):
    """Lightning validates once more when a run is told to stop: after last.ckpt was saved, so its
    metrics row and best checkpoint came from a state no resume knows of (a stale best-*.ckpt stayed
    beside the resumed run's best, with save_top_k 1). Epochs of 32 steps, the signal in the second's 9th
    step; validations only at epochs' ends, before and after resuming."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=3", "data.n=1024", hold="step:40")
    _wait_for_file(tmp_path / "held.0", proc)
    _signal_and_release(proc, tmp_path, signal.SIGINT)
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 0 and "SIGINT received: saved" in out, out
    run = next(tmp_path.glob("*/*/checkpoints")).parent
    train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=3", "data.n=1024", "ckpt_path=last",
           "test_after_fit=false"])
    val_steps = []
    for csv in sorted(run.glob("logs/**/metrics.csv")):  # logs/metrics.csv, then logs/resume-1/metrics.csv
        header, *rows = [line.split(",") for line in csv.read_text().splitlines()]
        val_steps += [int(r[header.index("step")]) for r in rows if r[header.index("val/loss")]]
    assert val_steps == [31, 63, 95], (val_steps, out)  # one a finished epoch, none at the signal's step
    assert len(list((run / "checkpoints").glob("best*.ckpt"))) == 1, sorted((run / "checkpoints").iterdir())


def test_ctrl_c_while_testing_after_fit_is_one_line_130_and_keeps_the_run(toy_recipe, tmp_path):
    """Lightning answered Ctrl-C in the test after fit with its own line and exit status 1."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=1", hold="test")
    _wait_for_file(tmp_path / "held.0", proc)
    proc.send_signal(signal.SIGINT)  # raises in the held test step: no release
    out, _ = proc.communicate(timeout=HANG)
    last = next(tmp_path.glob("*/*/checkpoints/last.ckpt"))
    assert proc.returncode == 130, out
    assert f"interrupted (Ctrl-C): while testing; the trained run is kept in {last.parent.parent} (test it with " \
           f"python -m zoo.evaluate {last})" in out, out
    assert "Detected KeyboardInterrupt" not in out and "Traceback" not in out, out


def test_second_ctrl_c_stops_training_at_once_with_130_naming_what_is_kept(toy_recipe, tmp_path):
    """The first SIGINT asks for a save at the step's end; a second in the same step stops at once
    (not Lightning's line and status 1)."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=50", "data.n=64", hold="step:3")  # 2 steps an epoch
    _wait_for_file(tmp_path / "held.0", proc)
    last = next(tmp_path.glob("*/*/checkpoints/last.ckpt"))  # epoch 0's
    proc.send_signal(signal.SIGINT)
    _wait_for_file(tmp_path / "signalled.0", proc)  # taken: a second now is not merged with the first
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 130, out
    assert f"interrupted (Ctrl-C): {last} (step " in out and "is kept: resume with ckpt_path=last" in out, out
    assert "Detected KeyboardInterrupt" not in out and "Traceback" not in out, out


def test_ctrl_c_twice_before_the_first_checkpoint_leaves_no_run_folder(toy_recipe, tmp_path):
    """A run stopped at once before anything is saved holds only its config.yaml and logs: it is removed."""
    proc = _launch(toy_recipe, tmp_path, "trainer.max_epochs=5", hold="step:3")  # before epoch 0's checkpoint
    _wait_for_file(tmp_path / "held.0", proc)
    assert list(tmp_path.glob("*/*/config.yaml")), "the run folder exists while it trains"
    proc.send_signal(signal.SIGINT)
    _wait_for_file(tmp_path / "signalled.0", proc)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=HANG)
    assert proc.returncode == 130 and "interrupted (Ctrl-C): no checkpoint was saved yet" in out, out
    assert not list(tmp_path.glob("*/*")), list(tmp_path.rglob("*"))


def test_runs_started_in_the_same_second_get_their_own_folders(toy_recipe, tmp_path):
    """A folder name chosen by `exists()` and made seconds later would be shared by two runs of one second
    (their metrics interleaved, one checkpoint surviving): it is made at once, the next suffix if taken."""
    from zoo.run_folder import claim_run_dir

    first, made = claim_run_dir(tmp_path / "runs" / "toy" / "20261127-150357", {"ckpt_path": None})
    second, _ = claim_run_dir(tmp_path / "runs" / "toy" / "20261127-150357", {"ckpt_path": None})
    assert first.name == "20261127-150357" and second.name == "20261127-150357-1"
    assert made == [first, first.parent, first.parent.parent]  # what a failed run removes again
    procs = [_launch(toy_recipe, tmp_path / "same", "trainer.max_epochs=1", f"seed={s}") for s in (1, 2)]
    outs = [p.communicate(timeout=HANG)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    folders = sorted(tmp_path.glob("same/toy/*"))
    assert len(folders) == 2 and all((f / "checkpoints" / "last.ckpt").is_file() for f in folders), outs


def test_resume_with_other_options_says_so_and_keeps_the_first_config(toy_recipe, tmp_path, capsys):
    """model.lr=... on a resume is noted, and config.yaml is not overwritten with values the optimizer's
    restored state does not use."""
    first = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=1", "test_after_fit=false"])
    capsys.readouterr()
    train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=2", "ckpt_path=last", "model.lr=0.01",
           "test_after_fit=false"])
    err = capsys.readouterr().err
    assert "whose run had other options: model.lr: 0.05 there, 0.01 here" in err, err
    assert "the optimizer's state (its learning rate included)" in err
    assert "model.lr=0.01" not in (first.run_dir / "config.yaml").read_text()
    assert "model.lr=0.01" in (first.run_dir / "config.resume-1.yaml").read_text()
