"""The run behind ``python -m zoo.train``, once its recipe is checked (``zoo.config.load_config``, no torch):
the run folder, the one lightning.Trainer (built before any data, so that a setting Lightning refuses costs
nothing), the datamodule and the model, fit, test and metrics.json. ``zoo.train`` is the torch-free front
(command line, recipe check, print_config); importing this module imports torch and Lightning.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from torch.nn.parameter import is_lazy

from zoo.callbacks.checkpoints import (
    AtomicCheckpointIO,
    EpochCheckpoint,
    FinalCheckpoint,
    LastCheckpoint,
    RNGState,
    SignalCheckpoint,
)
from zoo.callbacks.guards import MonitorCheck, NonFiniteLossGuard, as_divergence
from zoo.callbacks.hooks import QuietProfiler, skip_empty_batch_hooks, skip_empty_module_hooks
from zoo.callbacks.named import build_callbacks
from zoo.callbacks.run_notes import Notes, ReleaseHeldMessages, RunInfo
from zoo.callbacks.runlog import end_summary, run_console
from zoo.callbacks.train_logs import TrainLogs
from zoo.cli import build_trainer, ctrl_c_in_lightning, user_error_in_fit
from zoo.config import LoadedRun, compile_options, to_yaml
from zoo.core.compiling import compile_nets
from zoo.core.files import remove_empty
from zoo.core.memory import AllocationGuard, check_step_fits
from zoo.core.nvml import skip_failing_nvml_check
from zoo.errors import UserError
from zoo.monitoring import validation_off
from zoo.overrides import repeated_overrides
from zoo.record import RunRecord, run_record
from zoo.registry import DATAMODULES, MODELS
from zoo.run_folder import changed_options, check_writable, claim_run_dir, read_resume_checkpoint, resolve_run_dir
from zoo.schema import thaw
from zoo.tracking import HeldMessages, console_callbacks, make_loggers, quiet_lightning, set_float32_precision


@dataclass
class RunResult:
    run_dir: Path  # the run folder
    model: Any  # the trained LightningModule
    test_metrics: dict = field(default_factory=dict)  # {"test/...": float}
    interrupted: bool = False  # stopped by SIGTERM/SIGINT (last.ckpt saved)
    rank_zero: bool = True  # False in the other processes of a multi-process run (they print nothing)
    untested: str | None = None  # why the run was not tested (test_after_fit=false, ...), else None
    summary: list[str] = field(default_factory=list)  # the end summary's lines (time, steps, best checkpoint, ...)


@contextlib.contextmanager
def removed_if_unsaved(run_dir: Path, made: list[Path]) -> Iterator[None]:
    """The folders ``claim_run_dir`` made, removed again when what runs inside fails (a user's mistake,
    Ctrl-C, a divergence) before any checkpoint was written: a refused run leaves nothing behind."""
    try:
        yield
    except BaseException:
        if made and rank_zero_only.rank == 0 and not any(run_dir.rglob("*.ckpt")):
            shutil.rmtree(run_dir, ignore_errors=True)
            remove_empty(made[1:])  # runs/<recipe>/ (and runs/) when this run made them
        raise


def check_resumable(ckpt: str, saved: dict, model: Any, cfg: dict | None = None) -> None:
    """A checkpoint to resume must fit the model the recipe builds: a size option changed since
    (model.latent_dim=3 on a run trained with 8) fails inside fit otherwise, after the run folder is
    written. The message names the options that differ from the checkpoint's run (``cfg``: this one's)."""
    own = model.state_dict()
    fix = "resume with the model options the run was trained with (its config.yaml)"
    changed = changed_options(saved, cfg)
    details = [f"checkpoint: {ckpt}", *([changed.removeprefix("; ")] if changed else [])]
    for key, value in saved["state_dict"].items():
        # a lazy parameter (a layer of the user's own sized at its first batch) has no shape yet: loading the
        # checkpoint gives it the saved one (torch's LazyModuleMixin); the zoo's models size theirs when built
        if key in own and not is_lazy(own[key]) and tuple(value.shape) != tuple(own[key].shape):
            raise UserError(f"the checkpoint does not fit the model this recipe builds: '{key}' has shape "
                            f"{tuple(value.shape)} there and {tuple(own[key].shape)} here; {fix}", details=details)
    missing = sorted(set(own) - set(saved["state_dict"]))  # e.g. another estimator: its baseline's state
    unexpected = sorted(set(saved["state_dict"]) - set(own))
    if missing or unexpected:
        parts = [f"{name} {', '.join(repr(k) for k in keys[:3])}{' ...' if len(keys) > 3 else ''}"
                 for name, keys in (("it lacks", missing), ("it has no place here for", unexpected)) if keys]
        raise UserError(f"the checkpoint does not fit the model this recipe builds (an estimator or a model part "
                        f"changed since): {fix}", details=[*details, *parts])
    if changed and rank_zero_only.rank == 0:
        print(f"note: resuming {ckpt}, whose run had other options{changed.replace('; this command differs in', ':')}. "
              "The new values are used where the model reads them; the optimizer's state (its learning rate "
              "included) and the place in the epoch come from the checkpoint", file=sys.stderr)


def build(run: LoadedRun) -> tuple[Any, Any]:
    """Datamodule and model of a loaded run (``zoo.config.load_config``), from the options objects it validated."""
    datamodule = DATAMODULES.get(run["data"]["name"])(run.data_options)
    datamodule.prepare_data()
    datamodule.setup("fit")
    with AllocationGuard():  # weights larger than the machine: one line, before they are allocated
        model = MODELS.get(run["model"]["name"])(run.model_options, datamodule.info())
    return datamodule, model


def make_trainer(run: LoadedRun, run_dir: Path, model: Any, extra_callbacks: list, resumed: bool = False,
                 notes: list[str] | None = None) -> Any:
    """The lightning.Trainer of a run, built once, before any data: a setting Lightning refuses is a UserError
    before a corpus is generated or a file downloaded. ``model``: the model's class (its monitor is the one
    the loaded run states, ``run.monitor``, else the class's). ``notes``: lines about the run's settings,
    printed (``note: ...``) once training starts."""
    return build_trainer(lambda: _make_trainer(run, run_dir, model, extra_callbacks, resumed, list(notes or [])),
                         "trainer settings", [f"trainer: {run['trainer']}"])


def _make_trainer(run: LoadedRun, run_dir: Path, model: Any, extra_callbacks: list, resumed: bool,
                  notes: list[str]) -> Any:
    cfg = run.settings
    ck = cfg["checkpoint"]
    ckpt_dir = run_dir / "checkpoints"
    # "best" by the model's metric, and "last" = the latest state (a separate callback: with a
    # monitor, Lightning 2.6 refreshes save_last only when a new best is saved).
    own = run.monitor  # None: not stated before the model is built; the class's then
    monitor = ck["monitor"] or (own[0] if own else model.monitor)
    best = EpochCheckpoint(dirpath=ckpt_dir, filename="best-{epoch}-{step}", monitor=monitor,
                           mode=ck["mode"] or (own[1] if own else model.monitor_mode), save_top_k=ck["save_top_k"],
                           every_n_epochs=ck["every_n_epochs"], auto_insert_metric_name=False)
    # validation turned off (trainer.limit_val_batches=0): no best by a val/ metric (Lightning would warn that it
    # "could not find the monitored key" at each epoch end), said once; a val/ checkpoint.monitor is refused
    off = validation_off(cfg["trainer"]) if monitor.startswith("val/") else None
    last = LastCheckpoint(dirpath=ckpt_dir, filename="last", monitor=None, save_top_k=1, enable_version_counter=False,
                           every_n_epochs=None if ck["every_n_train_steps"] else ck["every_n_epochs"],
                           every_n_train_steps=ck["every_n_train_steps"], save_on_train_epoch_end=True)
    if off:
        notes.append(f"{off[0]}, so no best checkpoint is chosen (by {monitor}); last.ckpt is saved as usual")
    # in order (Lightning runs ModelCheckpoints last): the final save before an averaging callback (ema, swa)
    # copies the average into the weights at the end; the signal's save after its update and its swap-back
    callbacks = [MonitorCheck(monitor, chooses_best=off is None), *([best] if off is None else []), last,
                 FinalCheckpoint(last), NonFiniteLossGuard(), RNGState(), *extra_callbacks,
                 *build_callbacks(thaw(cfg["callbacks"])), SignalCheckpoint(last),
                 *([Notes(notes)] if notes else [])]
    trainer_opts = thaw(cfg["trainer"])  # a plain copy: the strategy may change below
    callbacks[:0] = run_console(trainer_opts, callbacks, run_dir)  # first: the run folder's line before Lightning's
    callbacks += console_callbacks(trainer_opts, callbacks)
    callbacks.append(TrainLogs())  # last: after any callback that logs a step value in on_train_batch_end
    if trainer_opts.get("profiler") is None:  # none named by trainer.profiler=: Lightning's default, lighter
        trainer_opts["profiler"] = QuietProfiler()
    if trainer_opts.get("strategy") == "ddp" and getattr(model, "ddp_find_unused_parameters", False):
        trainer_opts["strategy"] = "ddp_find_unused_parameters_true"  # e.g. a GAN: each step trains one net
    # its loggers come once the data and the model are built (attach_loggers): a W&B run starts online only
    # for a run whose data and model were accepted
    trainer = L.Trainer(default_root_dir=str(run_dir), logger=False, callbacks=callbacks,
                        plugins=[AtomicCheckpointIO()], **trainer_opts)
    skip_empty_batch_hooks(trainer.callbacks)  # Lightning's own among them: ~70 empty calls a step less
    return trainer


def attach_loggers(trainer: Any, cfg: dict, run_dir: Path, resumed: bool) -> None:
    """The run's loggers (``zoo.tracking.make_loggers``), given to its Trainer once the data and the model are
    built, just before fit."""
    trainer.loggers = make_loggers(cfg, run_dir, resumed)


def signal_callback(trainer: Any) -> Any:
    """The run's ``SignalCheckpoint`` (make_trainer adds one to every run)."""
    return next(c for c in trainer.callbacks if type(c).__name__ == "SignalCheckpoint")


