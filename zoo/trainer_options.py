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
import re
import warnings
from pathlib import Path

from zoo.callbacks.named import resolve
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


# ---- validation, test and the direction of the metrics watched ------------------------------------------------
def _is_zero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def validation_off(trainer: dict) -> tuple[str, str] | None:
    """(why, fix) when the ``trainer:`` section turns validation off for the whole run, else None."""
    limit = trainer.get("limit_val_batches")
    if _is_zero(limit):
        return (f"trainer.limit_val_batches={limit} turns validation off",
                "leave trainer.limit_val_batches out (or give it a number of batches or a fraction above 0)")
    every, epochs = trainer.get("check_val_every_n_epoch"), trainer.get("max_epochs")
    if isinstance(every, int) and isinstance(epochs, int) and 0 < epochs < every:
        return (f"trainer.check_val_every_n_epoch={every} with trainer.max_epochs={epochs} never validates",
                f"lower trainer.check_val_every_n_epoch to {epochs} or less")
    return None


MIN_WORDS, MAX_WORDS = ("loss", "nll"), ("acc", "accuracy", "bleu", "bleu1", "bleu2", "bleu3", "bleu4")


def metric_direction(name: str) -> str | None:
    """'min' or 'max' where a metric's name makes its direction certain: its first or last word (split at
    '/' and '_') a loss or a negative log-likelihood (val/loss, val/nll_oracle, test/iwae_nll), or an accuracy
    or a BLEU score (val/acc, val/bleu4). None for any other name (val/spearman, val/return, ...)."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.rsplit("/", 1)[-1].lower()) if w]
    ends = {words[0], words[-1]} if words else set()
    low = any(w in MIN_WORDS or w.endswith("loss") for w in ends)
    high = any(w in MAX_WORDS for w in ends)
    return "min" if low and not high else "max" if high and not low else None


def _wrong_direction(monitor: str, mode: str) -> str | None:
    """How ``monitor`` is judged when ``mode`` contradicts its name (``metric_direction``), else None."""
    certain = metric_direction(monitor)
    if certain is None or certain == mode:
        return None
    return "a loss (lower is better)" if certain == "min" else "a score where higher is better"


def early_stopping_entries(cfg: dict, model_monitor: tuple[str, str] | None) -> list[tuple[str, str | None]]:
    """(monitor, mode) of each early-stopping callback of the run, as it will watch them (mode None: not known)."""
    from lightning.pytorch.callbacks import EarlyStopping  # imported when used: lightning


    found = []
    for item in cfg.get("callbacks") or []:
        _, cls, spec = resolve(item)
        if not (isinstance(cls, type) and issubclass(cls, EarlyStopping)):
            continue
        if spec.get("monitor"):
            found.append((spec["monitor"], spec.get("mode") or "min"))  # Lightning's default mode
        elif model_monitor is not None:  # zoo's early_stopping: the model's own metric and mode
            found.append((model_monitor[0], spec.get("mode") or model_monitor[1]))
    return found


def check_validation_and_test(cfg: dict, model_monitor: tuple[str, str] | None) -> None:
    """Settings that leave the run's test or validation empty where the run relies on them, and a best
    checkpoint or early stopping judged in the wrong direction (a loss maximised), before anything is built.
    ``model_monitor``: the model's own (monitor, mode), None where not known before it is built."""
    trainer, ck = cfg["trainer"], cfg["checkpoint"]
    limit = trainer.get("limit_test_batches")
    if cfg["test_after_fit"] and _is_zero(limit):  # the run trained, tested nothing and wrote metrics.json {}
        raise UserError(f"trainer.limit_test_batches={limit} tests nothing, so metrics.json would be empty: to train "
                        "without testing, set test_after_fit=false (and test later: python -m zoo.evaluate "
                        "RUN/checkpoints/last.ckpt); to test on part of the test set, give a number of batches or a "
                        "fraction above 0 (e.g. 0.25)")
    stoppers = early_stopping_entries(cfg, model_monitor)
    off = validation_off(trainer)
    if off is not None:
        why, fix = off
        for monitor, _ in stoppers:
            if monitor.startswith("val/"):  # Lightning's "Early stopping conditioned on metric ... not available"
                raise UserError(f"callback 'early_stopping' watches {monitor}, a validation metric, but {why}, so it "
                                f"could never stop the run: {fix}, or drop the callback")
        if ck["monitor"] and ck["monitor"].startswith("val/"):  # no best checkpoint, a warning of Lightning's
            raise UserError(f"checkpoint.monitor={ck['monitor']} chooses the best checkpoint by a validation metric, "
                            f"but {why}: {fix}, or leave checkpoint.monitor out (last.ckpt is saved either way)")
    own_monitor, own_mode = model_monitor or (None, None)
    monitor = ck["monitor"] or own_monitor
    mode = ck["mode"] or own_mode
    what = monitor and mode and _wrong_direction(monitor, mode)
    if what:  # the "best" checkpoint would be the worst
        right = "min" if mode == "max" else "max"
        if ck["mode"]:
            most = "highest" if mode == "max" else "lowest"
            own = f" (or leave it out: the model's own is {own_mode})" if monitor == own_monitor else ""
            raise UserError(f"checkpoint.mode={mode} keeps the checkpoint with the {most} {monitor}, but {monitor} is "
                            f"{what}, so the 'best' checkpoint would be the worst: use checkpoint.mode={right}{own}")
        raise UserError(f"checkpoint.monitor={monitor} is {what}, but the best checkpoint is chosen by the model's "
                        f"mode, {mode} (for its own metric {own_monitor}), so the 'best' would be the worst: add "
                        f"checkpoint.mode={right}")
    for monitor, mode in stoppers:
        what = mode and _wrong_direction(monitor, mode)
        if what:  # it stopped the run once the loss stopped rising
            right = "min" if mode == "max" else "max"
            raise UserError(f"callback 'early_stopping' watches {monitor}, {what}, with mode {mode} (it would stop "
                            f"the run when {monitor} stops {'rising' if mode == 'max' else 'falling'}): give it "
                            f"mode: {right}, e.g. callbacks=[{{name: early_stopping, monitor: {monitor}, "
                            f"mode: {right}}}]")
