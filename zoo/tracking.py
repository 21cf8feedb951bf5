"""Loggers for a run: CSV (default), TensorBoard, Weights & Biases.

W&B never crashes or hangs a run: without credentials it runs offline; with them, a server that does not
answer a short probe (a compute node without network) is offline at once, and an online start that fails
falls back to offline. An offline run says once, in one line, where it is and the `wandb sync` command that
uploads it. A run folder keeps its W&B run id in ``<run_dir>/wandb/run-id``: a resumed run (``ckpt_path=last``,
a SLURM requeue) continues the same W&B run, online and offline."""

from __future__ import annotations

import contextlib
import netrc
import os
import secrets
import ssl
import string
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import ModelSummary, ProgressBar, TQDMProgressBar
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from zoo.errors import UserError
from zoo.messages import HeldMessages, _DropNoise, quiet_lightning  # noqa: F401  (zoo.tracking's names too)
from zoo.paths import home_folder, writable
from zoo.schema import thaw


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
        new = given or new_run_id()
        try:
            with open(path, "x") as f:
                f.write(new + "\n")
            return new
        except FileExistsError:  # another rank wrote it first, or it was there and WANDB_RUN_ID is set
            if given:
                return given
    found = path.read_text().strip()
    if not found or len(found) > 64 or any(c not in RUN_ID_ALPHABET + "-_" for c in found):
        raise UserError(f"{path.name} does not hold a W&B run id (got {found[:40]!r}): it names the W&B run this "
                        "run folder continues; write the run's id (the end of its URL) there, or remove the file to "
                        "start a new W&B run", details=[f"file: {path}"])
    return found


def new_run_id() -> str:
    return "".join(secrets.choice(RUN_ID_ALPHABET) for _ in range(8))


def wandb_logged_in(url: str | None = None) -> bool:
    """An API key in WANDB_API_KEY, or in ~/.netrc for the server at ``url`` (``wandb login`` writes it there)
    or for api.wandb.ai."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    hosts = {"api.wandb.ai", urllib.parse.urlsplit(url).hostname if url else None} - {None}
    try:
        found = netrc.netrc()
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return any(found.authenticators(host) is not None for host in hosts)


def wandb_mode(requested: str | None, url: str | None = None) -> tuple[str, str]:
    """(the W&B mode, why it is offline: '' where it is not, or where the user chose it)."""
    mode = requested or os.environ.get("WANDB_MODE") or ""
    if mode in ("", "online", "shared") and not wandb_logged_in(url):
        return "offline", "no credentials: `wandb login` to log online"
    return mode or "online", ""


def wandb_base_url() -> str:
    """The W&B server a run logs to, as wandb finds it: WANDB_BASE_URL, else the one ``wandb login --host``
    saved in its settings file, else wandb's default."""
    import wandb  # imported when used: wandb

    try:
        settings = wandb.Settings()
        settings.update_from_system_settings()
        settings.update_from_env_vars(dict(os.environ))
        return str(settings.base_url)
    except Exception:  # a wandb release whose Settings reads its sources otherwise
        return os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"


PROBE_TIMEOUT_S = 3.0  # how long the W&B server has to answer before a run logs offline


def unreachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the server at ``url`` cannot be reached, or None where it answers (any HTTP status, or a TLS
    handshake whose certificate this Python does not trust: wandb may trust it). A HEAD request through the
    environment's proxies, bounded as a whole by ``timeout`` (the name lookup included, which a socket timeout
    does not bound): without it, a compute node without network waited wandb's init_timeout (60 s) to fail."""
    answer: list = []
    opener = urllib.request.build_opener(_NotFollowed)

    def head() -> None:
        try:
            opener.open(urllib.request.Request(url, method="HEAD"), timeout=timeout).close()
            answer.append(None)
        except urllib.error.HTTPError:  # an answer, a redirect too
            answer.append(None)
        except urllib.error.URLError as err:
            answer.append(None if isinstance(err.reason, ssl.SSLError) else str(err.reason))
        except (OSError, ValueError) as err:  # a timeout while reading, a malformed URL
            answer.append(str(err) or type(err).__name__)

    thread = threading.Thread(target=head, name="zoo-wandb-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return answer[0] if answer else f"no answer in {timeout:g} s"


class _NotFollowed(urllib.request.HTTPRedirectHandler):
    """A redirect is the server's answer: where it points (a web page elsewhere) is not asked."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def say_offline(run_dir: Path, why: str, warn: bool) -> None:
    """One line (rank 0): where the offline W&B run is, and the command that uploads it."""
    if rank_zero_only.rank == 0:
        level = "warning" if warn else "note"
        print(f"{level}: W&B logs offline{f' ({why})' if why else ''} to {run_dir / 'wandb'}; upload it later "
              f"with: wandb sync {run_dir / 'wandb' / 'offline-run-*'}", file=sys.stderr)


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
    """The run's WandbLogger: online where credentials are found and the server answers the probe (started now,
    so a failure shows before training), else offline, said in one line."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise UserError("logger 'wandb' needs the wandb package: pip install wandb") from None
    finish_earlier_wandb_runs()
    opts = cfg["wandb"]
    url = wandb_base_url()
    mode, why = wandb_mode(opts["mode"], url)
    asked = opts["mode"] or os.environ.get("WANDB_MODE")
    warn = mode == "offline" and asked in ("online", "shared")  # asked for online, and not given it
    cache = home_folder("XDG_CACHE_HOME", ".cache")
    if cache is None or not writable(cache):
        # wandb's core keeps its logs and cache there: without HOME (a container, a cron job) or with a
        # read-only one it prints log lines on every run and leaves .wandb_cache in the working folder
        os.environ["XDG_CACHE_HOME"] = str(run_dir / "wandb" / "cache")
    # the same id on every start of this run folder: Lightning hands wandb.init resume="allow", so a resume
    # continues the run (online: its steps and history; offline: `wandb sync` joins the folders into one run)
    common = dict(project=opts["project"], entity=opts["entity"], save_dir=str(run_dir), tags=opts["tags"],
                  name=f"{cfg['recipe']}/{run_dir.name}", config=thaw(cfg), id=wandb_run_id(run_dir))
    online = mode in ("online", "shared")
    problem = unreachable(url) if online else None
    if problem is not None:
        mode, why, warn, online = "offline", f"its server {url} cannot be reached: {problem}", True, False
    # Lightning refuses log_model with offline mode; artifacts only make sense online.
    logger = WandbLogger(mode=mode, log_model="all" if (online and opts["log_model"]) else False,
                         settings=_settings(), **common)
    _drop_anonymous(logger)
    if online:
        try:
            _ = logger.experiment  # start now, so a network failure shows here and not mid-run
        except Exception as err:  # wandb raises many kinds of errors for a dead network
            # wandb's service keeps the failed start's id ("run ID ... is in use"): this start takes its own;
            # the run folder's id stays the one its next starts continue
            common["id"] = new_run_id()
            mode, warn = "offline", True
            said = (str(err).strip().splitlines() or [""])[0]
            why = f"the online start failed: {type(err).__name__}: {said}; this start's W&B run id is {common['id']}"
            logger = _drop_anonymous(WandbLogger(mode="offline", log_model=False, settings=_settings(), **common))
    if mode == "offline":
        say_offline(run_dir, why, warn)
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
