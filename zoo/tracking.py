"""Loggers for a run: CSV (default), TensorBoard, Weights & Biases.

W&B never crashes or hangs a run: without credentials it runs offline (sync later with
`wandb sync <run_dir>/wandb/offline-run-*`); if an online start fails it falls back to offline
with a warning. A run folder keeps its W&B run id in ``<run_dir>/wandb/run-id``: a resumed run
(``ckpt_path=last``, a SLURM requeue) continues the same W&B run, online and offline."""

from __future__ import annotations

import contextlib
import netrc
import os
import secrets
import string
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import ModelSummary, ProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger

from zoo.errors import UserError
from zoo.messages import HeldMessages, _DropNoise, quiet_lightning  # noqa: F401  (zoo.tracking's names too)
from zoo.options import thaw
from zoo.paths import home_folder, writable


def set_float32_precision(level: str) -> None:
    """``matmul_precision``: one level for matrix products and cuDNN's convolutions, whose TF32 switch
    torch keeps apart (on by default: on an H100 a conv net's float32 gradients then differ from the
    CPU's in the third digit). Lightning's tip to set the first is dropped once it is set (with
    ``highest`` its condition still holds)."""
    torch.set_float32_matmul_precision(level)
    torch.backends.cudnn.allow_tf32 = level != "highest"
    _DropNoise.precision_chosen = True


@contextlib.contextmanager
def float32_precision(level: str) -> Iterator[None]:
    """``set_float32_precision`` for a block only (a check in full float32 beside timings with the
    device's defaults); both switches are restored after it."""
    saved = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32, _DropNoise.precision_chosen
    set_float32_precision(level)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.allow_tf32, _DropNoise.precision_chosen = saved[1:]


def console_callbacks(trainer_opts: dict, others: list) -> list:
    """Lightning's plain model summary and tqdm progress bar, named so that Lightning does not pick
    its ``rich`` versions when that package is installed: those print to the console directly, past
    HeldMessages and the guarded streams (zoo.cli), so a run's output would depend on an unrelated package. Each only
    where the trainer options leave it on and ``others`` has none (a ``callbacks:`` entry naming
    Lightning's RichProgressBar, say)."""
    out = []
    if trainer_opts.get("enable_model_summary") is not False and not any(isinstance(c, ModelSummary) for c in others):
        out.append(ModelSummary())
    if trainer_opts.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in others):
        out.append(TQDMProgressBar())
    return out


RUN_ID_FILE = Path("wandb") / "run-id"  # in the run folder: the W&B run id its resumes continue
RUN_ID_ALPHABET = string.ascii_lowercase + string.digits  # W&B's own ids: 8 of these


def wandb_run_id(run_dir: Path) -> str:
    """The W&B run id of the run folder: the one kept in ``<run_dir>/wandb/run-id``, or a new one written
    there. Created exclusively, so the ranks of a DDP run (each makes its loggers) agree on one id. Made
    here rather than by wandb (whose ``util.generate_id`` newer releases removed). ``WANDB_RUN_ID`` wins
    where it is set: a W&B sweep agent hands each run its id there (kept in the file too if it has none)."""
    path = run_dir / RUN_ID_FILE
    given = os.environ.get("WANDB_RUN_ID", "").strip()
    if not path.is_file() or given:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = given or "".join(secrets.choice(RUN_ID_ALPHABET) for _ in range(8))
        try:
            with open(path, "x") as f:
                f.write(new + "\n")
            return new
        except FileExistsError:  # another rank wrote it first, or it was there and WANDB_RUN_ID is set
            if given:
                return given
    found = path.read_text().strip()
    if not found or len(found) > 64 or any(c not in RUN_ID_ALPHABET + "-_" for c in found):
        raise UserError(f"{path} does not hold a W&B run id (got {found[:40]!r}): it names the W&B run this run "
                        "folder continues; write the run's id (the end of its URL) there, or remove the file to "
                        "start a new W&B run")
    return found


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


_STARTED: list = []  # the WandbLoggers made in this process, whose runs the next one finishes


def finish_earlier_wandb_runs() -> None:
    """wandb.finish the W&B runs of the loggers made before in this process: a W&B run still going when
    wandb.init is called again is handed back by it, so a second run in one process (a test, a notebook)
    logged into the first one's run and id. A process's last run is finished by wandb when it exits."""
    while _STARTED:
        experiment = getattr(_STARTED.pop(), "_experiment", None)  # None: never started (no step logged)
        if experiment is not None and hasattr(experiment, "finish"):  # a DummyExperiment on other ranks has none
            experiment.finish()


def make_wandb_logger(cfg: dict, run_dir: Path) -> Any:

    try:
        import wandb  # noqa: F401
    except ImportError:
        raise UserError("logger 'wandb' needs the wandb package: pip install wandb") from None
    finish_earlier_wandb_runs()
    opts = cfg["wandb"]
    mode = wandb_mode(opts["mode"])
    cache = home_folder("XDG_CACHE_HOME", ".cache")
    if cache is None or not writable(cache):
        # wandb's core keeps its logs and cache there: without HOME (a container, a cron job) or with a
        # read-only one it prints ~20 log lines on every run and leaves .wandb_cache in the working folder
        os.environ["XDG_CACHE_HOME"] = str(run_dir / "wandb" / "cache")
    # the same id on every start of this run folder: Lightning hands wandb.init resume="allow", so a resume
    # continues the run (online: its steps and history; offline: `wandb sync` joins the folders into one run)
    common = dict(project=opts["project"], entity=opts["entity"], save_dir=str(run_dir), tags=opts["tags"],
                  name=f"{cfg['recipe']}/{run_dir.name}", config=thaw(cfg), id=wandb_run_id(run_dir))
    # Lightning refuses log_model with offline mode; artifacts only make sense online.
    logger = WandbLogger(mode=mode, log_model="all" if (mode == "online" and opts["log_model"]) else False,
                         settings=_settings(), **common)
    _drop_anonymous(logger)
    if mode == "online":
        try:
            _ = logger.experiment  # start now, so a network failure shows here and not mid-run
        except Exception as err:  # wandb raises many kinds of errors for a dead network
            print(f"warning: W&B online start failed ({type(err).__name__}: {err}); logging offline",
                  file=sys.stderr)
            logger = _drop_anonymous(WandbLogger(mode="offline", log_model=False, settings=_settings(), **common))
    _STARTED.append(logger)
    return logger


def _drop_anonymous(logger: Any) -> Any:
    """Lightning 2.6 hands wandb.init ``anonymous=None`` on every run, and wandb >= 0.19 answers each
    with "WARNING The anonymous setting has no effect": the key is left out instead (it has no effect)."""
    init = getattr(logger, "_wandb_init", None)
    if isinstance(init, dict) and init.get("anonymous") is None:
        init.pop("anonymous", None)
    return logger


def _settings() -> Any:
    import wandb  # imported when used: wandb

    return wandb.Settings(init_timeout=60, silent=True)


def make_loggers(cfg: dict, run_dir: Path, resumed: bool = False) -> list:
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
