"""Callbacks' empty per-batch hooks left out of Lightning's dispatch, and a profiler that costs nothing.

Lightning calls every callback at each per-batch hook (six a training step), through its profiler's context
manager and the callback's ``state_key``, also where the callback leaves the hook as ``Callback``'s no-op: a run's
dozen callbacks cost ~70 such calls a step, a tenth of a ~3 ms step (``benchmarks/overhead.py``). Its dispatch
(``lightning.pytorch.trainer.call._call_callback_hooks``) passes over a hook attribute that is not callable, so an
empty hook set to None on the callback is skipped at no cost; a hook a callback implements is called as before,
except a checkpoint's after-batch check where it saves by epoch only, which always ends without a save.
The model's own empty per-batch hooks (``on_after_backward``, ...; five a training step) are left out the same way.
Lightning's default profiler (``PassThroughProfiler``) records nothing, yet enters a generator-based context manager
around each hook (~25 a training step): ``QuietProfiler`` records nothing through one reused ``nullcontext``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.profilers import PassThroughProfiler

from zoo.callbacks.checkpoints import LastCheckpoint

# the hooks Lightning calls once a batch (training, validation, test, predict), where a no-op's dispatch adds up
BATCH_HOOKS = ("on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
               "on_before_optimizer_step", "on_before_zero_grad", "on_validation_batch_start",
               "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end", "on_predict_batch_start",
               "on_predict_batch_end")


def idle_batch_hooks(callback: L.Callback) -> list[str]:
    """The ``BATCH_HOOKS`` of ``callback`` that do nothing: those its class leaves as ``Callback``'s no-op, and the
    ``on_train_batch_end`` of a ModelCheckpoint (Lightning's or ``LastCheckpoint``) that saves on no step or time
    schedule, where Lightning's checks (~0.1 ms a batch) always end without a save."""
    idle = [hook for hook in BATCH_HOOKS if getattr(type(callback), hook, None) is getattr(L.Callback, hook)]
    checks = type(callback).on_train_batch_end in (ModelCheckpoint.on_train_batch_end,
                                                   LastCheckpoint.on_train_batch_end)
    if checks and not callback._every_n_train_steps and callback._train_time_interval is None:
        idle.append("on_train_batch_end")
    return idle


def skip_empty_batch_hooks(callbacks: Iterable[L.Callback]) -> int:
    """Set to None, on each callback, its ``idle_batch_hooks``; the number set."""
    skipped = 0
    for callback in callbacks:
        for hook in idle_batch_hooks(callback):
            setattr(callback, hook, None)
            skipped += 1
    return skipped


# the model's training-step hooks that Lightning dispatches as the callbacks' (``_call_lightning_module_hook``:
# a debug log line, the hook's name set on the model twice, a profiler context, ~5 us each), where the model's class
# mostly leaves LightningModule's no-op. Not the evaluation batch hooks, whose signatures Lightning reads before each
# validation, nor ``on_train_batch_start`` (ZooModule's own) or the batch transfer hooks (they return the batch)
MODULE_BATCH_HOOKS = ("on_train_batch_end", "on_before_backward", "on_after_backward", "on_before_optimizer_step",
                      "on_before_zero_grad")


def idle_module_hooks(model: L.LightningModule) -> list[str]:
    """The ``MODULE_BATCH_HOOKS`` that ``model``'s class leaves as LightningModule's no-op."""
    return [hook for hook in MODULE_BATCH_HOOKS
            if getattr(type(model), hook, None) is getattr(L.LightningModule, hook)]


def skip_empty_module_hooks(model: L.LightningModule) -> int:
    """Set to None, on ``model`` (the instance, not its class), its ``idle_module_hooks``, which Lightning's dispatch
    then passes over as the callbacks' (not callable); the number set."""
    hooks = idle_module_hooks(model)
    for hook in hooks:
        setattr(model, hook, None)
    return len(hooks)


class QuietProfiler(PassThroughProfiler):
    """Lightning's default profiler (records nothing), without a new context manager per hook."""

    _nothing = contextlib.nullcontext()  # reusable: entering it does nothing

    def profile(self, action_name: str) -> Any:
        return self._nothing
