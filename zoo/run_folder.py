"""Which folder a training run writes and which checkpoint it resumes, settled before any data is built.

A fresh run gets ``<run_dir>/<recipe>/<timestamp>/``; ``ckpt_path=last`` the newest run with a
``last.ckpt``; a SLURM batch job ``slurm-<job id>`` (kept across a requeue, which resumes there);
torchrun's ranks ``torchrun-<run id>``; DDP children the folder their launcher chose (``ZOO_RUN_DIR``).
A checkpoint to resume is read (metadata and shapes only) and refused with one message when it is not
this recipe's model, has nothing left to train, or does not fit the model the recipe builds."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from zoo.core.files import missing_folders
from zoo.errors import UserError, no_access
from zoo.loading import pretrained_cards, read_checkpoint
from zoo.schema import flatten


def resolve_run_dir(cfg: dict) -> tuple[Path, str | None]:
    """The run folder and the checkpoint to resume from (None: a fresh run)."""
    root = Path(cfg["run_dir"]) / cfg["recipe"]
    ckpt = cfg["ckpt_path"]
    if ckpt == "last":
        found = sorted(root.glob("*/checkpoints/last.ckpt"), key=lambda p: p.stat().st_mtime)
        if not found:
            blocked = [p for p in (root, *root.glob("*"), *root.glob("*/checkpoints"))
                       if p.is_dir() and not os.access(p, os.R_OK | os.X_OK)]  # the glob passes them over
            if blocked:
                raise no_access(blocked[0], write=False, instead="leave ckpt_path out to start a new run")
            raise UserError(f"ckpt_path=last: no earlier run of '{cfg['recipe']}' with checkpoints/last.ckpt: leave "
                            "ckpt_path out to start a new run, or give ckpt_path=PATH/TO.ckpt (or the run_dir= of the "
                            "earlier run)", details=[f"looked under {root}"])
        return found[-1].parent.parent, str(found[-1])
    if os.environ.get("ZOO_RUN_DIR"):  # set by the launching process for DDP children, or by the user
        return Path(os.environ["ZOO_RUN_DIR"]), ckpt
    slurm = slurm_run_dir(root)
    if slurm is not None:  # a SLURM batch job: its folder survives a requeue, which keeps the job id
        return slurm, ckpt or slurm_resume_checkpoint(slurm)
    if os.environ.get("TORCHELASTIC_RUN_ID") and world_size() > 1:
        check_torchrun_devices(cfg.get("trainer") or {})
        return root / f"torchrun-{os.environ['TORCHELASTIC_RUN_ID']}", ckpt
    return root / time.strftime("%Y%m%d-%H%M%S"), ckpt  # made by claim_run_dir, suffixed if taken


TIMESTAMPED = re.compile(r"\d{8}-\d{6}")  # a fresh run's folder name: when it started


def claim_run_dir(run_dir: Path, cfg: dict) -> tuple[Path, list[Path]]:
    """(the run folder, the folders made for it). A fresh run's folder (a timestamp) is made at once,
    with the next free suffix if another run took the name first: chosen by ``exists()`` and made
    seconds later, two runs started in one second shared one folder (their metrics interleaved, one
    checkpoint survived). Other folders (a resumed run's, DDP's, SLURM's, torchrun's) are made by
    ``fit``; the list names those it will make. ``zoo.runner.removed_if_unsaved`` takes them away again."""
    fresh = cfg.get("ckpt_path") != "last" and not os.environ.get("ZOO_RUN_DIR") and TIMESTAMPED.fullmatch(run_dir.name)
    made = missing_folders(run_dir)
    if not fresh:
        return run_dir, made
    stamp = run_dir.name
    for suffix in range(1, 10_000):
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            run_dir.mkdir()
            return run_dir, made
        except FileExistsError:
            run_dir = run_dir.parent / f"{stamp}-{suffix}"
            made = missing_folders(run_dir)
    raise UserError(f"no free run folder name like {run_dir} after 10,000 tries: give run_dir= a new folder")


def check_torchrun_devices(trainer: dict) -> None:
    """Under torchrun, Lightning forms one process group only when trainer.devices x trainer.num_nodes is
    torchrun's WORLD_SIZE: without trainer.devices each process trained alone, all into one folder."""
    world, local = world_size(), os.environ.get("LOCAL_WORLD_SIZE", "")
    devices, nodes = trainer.get("devices", "auto"), trainer.get("num_nodes", 1)
    per_node = len(devices) if isinstance(devices, list) else devices if isinstance(devices, int) and devices > 0 \
        else None
    if per_node is None or not isinstance(nodes, int) or per_node * nodes != world:
        want = f"trainer.devices={local} trainer.num_nodes={world // int(local)}" if local.isdigit() and int(local) \
            else "trainer.devices=<processes a node> trainer.num_nodes=<nodes>"
        raise UserError(f"torchrun started {world} processes, but trainer.devices={devices} x trainer.num_nodes="
                        f"{nodes} does not make {world}: each process would train alone, all into one folder. Give "
                        f"{want} (and trainer.strategy=ddp)")


def world_size() -> int:
    """WORLD_SIZE as torchrun sets it; a hand-set value that is no number is one message."""
    value = os.environ.get("WORLD_SIZE", "1")
    if not value.strip().isdigit():
        raise UserError(f"the environment variable WORLD_SIZE={value!r} (the number of processes, set by torchrun) "
                        "must be a whole number: unset it, or run under torchrun")
    return int(value)