def fit(trainer: Any, model: Any, datamodule: Any, ckpt: str | None, run_dir: Path, command: str, cfg: dict) -> None:
    """``trainer.fit`` in the run folder, its failures as the zoo's messages (a run that fails before its
    first checkpoint leaves no folder: ``removed_if_unsaved`` around the whole of ``train``)."""
    if trainer.is_global_zero:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            name = "config.yaml"  # a resumed run keeps the first one and adds its own beside it
            if ckpt is not None and (run_dir / name).is_file():
                name = f"config.resume-{1 + len(list(run_dir.glob('config.resume-*.yaml')))}.yaml"
            (run_dir / name).write_text(f"# {command}\n" + to_yaml(cfg))
            next(c for c in trainer.callbacks if isinstance(c, RunRecord)).path = run_dir / name.replace(
                "config", "run", 1).replace(".yaml", ".json")  # run.json, run.resume-N.json: written as fit starts
        except OSError as err:
            raise UserError(f"cannot write the run folder {run_dir}: {err.strerror or err}; "
                            "choose another run_dir=") from None
    distributed = trainer.world_size > 1
    if distributed:  # Lightning re-launches this script for the other ranks; they must share the folder
        os.environ["ZOO_RUN_DIR"] = str(run_dir)
    try:
        with ctrl_c_in_lightning(trainer, signal_callback(trainer).kept):
            trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt)
    except Exception as err:
        diverged = as_divergence(err, trainer)
        if diverged is not None and diverged is not err:
            err = diverged
        err.run_dir = run_dir  # for the message: where the last good checkpoint is, if any
        user = user_error_in_fit(err)
        if user is None and diverged is None:
            raise
        if diverged is not None:
            raise err from None
        kept = sorted((run_dir / "checkpoints").glob("last*.ckpt")) if run_dir.is_dir() else []
        if kept:  # e.g. the disk filled up at a later checkpoint
            user = UserError(f"{user.message} (the last good checkpoint is kept, below: resume with ckpt_path=last "
                             "once fixed)", details=[*user.details, f"kept: {kept[-1]}"])
        raise user from None
    finally:
        if distributed and trainer.is_global_zero:
            os.environ.pop("ZOO_RUN_DIR", None)


