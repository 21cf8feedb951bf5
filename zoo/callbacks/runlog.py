"""What a training run prints: its folder once training starts, then Lightning's progress bar on a terminal or,
off one (a file, a pipe, SLURM's output), one plain line per epoch (and one at most every ``ZOO_PROGRESS_EVERY``
seconds inside a long epoch), and at the end a summary (``end_summary``: time, epochs and steps, the best
checkpoint, which weights the test used).

A line off a terminal::

    epoch 3/12  step 57  train/loss 25.02  val/loss 25.4  val/kl 0.01  val/rec 25.39  0:00:02

``ZOO_PROGRESS=bar`` or ``lines`` forces either (unset or ``auto``: ``sys.stdout.isatty()`` decides);
``trainer.enable_progress_bar=false`` gives the lines on a terminal too. The lines go to stdout, line-buffered, so
that they keep their place among stderr's lines in one file (``> log 2>&1``)."""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint, ProgressBar, StochasticWeightAveraging, WeightAveraging

from zoo.callbacks.curves import Curves, is_loss
from zoo.errors import UserError

MODES = ("auto", "bar", "lines")
EVERY_S = 30.0  # the longest wait between two lines inside an epoch, unless ZOO_PROGRESS_EVERY says otherwise
MAX_SHOWN = 10  # metrics on one line: the train losses first, then the validation metrics


