"""The rules of the metrics a run watches: validation on or off, test on or off, and a best checkpoint or early
stopping judged in the metric's direction (a loss is minimised, an accuracy or BLEU maximised). Checked
before anything runs (``zoo.config.load_config``)."""

from __future__ import annotations

import re

from zoo.callbacks.named import is_early_stopping
from zoo.errors import UserError


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


def early_stopping_entries(callbacks: list[tuple[str, str, dict]],
                           model_monitor: tuple[str, str] | None) -> list[tuple[str, str | None]]:
    """(monitor, mode) of each early-stopping callback of the run (``check_callbacks``' entries), as it will watch
    them (mode None: not known)."""
    found = []
    for name, target, spec in callbacks:
        if not is_early_stopping(name, target):
            continue
        if spec.get("monitor"):
            found.append((spec["monitor"], spec.get("mode") or "min"))  # Lightning's default mode
        elif model_monitor is not None:  # zoo's early_stopping: the model's own metric and mode
            found.append((model_monitor[0], spec.get("mode") or model_monitor[1]))
    return found


def check_validation_and_test(cfg: dict, model_monitor: tuple[str, str] | None,
                              callbacks: list[tuple[str, str, dict]]) -> None:
    """Settings that leave the run's test or validation empty where the run relies on them, and a best
    checkpoint or early stopping judged in the wrong direction (a loss maximised), before anything is built.
    ``model_monitor``: the model's own (monitor, mode), None where not known before it is built; ``callbacks``:
    ``check_callbacks``' entries."""
    trainer, ck = cfg["trainer"], cfg["checkpoint"]
    limit = trainer.get("limit_test_batches")
    if cfg["test_after_fit"] and _is_zero(limit):
        raise UserError(f"trainer.limit_test_batches={limit} tests nothing, so metrics.json would be empty: to train "
                        "without testing, set test_after_fit=false (and test later: python -m zoo.evaluate "
                        "RUN/checkpoints/last.ckpt); to test on part of the test set, give a number of batches or a "
                        "fraction above 0 (e.g. 0.25)")
    stoppers = early_stopping_entries(callbacks, model_monitor)
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
        if what:
            right = "min" if mode == "max" else "max"
            raise UserError(f"callback 'early_stopping' watches {monitor}, {what}, with mode {mode} (it would stop "
                            f"the run when {monitor} stops {'rising' if mode == 'max' else 'falling'}): give it "
                            f"mode: {right}, e.g. callbacks=[{{name: early_stopping, monitor: {monitor}, "
                            f"mode: {right}}}]")
