"""Never lose a run: atomic checkpoint files, save on SIGTERM/SIGINT, stop on a non-finite loss,
and RNG state in the checkpoint so a resumed run continues exactly."""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from zoo.core.files import atomic_path
from zoo.registry import closest


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write to a temporary file in the same folder, fsync, then rename over the target: a kill
    during a save leaves the previous checkpoint intact. Loads with ``weights_only=True``."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp, open(tmp, "wb") as f:  # a full disk or a kill leaves no partial file
            torch.save(checkpoint, f)
            f.flush()
            os.fsync(f.fileno())

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict:
        return torch.load(path, map_location=map_location or "cpu", weights_only=True)


class NonFiniteLossError(RuntimeError):
    def __init__(self, step: int, epoch: int, value: float | str):
        super().__init__(f"the training loss became {value} at step {step} (epoch {epoch})")
        self.step, self.epoch = step, epoch


def as_divergence(err: Exception, trainer: L.Trainer) -> NonFiniteLossError | None:
    """``err`` raised in fit as a diverged run, or None: the guard's own error, or torch.distributions
    refusing NaN parameters (an update made the weights non-finite; the next forward pass builds a
    distribution from them before any loss exists for the guard to see)."""
    if isinstance(err, NonFiniteLossError):
        return err
    if isinstance(err, ValueError) and "but found invalid values" in str(err):
        return NonFiniteLossError(trainer.global_step, trainer.current_epoch, "non-finite (NaN parameters of a "
                                  "distribution: the previous update broke the weights)")
    return None


class NonFiniteLossGuard(L.Callback):
    """Raise before ``backward`` when the loss is NaN/inf, so no bad update is applied and no
    checkpoint of the broken weights is written."""

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if not torch.isfinite(loss).all():
            raise NonFiniteLossError(trainer.global_step, trainer.current_epoch, float(loss.detach().sum()))


class MonitorCheck(L.Callback):
    """Say so when the metric the best checkpoint is chosen by is not logged (a typo in
    ``checkpoint.monitor``): Lightning then saves no best checkpoint and, here, says nothing. A
    warning, not an error: some metrics are logged only every few epochs (the OOD model's ODIN search)."""

    def __init__(self, monitor: str, chooses_best: bool = True):
        self.monitor, self.seen, self.warned = monitor, False, False
        self.chooses_best = chooses_best and monitor.startswith("val/")  # False: validation off, said at the start
        self.validated = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.validated = True
        self.seen = self.seen or self.monitor in trainer.callback_metrics
        if not self.seen and not self.warned:
            self.warned = True
            self._warn(trainer, "is not among the metrics of the first validation")

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.seen and self.warned:
            self._warn(trainer, "was never logged, so no best checkpoint was saved (last.ckpt was)")
        elif self.chooses_best and not self.validated and not trainer.fast_dev_run and trainer.is_global_zero:
            print(f"note: the run ended (at step {trainer.global_step}) before its first validation, so no best "
                  f"checkpoint was chosen by {self.monitor}; last.ckpt was saved", file=sys.stderr)

    def _warn(self, trainer: L.Trainer, what: str) -> None:

        logged = sorted(k for k in trainer.callback_metrics if k.startswith("val/"))
        if trainer.is_global_zero:
            print(f"warning: checkpoint.monitor={self.monitor!r} {what}{closest(self.monitor, logged)}; "
                  f"the model logs {', '.join(logged) or 'no val/ metric'}", file=sys.stderr)


def at_epochs_last_batch(trainer: L.Trainer) -> bool:
    """The batch just trained ends its epoch. A checkpoint saved here comes before the epoch's
    validation, which Lightning does not run again when it resumes one: the validation's draws from
    the RNG (and what it fits: the OOD model's temperature) are lost and the resumed run drifts."""
    return trainer.fit_loop.epoch_loop.batch_progress.is_last_batch


class LastCheckpoint(ModelCheckpoint):
    """``last.ckpt``: on its schedule, except that a step save (``checkpoint.every_n_train_steps``)
    falling on an epoch's last batch is made at the epoch's end, after the validation there
    (``at_epochs_last_batch``); and off the schedule through ``save_now`` (a signal, the end of
    training), which also keeps the scheduled saves from overwriting that state at the same step."""

    deferred = False  # a step save is due at the end of this epoch

    @property
    def path(self) -> Path:
        return Path(self.dirpath) / f"{self.filename}{self.FILE_EXTENSION}"

    def saved_now(self, trainer: L.Trainer) -> bool:
        """last.ckpt holds this very step (Lightning's counter of the last save)."""
        return self._last_global_step_saved == trainer.global_step and self.path.is_file()

    def save_now(self, trainer: L.Trainer) -> None:
        trainer.save_checkpoint(self.path, weights_only=False)  # the full state, to resume from
        self._last_global_step_saved = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        every = self._every_n_train_steps
        if every and at_epochs_last_batch(trainer):
            self.deferred = self.deferred or trainer.global_step % every == 0
            return
        super().on_train_batch_end(trainer, pl_module, *args)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self.deferred and not self.saved_now(trainer) and not trainer.fast_dev_run:
            self.save_now(trainer)
        self.deferred = False


