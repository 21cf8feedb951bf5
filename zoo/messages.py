"""Lightning's messages on the zoo's console: the few a zoo user cannot act on dropped (``quiet_lightning``),
and its start-up lines held back until training starts (``HeldMessages``), so that a mistake found before then
is the only line. Plain ``logging``: no torch or Lightning imported (``zoo.cli`` uses it before a run)."""

from __future__ import annotations

import logging
import os
import re
import warnings


class _DropNoise(logging.Filter):
    DROPPED = ("Tip: For seamless cloud logging",  # an advertisement
               "Trainer already configured with model summary callbacks",  # console_callbacks named it
               "Detected KeyboardInterrupt, attempting graceful shutdown")  # zoo.cli.exit_status says it

    precision_chosen = False  # set_float32_precision ran: Lightning's tip to choose it is answered

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "torch.set_float32_matmul_precision" in message and _DropNoise.precision_chosen:
            return False
        return not any(text in message for text in self.DROPPED)


def quiet_lightning(resumed: str | os.PathLike | None = None) -> None:
    """Drop the messages Lightning prints that a zoo user cannot act on or that the zoo says better: the
    advertisement for its cloud logger, its note that the model summary was given (by ``console_callbacks``),
    torch's deprecation of ``LeafSpec`` raised from Lightning's own code, "does not have many workers" on a
    machine of more than 2 cores (the datamodules choose their workers: 0 where the data are tensors in memory,
    which workers only slow down, and 2 where images are decoded from disk; ``data.num_workers=`` changes it),
    and its "could not find the monitored key ... HINT: Did you call log" for a val/ metric of a run stopped
    before its first validation (a Ctrl-C, max_steps inside the first epoch: Lightning only warns before
    validation has run, and the zoo's MonitorCheck says "the run ended before its first validation, so no best
    checkpoint was chosen"). ``resumed``: the checkpoint folder of a run resumed in place (``ckpt_path=last``, a
    SLURM requeue), whose "Checkpoint directory ... exists and is not empty" is its resume, not a clash; a fresh
    run into a folder with checkpoints still gets it. Under PYTHONWARNINGS=error the workers' warning would end
    every run on such a machine. Everything else Lightning says is kept."""
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) for f in logger.filters):
            logger.addFilter(_DropNoise())
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")
    warnings.filterwarnings("ignore", message=r"The '\w+' does not have many workers")
    warnings.filterwarnings("ignore", message=r"`ModelCheckpoint\(monitor='val/[^']*'\)` could not find the "
                            r"monitored key in the returned metrics")
    if resumed is not None:  # Lightning names the folder by its real path
        folder = os.path.realpath(os.path.expanduser(resumed))
        warnings.filterwarnings("ignore", message=re.escape(f"Checkpoint directory {folder} exists and is not empty"))


RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class HeldMessages:
    """Lightning's log lines ("GPU available: ...", the model summary) held back from ``start()``
    until ``release()`` prints them or ``discard()`` drops them: a setting Lightning refuses part-way
    (limit_train_batches=1.5 in its __init__, a val_check_interval longer than the epoch inside fit)
    is then the zoo's one error line. As a context manager: released when the block ends, dropped
    when it raises (a traceback needs no device lines). Held at the handlers, so records of every
    lightning.* logger are caught; a second hold nested inside sees nothing (the outer one decides)."""

    def __init__(self):
        self.held: list[tuple[logging.Handler, logging.LogRecord]] = []
        self.filters: dict[logging.Handler, _HoldFor] = {}

    def start(self) -> HeldMessages:
        for handler in _lightning_handlers():
            self.filters[handler] = _HoldFor(handler, self.held)
            handler.addFilter(self.filters[handler])
        return self

    def _stop(self) -> list[tuple[logging.Handler, logging.LogRecord]]:
        for handler, hold in self.filters.items():
            handler.removeFilter(hold)
        self.filters, held = {}, list(self.held)
        self.held.clear()
        return held

    def release(self) -> None:
        for handler, record in self._stop():
            handler.handle(record)

    def discard(self) -> None:
        self._stop()

    def __enter__(self) -> HeldMessages:
        return self.start()

    def __exit__(self, kind, err, tb) -> None:
        self.discard() if kind is not None else self.release()


class _HoldFor(logging.Filter):
    def __init__(self, handler: logging.Handler, held: list):
        super().__init__()
        self.handler, self.held = handler, held

    def filter(self, record: logging.LogRecord) -> bool:
        self.held.append((self.handler, record))
        return False


def _lightning_handlers() -> list[logging.Handler]:
    """The handlers Lightning's loggers write through (their own, or the root's when they propagate)."""
    found: list[logging.Handler] = []
    for name in ("lightning.pytorch", "lightning.fabric"):
        logger: logging.Logger | None = logging.getLogger(name)
        while logger is not None:
            found += [h for h in logger.handlers if h not in found]
            logger = logger.parent if logger.propagate else None
    return found
