"""The per-step cost zoo.train adds to Lightning's loop (benchmarks/overhead.py): counted in calls, never timed."""

import os
from datetime import timedelta
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.overrides import TorchFunctionMode

from zoo.callbacks.checkpoints import LastCheckpoint
from zoo.callbacks.guards import NonFiniteLossError, NonFiniteLossGuard
from zoo.callbacks.hooks import (
    BATCH_HOOKS,
    MODULE_BATCH_HOOKS,
    QuietProfiler,
    idle_batch_hooks,
    idle_module_hooks,
    skip_empty_batch_hooks,
)
from zoo.callbacks.train_logs import logged_tensor
from zoo.core.nvml import VARIABLE, skip_failing_nvml_check
from zoo.train import train


def dispatched(trainer: L.Trainer) -> dict[tuple[str, str], int]:
    """{(callback's state_key, hook): calls} of the per-batch callback hooks Lightning's SimpleProfiler timed."""
    out = {}
    for name, durations in trainer.profiler.recorded_durations.items():
        key, _, hook = name.removeprefix("[Callback]").rpartition(".")
        if name.startswith("[Callback]") and hook in BATCH_HOOKS:
            out[key, hook] = len(durations)
    return out


def test_empty_batch_hooks_are_not_dispatched(toy_recipe, tmp_path):
    """8 training steps: Lightning calls a callback's per-batch hook only where the callback does something there
    (the NaN guard before each backward, the signal check, the console and log_train's row after each batch), not
    the ~70 empty ones a step of a dozen callbacks, nor the checks of the checkpoints saved by epoch; the run saves its
    checkpoints (the best one by validation too) and writes its metrics."""
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=1", "trainer.profiler=simple",
                    "test_after_fit=false"])
    trainer = result.model.trainer
    calls = dispatched(trainer)
    by_key = {c.state_key: c for c in trainer.callbacks}
    empty = [(key, hook) for key, hook in calls if getattr(type(by_key[key]), hook) is getattr(L.Callback, hook)]
    assert empty == [], f"empty hooks dispatched: {empty}"
    assert calls == {("NonFiniteLossGuard", "on_before_backward"): 8, ("SignalCheckpoint", "on_train_batch_end"): 8,
                     ("RunLog", "on_train_batch_end"): 8, ("TrainLogs", "on_train_batch_end"): 8}
    assert (result.run_dir / "checkpoints" / "last.ckpt").is_file()
    assert [p.name for p in (result.run_dir / "checkpoints").glob("best-*")] == ["best-0-8.ckpt"]
    assert "train/loss" in (result.run_dir / "logs" / "metrics.csv").read_text().splitlines()[0]


