"""The ``trainer:`` section of a run: lightning.Trainer's arguments, checked before anything is built.

``check_trainer_options`` checks keys, types and ranges against Lightning's signature and the zoo's
own rules (when the recipe is loaded); ``check_trainer_settings`` then has Lightning itself check
them on a Trainer made and dropped, before any data is built or cached.
"""

from __future__ import annotations

import ast
import datetime
import functools
import importlib.util
import os
import warnings
from pathlib import Path

from zoo.cli import build_trainer
from zoo.errors import UserError
from zoo.options import unknown_key, validate_call
from zoo.tracking import HeldMessages, console_callbacks

# Ranges of lightning.Trainer's numeric arguments where they differ from the zoo's ">= 0" rule:
# -1 sentinels (all devices, no limit, the whole validation set) and counts that must be >= 1.
# Lightning checks some of these itself, but only once it runs (accumulate_grad_batches=0 and
# check_val_every_n_epoch=0 crashed inside fit with a ZeroDivisionError).
TRAINER_RANGES = {
    "devices": {"ge": -1}, "num_sanity_val_steps": {"ge": -1},
    "max_epochs": {"ge": -1, "ne": 0, "why": "it would train nothing; -1 trains until max_steps"},
    "max_steps": {"ge": -1, "ne": 0, "why": "it would train nothing; -1 means no step limit"},
    "limit_train_batches": {"gt": 0}, "num_nodes": {"gt": 0}, "accumulate_grad_batches": {"gt": 0},
    "check_val_every_n_epoch": {"gt": 0}, "val_check_interval": {"gt": 0},
}

RESERVED_TRAINER_KEYS = ("logger", "callbacks", "plugins", "default_root_dir", "enable_checkpointing")


@functools.lru_cache(maxsize=1)  # 40 ms to parse; the installed Lightning does not change within a process
def trainer_keys_from_source() -> tuple[str, ...] | None:
    """lightning.Trainer's arguments, in order, read from its installed source without importing it (torch and
    Lightning take ~4 s to import), so that a mistyped trainer key is refused at once; None where the source
    is not where Lightning 2 keeps it, or the signature takes **kwargs (then only the full check runs)."""
    try:
        spec = importlib.util.find_spec("lightning")  # finds the package without importing it
        if spec is None or spec.origin is None:
            return None
        tree = ast.parse((Path(spec.origin).parent / "pytorch" / "trainer" / "trainer.py").read_text("utf-8"))
    except (OSError, SyntaxError, ValueError, ImportError):
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Trainer":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__" and item.args.kwarg is None:
                    args = item.args.posonlyargs + item.args.args + item.args.kwonlyargs
                    return tuple(a.arg for a in args if a.arg != "self")
    return None


def check_trainer_keys_early(options: object, where: str) -> None:
    """An unknown ``trainer:`` key, with ``check_trainer_options``'s message, before torch is imported."""
    if not isinstance(options, dict):
        return
    valid = trainer_keys_from_source()
    if valid is None:
        return
    for key in options:
        if key not in valid and key not in RESERVED_TRAINER_KEYS:
            raise unknown_key(key, list(valid), f"{where} [trainer] (lightning.Trainer arguments)", "key")


def check_trainer_options(options: dict, where: str) -> dict:
    """The ``trainer:`` section, checked against lightning.Trainer's signature (keys and types) and
    ``TRAINER_RANGES`` before Lightning sees it."""
    import lightning as L  # imported when used: lightning

    if not isinstance(options, dict):
        raise UserError(f"'trainer' in {where} must be a mapping of lightning.Trainer arguments")
    for key in options:
        if key in RESERVED_TRAINER_KEYS:
            raise UserError(f"'trainer.{key}' is set by the zoo; use the top-level 'logger', "
                            "'callbacks', 'checkpoint' or 'run_dir' keys instead")
    options = validate_call(L.Trainer.__init__, options, f"{where} [trainer] (lightning.Trainer arguments)",
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
    import torch  # imported when used: torch

    devices, accelerator = options.get("devices"), options.get("accelerator", "auto")
    if not isinstance(devices, int) or isinstance(devices, bool) or devices <= 1:
        return
    accelerators_found = torch.cuda.is_available() or torch.backends.mps.is_available()
    if accelerator != "cpu" and (accelerator != "auto" or accelerators_found):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if devices > cores:
        raise UserError(f"trainer.devices={devices} starts {devices} training processes on the CPU, but this "
                        f"machine gives this run {cores} core(s): use trainer.devices={cores} or fewer "
                        "(or a GPU: trainer.accelerator=gpu)")


def check_trainer_settings(cfg: dict) -> None:
    """Lightning's own checks of the ``trainer:`` section (an accelerator this machine lacks, a strategy name
    that does not exist, trainer.devices=[5]) before any data is built or cached: they ran only once the run's
    Trainer was made, after the datamodule (a corpus encoded, oracle samples drawn). A Trainer made and
    dropped, which writes nothing; what it would print or warn is dropped too (the run's own Trainer says it)."""
    import lightning as L  # imported when used: lightning


    plain = console_callbacks(cfg["trainer"], [])  # Lightning's plain summary and bar, as in the run (not rich's)
    held = HeldMessages().start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_trainer(lambda: L.Trainer(logger=False, enable_checkpointing=False, callbacks=plain,
                                            **cfg["trainer"]), f"trainer settings {cfg['trainer']}")
    finally:
        held.discard()
