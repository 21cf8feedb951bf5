"""The ``trainer:`` section of a run: lightning.Trainer's arguments, checked before anything is built.

``check_trainer_options`` checks keys, types and ranges against Lightning's signature (read from its
source, without importing it) and the zoo's own rules, when the recipe is loaded; Lightning's own checks
(an accelerator this machine lacks) run when the run's one Trainer is built (``zoo.runner.make_trainer``).
"""

from __future__ import annotations

import datetime
import os

from zoo.errors import UserError
from zoo.schema import signature_types, validate_call
from zoo.source_signature import init_signature

# Ranges of lightning.Trainer's numeric arguments where they differ from the zoo's ">= 0" rule: -1 sentinels (all
# devices, no limit, the whole validation set) and counts >= 1 (Lightning checks some only inside fit, if at all)
TRAINER_RANGES = {
    "devices": {"ge": -1}, "num_sanity_val_steps": {"ge": -1},
    "max_epochs": {"ge": -1, "ne": 0, "why": "it would train nothing; -1 trains until max_steps"},
    "max_steps": {"ge": -1, "ne": 0, "why": "it would train nothing; -1 means no step limit"},
    "limit_train_batches": {"gt": 0}, "num_nodes": {"gt": 0}, "accumulate_grad_batches": {"gt": 0},
    "check_val_every_n_epoch": {"gt": 0}, "val_check_interval": {"gt": 0},
}

TRAINER = "lightning.pytorch.trainer.trainer:Trainer"
RESERVED_TRAINER_KEYS = ("logger", "callbacks", "plugins", "default_root_dir", "enable_checkpointing")


def trainer_signature() -> object:
    """lightning.Trainer's ``__init__``, read from its installed source (``zoo.source_signature``), else the
    class itself (a Lightning laid out otherwise: imported)."""
    found = init_signature(TRAINER)
    if found is not None:
        return found
    import lightning as L  # imported when used: lightning (its source is not where Lightning 2 keeps it)

    return L.Trainer.__init__


def trainer_arguments() -> list[str]:
    """The keyword arguments of lightning.Trainer a recipe may set under ``trainer:``."""
    params, _, _ = signature_types(trainer_signature())
    return [k for k, p in params.items() if k not in (*RESERVED_TRAINER_KEYS, "self")
            and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


def check_trainer_options(options: dict, where: str) -> dict:
    """The ``trainer:`` section, checked against lightning.Trainer's signature (keys and types, read from its
    source: no torch imported) and ``TRAINER_RANGES``; Lightning's own checks run when the run's Trainer is built."""
    if not isinstance(options, dict):
        raise UserError(f"'trainer' in {where} must be a mapping of lightning.Trainer arguments")
    for key in options:
        if key in RESERVED_TRAINER_KEYS:
            raise UserError(f"'trainer.{key}' is set by the zoo; use the top-level 'logger', "
                            "'callbacks', 'checkpoint' or 'run_dir' keys instead")
    options = validate_call(trainer_signature(), options, f"{where} [trainer] (lightning.Trainer arguments)",
                            what="key", ranges=TRAINER_RANGES)
    _check_cpu_processes(options)
    _check_min_below_max(options)
    _check_strategy(options)
    _check_max_time(options)
    return options


def _check_max_time(options: dict) -> None:
    """A time limit of zero (or less): Lightning stopped the run as it started and exited 0, as max_epochs=0
    would have (refused by TRAINER_RANGES)."""
    value = options.get("max_time")
    try:
        if isinstance(value, str):  # Lightning's DD:HH:MM:SS
            days, hours, minutes, seconds = (int(part) for part in value.split(":"))
            value = datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
        elif isinstance(value, dict):
            value = datetime.timedelta(**value)
    except (ValueError, TypeError):  # not a duration: Lightning's own message says so
        return
    if isinstance(value, datetime.timedelta) and value.total_seconds() <= 0:
        raise UserError(f"trainer.max_time={options['max_time']} would train nothing (the run stops as it starts): "
                        "give a positive duration, DD:HH:MM:SS (e.g. 00:12:00:00), or leave it out")


def _check_strategy(options: dict) -> None:
    """Lightning's spawn strategies pickle the trainer into each new process, and a zoo run (its callbacks'
    locks and streams) cannot be pickled: a traceback once fit started, after the run folder was written."""
    strategy = options.get("strategy")
    if isinstance(strategy, str) and "spawn" in strategy:
        raise UserError(f"trainer.strategy={strategy} is not supported: it starts its processes by pickling the "
                        "trainer, which the zoo's callbacks and loggers cannot be; use trainer.strategy=ddp "
                        "(each process starts as a fresh command)")


def _check_min_below_max(options: dict) -> None:
    """Lightning stops at max_epochs / max_steps whatever min_epochs / min_steps ask for, silently."""
    for unit in ("epochs", "steps"):
        low, high = options.get(f"min_{unit}"), options.get(f"max_{unit}")
        if low is not None and high is not None and 0 <= high < low:
            raise UserError(f"trainer.min_{unit}={low} is above trainer.max_{unit}={high}, where training stops: "
                            f"raise trainer.max_{unit} or lower trainer.min_{unit}")


def _check_cpu_processes(options: dict) -> None:
    """Training on the CPU with more processes than cores: Lightning starts them all (64 gloo
    processes on 2 cores hang in their set-up), so it is refused here."""
    devices, accelerator = options.get("devices"), options.get("accelerator", "auto")
    if not isinstance(devices, int) or isinstance(devices, bool) or devices <= 1 or accelerator not in ("cpu", "auto"):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if devices <= cores:
        return
    if accelerator == "auto":  # then the CPU only where no GPU is found: torch asked only here
        import torch  # imported when used: torch

        if torch.cuda.is_available() or torch.backends.mps.is_available():
            return
    raise UserError(f"trainer.devices={devices} starts {devices} training processes on the CPU, but this "
                    f"machine gives this run {cores} core(s): use trainer.devices={cores} or fewer "
                    "(or a GPU: trainer.accelerator=gpu)")