def progress_mode() -> str:
    """'bar' or 'lines': ``ZOO_PROGRESS`` where it names one, else 'bar' only when stdout is a terminal."""
    given = os.environ.get("ZOO_PROGRESS", "").strip().lower() or "auto"
    if given not in MODES:
        raise UserError(f"ZOO_PROGRESS={given!r} is not one of {', '.join(MODES)}: bar (Lightning's progress bar), "
                        "lines (a plain line per epoch) or auto (the bar on a terminal, lines otherwise); "
                        "unset it for auto")
    if given != "auto":
        return given
    isatty = getattr(sys.stdout, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


def line_interval() -> float:
    """``ZOO_PROGRESS_EVERY`` (seconds, >= 0; 0: a line after every training batch), else ``EVERY_S``."""
    given = os.environ.get("ZOO_PROGRESS_EVERY", "").strip()
    if not given:
        return EVERY_S
    try:
        every = float(given)
    except ValueError:
        every = -1.0
    if not every >= 0:  # a word, a negative number, nan
        raise UserError(f"ZOO_PROGRESS_EVERY={given!r} must be a number of seconds >= 0 (the longest wait between "
                        f"two progress lines inside an epoch; default {EVERY_S:g}); unset it for the default")
    return every


def run_console(trainer_opts: dict, callbacks: list, run_dir: Path) -> list:
    """The run's ``RunLog`` and ``Curves`` (zoo.callbacks.curves), and Lightning's own bar turned off
    (``trainer_opts['enable_progress_bar']``) where the lines replace it. A progress bar among ``callbacks`` (a
    recipe naming Lightning's RichProgressBar) is left to do its work: no lines then."""
    named_bar = any(isinstance(c, ProgressBar) for c in callbacks)
    lines = not named_bar and (progress_mode() == "lines" or trainer_opts.get("enable_progress_bar") is False)
    if lines:
        trainer_opts["enable_progress_bar"] = False
        line_buffered(sys.stdout)
    return [RunLog(run_dir, lines=lines, every=line_interval() if lines else EVERY_S), Curves(run_dir / "plots")]


def line_buffered(stream: Any) -> None:
    """Each line written out when it ends: a file's stdout is block-buffered, so the zoo's lines came after
    stderr's (Lightning's, warnings) written later. Streams without ``reconfigure`` are left as they are."""
    try:
        stream.reconfigure(line_buffering=True)
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass


def clock(seconds: float) -> str:
    """0:01:05 for 65 s."""
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class RunLog(L.Callback):
    """The run folder once training starts, the lines off a terminal (``lines``), and the times ``end_summary``
    reports. Printed by the first process only."""

    def __init__(self, run_dir: Path, lines: bool, every: float = EVERY_S):
        self.run_dir, self.lines, self.every = Path(run_dir), lines, every  # every: seconds, see line_interval
        self.started: float | None = None  # time.monotonic() at fit start
        self.fit_s: float | None = None  # seconds from fit start to fit end
        self.test_started: float | None = None
        self.test_s: float | None = None  # seconds the test took
        self.first: tuple[int, int] = (0, 0)  # (epoch, step) training started from: (0, 0) unless resumed
        self.val: dict[str, float] = {}  # the last validation's metrics, until a line shows them
        self.last_line = 0.0  # time.monotonic() of the last line

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = time.monotonic()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.first = (trainer.current_epoch, trainer.global_step)
        self.last_line = time.monotonic()
        if trainer.is_global_zero:
            resumed = f" (resumed at epoch {self.first[0] + 1}, step {self.first[1]})" if any(self.first) else ""
            print(f"run: {self.run_dir}{resumed}", flush=True)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.val = scalars(trainer.callback_metrics, lambda k: k.startswith("val/"))

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        total = trainer.num_training_batches  # inf for an iterable dataset of unknown length
        last = batch_idx + 1 >= total  # the epoch's line follows at once
        if self.lines and not last and time.monotonic() - self.last_line >= self.every:
            self.say(trainer, f"batch {batch_idx + 1}" + (f"/{total}" if total != float("inf") else ""))

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.lines:
            self.say(trainer)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.fit_s = time.monotonic() - self.started if self.started is not None else None

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.test_started = time.monotonic()

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.test_s = time.monotonic() - self.test_started if self.test_started is not None else None

    def say(self, trainer: L.Trainer, within: str = "") -> None:
        self.last_line = time.monotonic()
        if not trainer.is_global_zero:
            return
        print(self.line(trainer, within), flush=True)
        self.val = {}

    def line(self, trainer: L.Trainer, within: str = "") -> str:
        """``epoch 3/12  step 57  train/loss 25.02  val/loss 25.4  0:00:02``: the epoch counted from 1 (as of
        max_epochs; checkpoint names and metrics.csv count from 0), ``within`` the epoch where a line comes
        before its end; train/ losses as last logged (every trainer.log_every_n_steps), the validation's
        metrics when one ran since the last line, and the time since fit started."""
        epochs = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        parts = [f"epoch {trainer.current_epoch + 1}{epochs}", within, f"step {trainer.global_step}"]
        train = scalars(trainer.callback_metrics, lambda k: k.startswith("train/") and is_loss(k))
        shown = [*sorted(train.items()), *self.val.items()][:MAX_SHOWN]
        parts += [f"{k} {v:.4g}" for k, v in shown]
        parts.append(clock(time.monotonic() - self.started) if self.started is not None else "")
        return "  ".join(p for p in parts if p)


def scalars(metrics: dict, keep: Any) -> dict[str, float]:
    """{name: value} of the one-number metrics whose names ``keep`` takes (Lightning holds them as tensors)."""
    out = {}
    for key, value in metrics.items():
        numel = getattr(value, "numel", None)
        if keep(key) and (numel is None or numel() == 1):
            out[key] = float(value)
    return out


def end_summary(trainer: L.Trainer, run_dir: Path, tested: bool) -> list[str]:
    """The lines after "run folder:" at the end of a run: epochs and steps done and the time taken, the best
    checkpoint with its monitored value, and (``tested``) which weights the test scored."""
    log = next((c for c in trainer.callbacks if isinstance(c, RunLog)), None)
    lines = []
    if log is not None and log.fit_s is not None:
        first = f" (resumed at epoch {log.first[0] + 1}, step {log.first[1]})" if any(log.first) else ""
        test = f", test {clock(log.test_s)}" if log.test_s is not None else ""
        lines.append(f"  trained: {count(trainer.current_epoch, 'epoch')}, {count(trainer.global_step, 'step')}"
                     f"{first} in {clock(log.fit_s)}{test}")
    lines.append(f"  best checkpoint: {best_checkpoint(trainer, run_dir)}")
    if tested:
        lines.append(f"  test used: {tested_weights(trainer)}")
    return lines


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def best_checkpoint(trainer: L.Trainer, run_dir: Path) -> str:
    """'checkpoints/best-9-189.ckpt (val/loss 25.12, min)', or why there is none."""
    best = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint) and c.monitor]
    if not best:
        return "none (no checkpoint chooses one by a metric in this run)"
    ck = best[0]
    if not ck.best_model_path:
        every = getattr(ck, "_every_n_epochs", 1) or 1
        hint = (f": {ck.monitor} was never logged" if ck.monitor not in trainer.callback_metrics
                else f": one is saved every checkpoint.every_n_epochs={every} epochs" if every > trainer.current_epoch
                else "")
        return f"none saved (by {ck.monitor}){hint}"
    path = Path(ck.best_model_path)
    shown = path.relative_to(run_dir) if path.is_relative_to(run_dir) else path
    score = f" {float(ck.best_model_score):.4g}" if ck.best_model_score is not None else ""
    return f"{shown} ({ck.monitor}{score}, {ck.mode})"


def tested_weights(trainer: L.Trainer) -> str:
    """The weights ``zoo.train``'s test scored: the model as training left it (not the best checkpoint); with an
    averaging callback, the average it copied in when training ended."""
    averaging = [c for c in trainer.callbacks if isinstance(c, (WeightAveraging, StochasticWeightAveraging))]
    if averaging:
        return (f"the average of {type(averaging[0]).__name__}, copied into the weights when training ended "
                "(not the best checkpoint)")
    return "the weights at the end of training (those of last.ckpt), not the best checkpoint"