class FinalCheckpoint(L.Callback):
    """When training ends (max_epochs / max_steps reached, early stopping), save ``last.ckpt``
    whatever the save interval, so every finished run can be evaluated and resumed
    (``checkpoint.every_n_epochs: 5`` with ``trainer.max_epochs=3`` would otherwise leave none).
    Place it before weight-averaging callbacks: their ``on_train_end`` copies the average into the
    live weights, which the checkpoint must keep apart (resuming goes on from the live ones)."""

    def __init__(self, last: LastCheckpoint):
        self.last = last

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # fast_dev_run: Lightning writes no checkpoints; saved_now: by the schedule or a signal, at this step
        if not trainer.fast_dev_run and not self.last.saved_now(trainer):
            self.last.save_now(trainer)


class SignalCheckpoint(L.Callback):
    """On SIGTERM or SIGINT: finish the current training batch, or the validation under way, save
    ``last.ckpt``, stop cleanly (a signal during validation is acted on when it ends, not after the
    next training batch: with SLURM's grace period, a long step could be one too many). A second
    SIGINT interrupts at once. Place it after weight-averaging callbacks: their step's update and
    their swap back of the live weights after validation come before the save."""

    def __init__(self, last: LastCheckpoint):
        self.last = last
        self.received: int | None = None
        self.acted = False  # last.ckpt saved and the stop asked for, once
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = signum

    def kept(self) -> str:
        """What a run stopped at once (a second SIGINT, or one before training started) has left."""
        if self.last.path.is_file():
            return f"{self.last.path} (step {self.last._last_global_step_saved}) is kept: resume with ckpt_path=last"
        return "no checkpoint was saved yet"

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handler)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if not at_epochs_last_batch(trainer):  # there: acted on after the epoch's validation
            self._stop_if_signalled(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stop_if_signalled(trainer)  # a signal on the epoch's last batch, when no validation ran after it

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # after on_validation_epoch_end: weights an averaging callback swapped in for validation are back
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._stop_if_signalled(trainer)

    def _stop_if_signalled(self, trainer: L.Trainer) -> None:
        stop = self.received is not None
        if trainer.world_size > 1:  # a signal may reach one rank only: stop all if any got one, or
            # that rank would wait alone in the checkpoint's barrier (one small all-reduce a step)
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if not stop or self.acted:
            return
        self.acted = True
        # Lightning now closes the epoch: neither the scheduled save nor FinalCheckpoint may overwrite this
        # mid-epoch state with "epoch done", which save_now's record of the step prevents
        self.last.save_now(trainer)
        trainer.should_stop = True
        # Lightning validates once more when should_stop is set: after last.ckpt, so its metrics rows and
        # best checkpoint came from a state no resume knows of (a stale best-*.ckpt stayed beside the
        # resumed run's); Lightning's own flag for "the next validation is skipped" (a no-op at epoch end)
        trainer.fit_loop.epoch_loop._skip_next_val = True
        # should_stop alone waits for trainer.min_epochs / min_steps (it saved and printed every step until then)
        trainer.fit_loop.min_epochs, trainer.fit_loop.epoch_loop.min_steps = None, None
        if trainer.is_global_zero:
            name = signal.Signals(self.received).name if self.received else "a stop signal (on another rank)"
            print(f"\n{name} received: saved {self.last.path} at step {trainer.global_step}; "
                  "resume with ckpt_path=last", flush=True)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


class RNGState(L.Callback):
    """Store torch (CPU and CUDA) / numpy / python RNG states in the checkpoint and restore them on
    resume, so the stochastic parts of training (sampled latents, tokens, noise) continue
    identically. CUDA generators are saved only once CUDA is in use, and restored only onto as many
    visible devices as were saved (a GPU checkpoint resumed on a CPU keeps the CPU state only)."""

    def state_dict(self) -> dict:
        np_state = np.random.get_state()
        state = {
            "torch": torch.get_rng_state(),
            "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
            "python": list(random.getstate()),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()  # one ByteTensor per visible device
        return state

    def load_state_dict(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        cuda = state.get("cuda")
        if cuda and torch.cuda.is_available() and torch.cuda.device_count() == len(cuda):
            torch.cuda.set_rng_state_all(cuda)
        kind, keys, *rest = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), *rest))
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))


class RunInfo(L.Callback):
    """Puts the run's identity into every checkpoint under ``checkpoint["zoo"]``: which model,
    the data options and the full resolved config. `zoo.load` / `zoo.evaluate` read it to rebuild
    the model and its datamodule, and to refuse files that are not zoo checkpoints."""

    def __init__(self, info: dict):
        self.info = info

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # the loggers get the recipe's resolved config (the model keeps its hyperparameters, which
        # may hold a whole vocabulary, out of the loggers: see ZooModule.__init__)
        for logger in trainer.loggers:
            logger.log_hyperparams(self.info["config"])

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        checkpoint["zoo"] = self.info


class Notes(L.Callback):
    """One-line notes about the run's settings (``note: ...`` on stderr), printed once training has started,
    after the checks Lightning makes inside fit (a mistake found there is then the only line), by one process."""

    def __init__(self, notes: list[str]):
        self.notes, self.said = list(notes), False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.is_global_zero and not self.said:
            for note in self.notes:
                print(f"note: {note}", file=sys.stderr)
        self.said = True


class ReleaseHeldMessages(L.Callback):
    """Lets out Lightning's start-up lines held by ``zoo.messages.HeldMessages`` once training (or
    testing) has started, i.e. after the checks Lightning makes inside fit and test."""

    def __init__(self, held: Any):
        self.held = held

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.held.release()

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.held.release()