class Calls(TorchFunctionMode):
    """The names of the torch functions and tensor methods called inside it."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_guard_reads_a_scalar_loss_once(bad):
    """A one-number loss is read with one .item() (no isfinite/all kernels a step); a non-finite one still stops the
    run with its step, as does a non-finite entry of a loss of several numbers."""
    trainer = SimpleNamespace(global_step=7, current_epoch=1)
    guard = NonFiniteLossGuard()
    with Calls() as calls:
        guard.on_before_backward(trainer, None, torch.tensor(2.5, requires_grad=True))
    assert "isfinite" not in calls.names and calls.names.count("item") == 1, calls.names
    with pytest.raises(NonFiniteLossError, match="at step 7"):
        guard.on_before_backward(trainer, None, torch.tensor(bad))
    with pytest.raises(NonFiniteLossError, match="at step 7"):
        guard.on_before_backward(trainer, None, torch.tensor([1.0, bad]))
    guard.on_before_backward(trainer, None, torch.tensor([1.0, 2.0]))


def test_per_step_bookkeeping_left_out(toy_recipe, tmp_path, monkeypatch):
    """One epoch of 8 steps, with Lightning's default profiler: Lightning sets ``_current_fx_name`` on the model
    around every hook, which on a ZooModule skips nn.Module's __setattr__ (counted: none of those calls); the
    profiler enters one reused context; last.ckpt, saved by epoch, checks nothing after each batch (Lightning's
    ModelCheckpoint checks ran 8 times more; a step schedule keeps them). The results stand: metrics.csv rows,
    last.ckpt at step 8."""
    names, skip_checks = [], []
    module_setattr = torch.nn.Module.__setattr__
    should_skip = LastCheckpoint._should_skip_saving_checkpoint

    def counted(self, name, value):
        names.append(name)
        module_setattr(self, name, value)

    monkeypatch.setattr(torch.nn.Module, "__setattr__", counted)
    monkeypatch.setattr(LastCheckpoint, "_should_skip_saving_checkpoint",
                        lambda self, trainer: skip_checks.append(trainer.global_step) or should_skip(self, trainer))
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=1", "test_after_fit=false"])
    assert "_current_fx_name" not in names
    assert result.model._current_fx_name is None  # Lightning's restore after the last hook
    profiler = result.model.trainer.profiler
    assert isinstance(profiler, QuietProfiler) and profiler.profile("a") is profiler.profile("b")
    assert skip_checks == [8, 8], skip_checks  # at the epoch's end and after its validation only
    last = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert (last["epoch"], last["global_step"]) == (0, 8)
    rows = (result.run_dir / "logs" / "metrics.csv").read_text().splitlines()
    assert "val/loss" in rows[0] and len(rows) > 1


@pytest.mark.parametrize("nvml_count", [-1, 0, 2])
def test_nvml_check_dropped_only_where_nvml_fails(nvml_count, monkeypatch):
    """Lightning's PYTORCH_NVML_BASED_CUDA_CHECK=1 is unset only where torch's NVML probe fails (< 0, when torch asks
    the CUDA runtime anyway): torch.cuda.is_available() then gives the same answer without the probe (counted)."""
    probes = []
    monkeypatch.setenv(VARIABLE, "1")
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: probes.append(1) or nvml_count)
    monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)
    assert skip_failing_nvml_check() == (nvml_count < 0)
    assert (VARIABLE in os.environ) == (nvml_count >= 0)
    if nvml_count < 0 and hasattr(torch._C, "_cuda_getDeviceCount"):  # a CUDA build of torch: ask it as a run does
        probes.clear()
        assert torch.cuda.is_available() == (torch._C._cuda_getDeviceCount() > 0)
        assert probes == []


def test_nvml_check_left_alone_when_unset(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1)
    assert not skip_failing_nvml_check() and VARIABLE not in os.environ


def test_checkpoint_checks_kept_on_a_step_schedule(tmp_path):
    """A checkpoint saved every N steps or on a timer keeps its after-batch check; one saved by epoch, and a
    subclass's own after-batch hook, are left as they are otherwise."""
    class Own(ModelCheckpoint):
        def on_train_batch_end(self, *args):
            pass

    by_steps = LastCheckpoint(dirpath=tmp_path, every_n_train_steps=3, every_n_epochs=None)
    by_time = ModelCheckpoint(dirpath=tmp_path, train_time_interval=timedelta(minutes=5))
    by_epoch = ModelCheckpoint(dirpath=tmp_path, every_n_epochs=2)
    own = Own(dirpath=tmp_path)
    assert "on_train_batch_end" not in idle_batch_hooks(by_steps) + idle_batch_hooks(by_time) + idle_batch_hooks(own)
    assert "on_train_batch_end" in idle_batch_hooks(by_epoch)
    idle = len(idle_batch_hooks(by_steps)) + len(idle_batch_hooks(by_epoch))
    assert skip_empty_batch_hooks([by_steps, by_epoch]) == idle
    assert callable(by_steps.on_train_batch_end) and by_epoch.on_train_batch_end is None


def metrics_seen(result) -> tuple[str, dict, dict]:
    """A run's metrics.csv, its trainer's callback metrics {name: (dtype, value)} and progress-bar metrics."""
    trainer = result.model.trainer
    callback = {k: (v.dtype, v.item()) for k, v in trainer.callback_metrics.items()}
    return (result.run_dir / "logs" / "metrics.csv").read_text(), callback, dict(trainer.progress_bar_metrics)


