"""Never lose a run: atomic checkpoint files, the last and final checkpoints, a save on SIGTERM/SIGINT,
and RNG state in the checkpoint so a resumed run continues exactly."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.plugins.io import TorchCheckpointIO

from zoo.core.files import atomic_path


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


def at_epochs_last_batch(trainer: L.Trainer) -> bool:
    """The batch just trained ends its epoch. A checkpoint saved here comes before the epoch's
    validation, which Lightning does not run again when it resumes one: the validation's draws from
    the RNG (and what it fits: the OOD model's temperature) are lost and the resumed run drifts."""
    return trainer.fit_loop.epoch_loop.batch_progress.is_last_batch


def saves_at_epoch_end(checkpoint: ModelCheckpoint, trainer: L.Trainer) -> bool:
    """``ModelCheckpoint.on_train_epoch_end`` may save at the epoch that is ending: elsewhere it only deep-copies
    every callback metric (``_monitor_candidates``) and saves nothing (no ``save_last``, an epoch off
    ``every_n_epochs``: four in five with ``checkpoint.every_n_epochs: 5``)."""
    every = checkpoint._every_n_epochs
    return bool(checkpoint.save_last) or (every >= 1 and (trainer.current_epoch + 1) % every == 0)


class EpochCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint``, its end-of-epoch checks left out where they cannot save
    (``saves_at_epoch_end``); the saves, their names and choices, and its state in a checkpoint (under
    ``ModelCheckpoint``'s key: a checkpoint of either resumes into the other) are Lightning's."""

    @property
    def state_key(self) -> str:
        return "ModelCheckpoint" + super().state_key.removeprefix(type(self).__qualname__)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if saves_at_epoch_end(self, trainer):
            super().on_train_epoch_end(trainer, pl_module)


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
        if saves_at_epoch_end(self, trainer):
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
        # Lightning's own flag to skip the validation should_stop adds (a no-op at epoch end): it would run
        # after last.ckpt, its metrics rows and best checkpoint from a state no resume knows of
        trainer.fit_loop.epoch_loop._skip_next_val = True
        # should_stop alone waits for trainer.min_epochs / min_steps, with a save and a line at every step
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
