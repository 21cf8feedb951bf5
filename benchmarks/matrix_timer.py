"""The estimator matrix's callback (``benchmarks/estimator_matrix.py``): the run's validation curve against
optimizer steps and against training seconds, written to <run folder>/curve.json after every validation."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import lightning as L


class CurveTimer(L.Callback):
    """Training seconds are the sum of batch start -> batch end (the gradient-variance probe, listed after this
    callback, and validation fall outside), in wall time (``train_s``) and in CPU time of the training thread
    (``train_cpu_s``: the runs take one torch thread, so it holds the step's work; other processes on the machine
    and a SIGSTOP pause do not add to it as they do to wall time); each validation adds a point
    {step, train_s, train_cpu_s, wall_s, val/...}."""

    def __init__(self):
        self.train_s, self.train_cpu_s, self.steps, self._t0, self._c0, self._fit0 = 0.0, 0.0, 0, 0.0, 0.0, 0.0
        self.points: list[dict] = []

    def on_fit_start(self, trainer, pl_module):
        self._fit0 = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._t0, self._c0 = time.perf_counter(), time.thread_time()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.train_s += time.perf_counter() - self._t0
        self.train_cpu_s += time.thread_time() - self._c0
        self.steps += 1

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        point = {"step": trainer.global_step, "batches": self.steps, "train_s": round(self.train_s, 3),
                 "train_cpu_s": round(self.train_cpu_s, 3), "wall_s": round(time.perf_counter() - self._fit0, 3)}
        for key, value in trainer.callback_metrics.items():
            if key.startswith("val/") and value.numel() == 1:
                v = float(value)
                point[key] = v if math.isfinite(v) else None
        self.points.append(point)
        self._write(trainer)

    def on_train_end(self, trainer, pl_module):
        self._write(trainer)

    def _write(self, trainer):
        if trainer.is_global_zero:
            out = Path(trainer.default_root_dir) / "curve.json"
            out.write_text(json.dumps({"batches": self.steps, "train_s": round(self.train_s, 3),
                                       "train_cpu_s": round(self.train_cpu_s, 3), "points": self.points}) + "\n")
