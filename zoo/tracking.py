"""Loggers for a run: CSV (default), TensorBoard, Weights & Biases.

W&B never crashes or hangs a run: without credentials it runs offline (sync later with
`wandb sync <run_dir>/wandb/offline-run-*`); if an online start fails it falls back to offline
with a warning."""

from __future__ import annotations

import contextlib
import logging
import netrc
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class _DropCloudTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip: For seamless cloud logging" not in record.getMessage()


def quiet_lightning() -> None:
    """Drop two messages Lightning prints on every run that a zoo user cannot act on: the
    advertisement for its cloud logger, and torch's deprecation of ``LeafSpec`` raised from
    Lightning's own code. Everything else Lightning says is kept."""
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropCloudTip) for f in logger.filters):
            logger.addFilter(_DropCloudTip())
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated")


RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _Hold(logging.Filter):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


@contextlib.contextmanager
def lightning_messages_held() -> Iterator[None]:
    """Hold what Lightning logs while a Trainer is built ("GPU available: ...") and let it out only
    when the block succeeds: a setting Lightning refuses halfway through its __init__
    (limit_train_batches=1.5) then prints the zoo's one error line, not three."""
    hold = _Hold()
    loggers = [logging.getLogger(name) for name in RANK_ZERO_LOGGERS]
    for logger in loggers:
        logger.addFilter(hold)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(hold)
    for record in hold.records:  # reached only without an exception
        logging.getLogger(record.name).handle(record)


def build_trainer(make: Callable[[], Any], what: str) -> Any:
    """``make()`` (which builds a lightning.Trainer) with Lightning's start-up lines held back; a
    setting Lightning refuses, on the way in or halfway through its __init__, is one UserError
    "invalid <what>: ..." (nothing is written yet: run folders are made after this)."""
    from zoo.errors import UserError

    quiet_lightning()
    try:
        with lightning_messages_held():
            return make()
    except (ValueError, TypeError) as err:
        raise UserError(f"invalid {what}: {err}{_fix_hint(str(err))}") from None
    except ImportError as err:  # e.g. trainer.accelerator=tpu without torch_xla
        raise UserError(f"the trainer settings need a package that is not installed: {err}") from None
    except Exception as err:
        if type(err).__name__ == "MisconfigurationException":  # e.g. limit_train_batches=1.5
            raise UserError(f"invalid {what}: {err}{_fix_hint(str(err))}") from None
        raise


def _fix_hint(reason: str) -> str:
    """The fix for the refusals met most (Lightning's reason names only what is wrong)."""
    if "gpu backend" in reason or "accelerator is not available" in reason:
        return " Use trainer.accelerator=cpu, or auto (a GPU when there is one)"
    if "Trainer(devices=" in reason and "not a valid input" in reason:
        return " trainer.devices must be >= 1, -1 (all devices) or auto"
    return ""


def wandb_logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return auth is not None


def wandb_mode(requested: str | None) -> str:
    mode = requested or os.environ.get("WANDB_MODE") or ("online" if wandb_logged_in() else "offline")
    if mode == "online" and not wandb_logged_in():
        print("warning: W&B has no credentials (run `wandb login`); logging offline", file=sys.stderr)
        mode = "offline"
    return mode


def make_wandb_logger(cfg: dict, run_dir: Path) -> Any:
    from lightning.pytorch.loggers import WandbLogger

    from zoo.errors import UserError

    try:
        import wandb  # noqa: F401
    except ImportError:
        raise UserError("logger 'wandb' needs the wandb package: pip install wandb") from None
    opts = cfg["wandb"]
    mode = wandb_mode(opts["mode"])
    common = dict(project=opts["project"], entity=opts["entity"], save_dir=str(run_dir), tags=opts["tags"],
                  name=f"{cfg['recipe']}/{run_dir.name}", config=cfg)
    # Lightning refuses log_model with offline mode; artifacts only make sense online.
    logger = WandbLogger(mode=mode, log_model="all" if (mode == "online" and opts["log_model"]) else False,
                         settings=_settings(), **common)
    if mode == "online":
        try:
            _ = logger.experiment  # start now, so a network failure shows here and not mid-run
        except Exception as err:  # wandb raises many kinds of errors for a dead network
            print(f"warning: W&B online start failed ({type(err).__name__}: {err}); logging offline",
                  file=sys.stderr)
            logger = WandbLogger(mode="offline", log_model=False, settings=_settings(), **common)
    return logger


def _settings() -> Any:
    import wandb

    return wandb.Settings(init_timeout=60, silent=True)


def make_loggers(cfg: dict, run_dir: Path, resumed: bool = False) -> list:
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    loggers: list = []
    for name in cfg["logger"]:
        if name == "csv":  # logs/metrics.csv; a resumed run writes logs/resume-N/metrics.csv beside it
            version = ""
            if resumed:
                version = f"resume-{len(list((run_dir / 'logs').glob('resume-*'))) + 1}"
            loggers.append(CSVLogger(save_dir=str(run_dir), name="logs", version=version))
        elif name == "tensorboard":
            loggers.append(TensorBoardLogger(save_dir=str(run_dir), name="tensorboard", version=""))
        elif name == "wandb":
            loggers.append(make_wandb_logger(cfg, run_dir))
    return loggers