def check_writable(run_dir: Path) -> None:
    """Refuse a run folder that cannot be made, before any data or model is built."""
    existing = next(p for p in (run_dir, *run_dir.parents) if os.path.lexists(p))
    if not existing.exists():  # a symbolic link to nothing: mkdir says only "File exists"
        raise UserError("cannot write the run folder: a symbolic link on its path leads to a folder that does not "
                        "exist; create that folder or choose another run_dir=",
                        details=[f"run folder: {run_dir}", f"{existing} -> {os.readlink(existing)}"])
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "is not a folder" if not existing.is_dir() else "is not writable"
        raise UserError(f"cannot write the run folder {run_dir}: {existing} {what}; choose another run_dir=")


def slurm_run_dir(root: Path) -> Path | None:
    """``root/slurm-<job id>`` (``<array job>_<task>`` for an array task) in a SLURM batch job as
    Lightning detects one (``SLURM_NTASKS`` set, job name not bash/interactive), else None."""
    from lightning.fabric.plugins.environments import SLURMEnvironment  # imported when used: lightning

    if not os.environ.get("SLURM_JOB_ID") or not SLURMEnvironment.detect():
        return None
    array = os.environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{array}_{os.environ['SLURM_ARRAY_TASK_ID']}" if array else os.environ["SLURM_JOB_ID"]
    return root / f"slurm-{job}"


def slurm_resume_checkpoint(run_dir: Path) -> str | None:
    """A requeued SLURM job resumes from the newest of Lightning's ``hpc_ckpt_<n>.ckpt`` (saved on
    the requeue signal, SIGUSR1) and the zoo's ``checkpoints/last.ckpt`` (saved on SIGTERM, which
    SLURM sends when it stops the job, and at every epoch end); None on a first start."""
    found = [*run_dir.glob("hpc_ckpt_*.ckpt"), run_dir / "checkpoints" / "last.ckpt"]
    found = [p for p in found if p.is_file()]
    return str(max(found, key=lambda p: p.stat().st_mtime_ns)) if found else None


def read_resume_checkpoint(ckpt: str, cfg: dict) -> dict:
    """The checkpoint a run resumes from, read (metadata and shapes only) before any data is built: it must
    exist, be a zoo checkpoint of the model the recipe trains, and, when the user named it (ckpt_path=),
    leave something to train under trainer.max_epochs / max_steps (else Lightning stops at once and exits 0)."""
    path = Path(ckpt)
    if not path.exists() and not path.suffix and os.sep not in ckpt:  # best, LAST, vae-digits
        entry = (f" ({ckpt} is a pretrained entry: use it with python -m zoo.evaluate / zoo.predict {ckpt})"
                 if ckpt in pretrained_cards() else "")
        raise UserError(f"ckpt_path={ckpt}: no such checkpoint file; ckpt_path takes 'last' (the latest run of "
                        f"this recipe under run_dir) or the path of a .ckpt file{entry}")
    saved = read_checkpoint(ckpt, mmap=True)  # no tensor is read
    model_name = cfg["model"]["name"]
    if saved["zoo"]["model"] != model_name:
        raise UserError(f"checkpoint {ckpt} is a '{saved['zoo']['model']}' model, but the recipe trains "
                        f"'{model_name}'")
    if cfg["ckpt_path"] is not None and not cfg["trainer"].get("fast_dev_run"):  # not a SLURM requeue's own
        check_left_to_train(ckpt, saved, cfg["trainer"])
    return saved


def check_left_to_train(ckpt: str, saved: dict, trainer: dict) -> None:
    """Lightning's own stopping rule (its fit loop's ``done``) applied to the checkpoint's counters."""
    progress = saved.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {}).get("current", {})
    epochs, steps = progress.get("processed"), saved.get("global_step")
    if not isinstance(epochs, int) or not isinstance(steps, int):
        return
    max_steps, max_epochs = trainer.get("max_steps", -1), trainer.get("max_epochs")
    if max_epochs is None:  # Lightning's default
        max_epochs = 1000 if max_steps == -1 and trainer.get("max_time") is None else -1
    for key, limit, done in (("max_steps", max_steps, steps), ("max_epochs", max_epochs, epochs)):
        if limit != -1 and done >= limit:
            raise UserError(f"the checkpoint has trained {epochs} epoch(s), {steps} step(s): trainer.{key}={limit} "
                            f"leaves nothing more to train. Raise trainer.{key} to go on training, or evaluate it "
                            "(the command below)", details=[f"checkpoint: {ckpt}", f"python -m zoo.evaluate {ckpt}"])


def changed_options(saved: dict, cfg: dict | None) -> str:
    """The model and data options that differ between a checkpoint's run and this command, as
    '; this command differs in model.meta_sgd: True there, False here', or '' (none, or unknown)."""
    then = (saved.get("zoo") or {}).get("config") if isinstance(saved.get("zoo"), dict) else None
    if not isinstance(then, dict) or cfg is None:
        return ""
    diffs = []
    for section in ("model", "data"):
        old, new = (flatten(c.get(section) or {}, f"{section}.") for c in (then, cfg))
        diffs += [f"{k}: {old.get(k, '(unset)')} there, {new.get(k, '(unset)')} here"
                  for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return f"; this command differs in {'; '.join(diffs[:4])}{'; ...' if len(diffs) > 4 else ''}" if diffs else ""
