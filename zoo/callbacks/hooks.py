"""Callbacks' empty per-batch hooks left out of Lightning's dispatch, and a profiler that costs nothing.

Lightning calls every callback at each per-batch hook (six a training step), through its profiler's context
manager and the callback's ``state_key``, also where the callback leaves the hook as ``Callback``'s no-op: a run's
dozen callbacks cost ~70 such calls a step, a tenth of a ~3 ms step (``benchmarks/overhead.py``). Its dispatch
(``lightning.pytorch.trainer.call._call_callback_hooks``) passes over a hook attribute that is not callable, so an
empty hook set to None on the callback is skipped at no cost; a hook a callback implements is called as before.
Lightning's default profiler (``PassThroughProfiler``) records nothing, yet enters a generator-based context manager
around each hook (~25 a training step): ``QuietProfiler`` records nothing through one reused ``nullcontext``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

import lightning as L
from lightning.pytorch.profilers import PassThroughProfiler

# the hooks Lightning calls once a batch (training, validation, test, predict), where a no-op's dispatch adds up
BATCH_HOOKS = ("on_train_batch_start", "on_train_batch_end", "on_before_backward", "on_after_backward",
               "on_before_optimizer_step", "on_before_zero_grad", "on_validation_batch_start",
               "on_validation_batch_end", "on_test_batch_start", "on_test_batch_end", "on_predict_batch_start",
               "on_predict_batch_end")


def skip_empty_batch_hooks(callbacks: Iterable[L.Callback]) -> int:
    """Set to None, on each callback, the ``BATCH_HOOKS`` its class leaves as ``Callback``'s no-op; the number set."""
    skipped = 0
    for callback in callbacks:
        for hook in BATCH_HOOKS:
            if getattr(type(callback), hook, None) is getattr(L.Callback, hook):
                setattr(callback, hook, None)
                skipped += 1
    return skipped


class QuietProfiler(PassThroughProfiler):
    """Lightning's default profiler (records nothing), without a new context manager per hook."""

    _nothing = contextlib.nullcontext()  # reusable: entering it does nothing

    def profile(self, action_name: str) -> Any:
        return self._nothing