@pytest.mark.parametrize("more", [False, True])
def test_train_logs_write_what_self_log_wrote(more, toy_recipe, tmp_path, monkeypatch):
    """2 epochs of 8 steps, a row every 3rd: log_train's values under zoo.train (``TrainLogs``) give the metrics.csv
    rows, callback and progress-bar metrics that the same run gets through self.log, byte for byte and dtype for
    dtype, with no self.log call for them. ``more``: a float, an int and a float16 value too, and the model's own
    self.log at every 2nd step: where that falls on a written step, one row holds both (log_train's values join
    Lightning's row through self.log)."""
    args = [f"recipe={toy_recipe}", "trainer.max_epochs=2", "trainer.log_every_n_steps=3", "test_after_fit=false",
            f"model.more_logs={more}"]
    fast = train([*args, f"run_dir={tmp_path / 'fast'}"])
    monkeypatch.setattr("zoo.core.module.train_logs", lambda trainer: None)  # log_train through self.log
    slow = train([*args, f"run_dir={tmp_path / 'slow'}"])
    assert metrics_seen(fast) == metrics_seen(slow)
    rows = metrics_seen(fast)[0].splitlines()
    header = rows[0].split(",")
    steps = [int(r.split(",")[header.index("step")]) for r in rows[1:] if r.split(",")[header.index("train/loss")]]
    assert steps == [2, 5, 8, 11, 14], steps  # one row a written step
    direct = 8 if more else 0  # the model's own self.log calls (steps 0, 2, ..., 14)
    joined = 3 * 4 if more else 0  # steps 2, 8 and 14: log_train's four values through self.log
    assert getattr(fast.model, "train_log_calls", 0) == direct + joined
    assert slow.model.train_log_calls == direct + 5 * (4 if more else 1)


def test_logged_tensor_as_self_log_keeps_it():
    """A number becomes a tensor of the default dtype on the given device; a float16 or integer tensor becomes
    float32, a float64 stays; a tensor of several elements is refused."""
    assert logged_tensor("a", 0.1, torch.device("cpu")).dtype == torch.float32
    assert logged_tensor("a", torch.tensor([3], dtype=torch.int64), torch.device("cpu")).dtype == torch.float32
    assert logged_tensor("a", torch.tensor(0.5, dtype=torch.float16), torch.device("cpu")).shape == ()
    assert logged_tensor("a", torch.tensor(0.1, dtype=torch.float64), torch.device("cpu")).item() == 0.1
    with pytest.raises(ValueError, match="single element"):
        logged_tensor("a", torch.zeros(2), torch.device("cpu"))


def test_checkpoints_copy_the_metrics_only_where_they_save(toy_recipe, tmp_path, monkeypatch):
    """3 epochs, checkpoint.every_n_epochs=2: the best and last checkpoints copy the callback metrics (Lightning's
    _monitor_candidates, a deep copy) at the end of the one epoch where they save, not at all 3 (6 copies before);
    the checkpoints are those of every epoch's checks: best of epoch 1, last.ckpt at the end (step 24)."""
    copies = []
    candidates = ModelCheckpoint._monitor_candidates
    monkeypatch.setattr(ModelCheckpoint, "_monitor_candidates",
                        lambda self, trainer: copies.append((type(self).__name__, trainer.current_epoch))
                        or candidates(self, trainer))
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "checkpoint.every_n_epochs=2",
                    "test_after_fit=false"])
    assert sorted(copies) == [("EpochCheckpoint", 1), ("LastCheckpoint", 1)], copies
    assert sorted(p.name for p in (result.run_dir / "checkpoints").iterdir()) == ["best-1-16.ckpt", "last.ckpt"]
    last = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
    assert (last["epoch"], last["global_step"]) == (3, 24)  # saved at the end: epochs done
    # the best one's state under Lightning's key, as before: checkpoints of either version resume into the other
    lightnings = ModelCheckpoint(monitor="val/loss", every_n_epochs=2).state_key
    assert [k for k in last["callbacks"] if "val/loss" in k] == [lightnings]


def test_empty_model_hooks_are_not_dispatched(toy_recipe, tmp_path):
    """8 training steps and a validation: Lightning dispatches none of the toy model's per-batch hooks that its class
    leaves as LightningModule's no-op (on_after_backward, ...: 5 a step), and the ones it has (ZooModule's
    on_train_batch_start) as before; a class's own hook stays."""
    result = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "trainer.max_epochs=1", "trainer.profiler=simple",
                    "test_after_fit=false"])
    recorded = result.model.trainer.profiler.recorded_durations
    hooks = {name.rpartition(".")[2]: len(d) for name, d in recorded.items() if name.startswith("[LightningModule]")}
    assert not set(hooks) & set(MODULE_BATCH_HOOKS), hooks
    assert hooks["on_train_batch_start"] == 8

    class Own(L.LightningModule):
        def on_after_backward(self):
            pass

    assert "on_after_backward" not in idle_module_hooks(Own()) and "on_before_backward" in idle_module_hooks(Own())