def run_training(run: LoadedRun, argv: list[str], given: list[str]) -> RunResult:
    """The run of a loaded recipe (``zoo.config.load_config``): its folder, the one Trainer, the data and the
    model, fit and test. ``argv``: the command line (written into the run), ``given``: its overrides (notes)."""
    cfg = run.settings  # what the run folder, the loggers, config.yaml and the resume checks read
    run_dir, ckpt = resolve_run_dir(cfg)
    check_writable(run_dir)
    run_dir, made = claim_run_dir(run_dir, cfg)  # the folders this run makes, removed again if it fails unsaved
    with removed_if_unsaved(run_dir, made):
        if cfg["threads"]:
            torch.set_num_threads(cfg["threads"])
        skip_failing_nvml_check()  # no NVML probe at each optimizer step where NVML finds no GPU
        if cfg["matmul_precision"]:
            set_float32_precision(cfg["matmul_precision"])
        L.seed_everything(cfg["seed"], workers=True, verbose=False)
        saved = read_resume_checkpoint(ckpt, cfg) if ckpt is not None else None
        # before the first loader: OOD's CombinedLoader would warn of LeafSpec ahead of any message
        quiet_lightning(resumed=run_dir / "checkpoints" if ckpt is not None else None)
        command = "python -m zoo.train " + shlex.join(argv)
        plain = thaw(cfg)  # in every checkpoint (loaded with weights_only=True) and sent to the loggers
        record = run_record(run.model_options)  # code, versions, machine, estimator: run.json
        info = {"format": 1, "model": cfg["model"]["name"], "data": plain["data"], "recipe": cfg["recipe"],
                "command": command, "config": plain, "record": record}
        # Lightning prints its start-up lines (devices, model summary) once training starts: a mistake found before
        # then (in the data, or inside fit: a validation interval longer than the epoch) is the only line
        with HeldMessages() as held:
            # the run's one Trainer, before any data is built or cached: Lightning's own checks of the trainer:
            # section (an accelerator this machine lacks, a strategy name that does not exist) come first
            trainer = make_trainer(run, run_dir, MODELS.get(cfg["model"]["name"]),
                                   [RunInfo(info), RunRecord(record), ReleaseHeldMessages(held)],
                                   resumed=ckpt is not None, notes=repeated_overrides(given))
            datamodule, model = build(run)
            compiled = compile_options(thaw(cfg["compile"]))
            if compiled is not None:  # in place: the state_dict keys stay the uncompiled model's
                compile_nets(model, MODELS.spec(cfg["model"]["name"]).compiled, compiled)
            # the training loader's own checks (a batch larger than the data) before Lightning prints its device
            # lines and model summary: a mistake found there is then the only line on the screen
            datamodule.train_dataloader()
            check_step_fits(model, datamodule, str(cfg["trainer"].get("accelerator", "auto")))  # MAML's meta-batch
            if ckpt is not None:
                check_resumable(ckpt, saved, model, cfg)
            elif hasattr(model, "before_fit"):  # a fresh run only: a resumed one's checkpoint holds what it sets up
                model.before_fit()  # (a plain LightningModule named by dotted path has no before_fit)
            model.plots_dir = run_dir / "plots"
            skip_empty_module_hooks(model)  # ~25 us a step less Lightning dispatch
            attach_loggers(trainer, cfg, run_dir, resumed=ckpt is not None)
            fit(trainer, model, datamodule, ckpt, run_dir, command, cfg)
    signal_cb = signal_callback(trainer)
    result = RunResult(run_dir, model, interrupted=signal_cb.received is not None, rank_zero=trainer.is_global_zero)
    result.untested = ("test_after_fit=false" if not cfg["test_after_fit"] else "trainer.fast_dev_run"
                       if cfg["trainer"].get("fast_dev_run") else "interrupted" if result.interrupted else None)
    if result.untested is None:
        last = run_dir / "checkpoints" / "last.ckpt"
        try:
            with ctrl_c_in_lightning(trainer, lambda: f"while testing; the trained run is kept in {run_dir} "
                                     f"(test it with python -m zoo.evaluate {last})"):
                metrics = trainer.test(model, datamodule=datamodule, verbose=False)
        except Exception as err:  # e.g. trainer.limit_test_batches=0.001, which keeps no batch: a traceback
            user = user_error_in_fit(err)
            if user is None:
                raise
            raise UserError(f"{user.message} (the trained run is kept: test it with the command below)",
                            details=[*user.details, f"run folder: {run_dir}",
                                     f"python -m zoo.evaluate {last}"]) from None
        result.test_metrics = {k: float(v) for k, v in (metrics[0] if metrics else {}).items()}
        if trainer.is_global_zero and result.test_metrics:
            (run_dir / "metrics.json").write_text(json.dumps(result.test_metrics, indent=2) + "\n")
        elif trainer.is_global_zero:  # said, not an empty metrics.json
            print("warning: the test logged no metric, so no metrics.json was written", file=sys.stderr)
    if trainer.is_global_zero:
        result.summary = end_summary(trainer, run_dir, tested=result.untested is None)
    return result
