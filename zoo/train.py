"""python -m zoo.train recipe=NAME [key=value ...]

Recipe + overrides -> validated config -> datamodule, model, callbacks, loggers ->
lightning.Trainer.fit -> test -> runs/<recipe>/<timestamp>/ (config.yaml, checkpoints/,
metrics.csv, metrics.json, plots/).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zoo import cli
from zoo.callbacks.named import build_callbacks
from zoo.cli import build_trainer, ctrl_c_in_lightning, exit_status, in_order, user_error_in_fit
from zoo.config import load_config, repeated_overrides, run_monitor, to_yaml, validation_off
from zoo.errors import UserError
from zoo.recipe_files import all_recipes, recipe_description
from zoo.registry import DATAMODULES, MODELS
from zoo.runs import (
    check_resumable,
    check_writable,
    claim_run_dir,
    read_resume_checkpoint,
    removed_if_unsaved,
    resolve_run_dir,
)
from zoo.tracking import HeldMessages, console_callbacks, make_loggers, quiet_lightning, set_float32_precision

USAGE = """\
usage: python -m zoo.train recipe=NAME [key=value ...]
       python -m zoo.train --list          recipes with a one-line description
       python -m zoo.train --help

  recipe=NAME          a recipe under recipes/ (file stem) or a path to a YAML file
  key=value            override any recipe key, OmegaConf dotlist syntax:
                         trainer.max_epochs=3 model.attention=hard data.batch_size=64
                         'logger=[csv,wandb]' trainer.devices=2 trainer.strategy=ddp
  print_config=true    print the resolved config and exit
  ckpt_path=last       resume the latest run of this recipe (or ckpt_path=PATH/TO.ckpt)
  run_dir=runs         where runs are written: <run_dir>/<recipe>/<timestamp>/
  seed=0               seeds python, numpy, torch

User mistakes exit with status 2 and one message; Ctrl-C / SIGTERM save last.ckpt first.
"""


@dataclass
class RunResult:
    run_dir: Path  # the run folder
    model: Any  # the trained LightningModule
    test_metrics: dict = field(default_factory=dict)  # {"test/...": float}
    interrupted: bool = False  # stopped by SIGTERM/SIGINT (last.ckpt saved)
    rank_zero: bool = True  # False in the other processes of a multi-process run (they print nothing)
    untested: str | None = None  # why the run was not tested (test_after_fit=false, ...), else None


def split_args(argv: list[str]) -> tuple[str, list[str]]:
    recipe, overrides = None, []
    for arg in argv:
        if arg.startswith("recipe="):
            recipe = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            if "=" in arg:  # --trainer.max_epochs=3
                bare = arg.lstrip("-")
                if "." not in bare.split("=", 1)[0]:  # --max_epochs=3: its section is needed too
                    raise UserError(f"unknown flag '{arg}': overrides are written without dashes and with their "
                                    f"section, section.{bare} (e.g. trainer.max_epochs=3, model.lr=0.01); "
                                    "print_config=true shows the recipe's keys")
                raise UserError(f"unknown flag '{arg}': overrides are written without dashes, "
                                f"{bare}; see `python -m zoo.train --help`")
            raise UserError(f"unknown flag '{arg}'; see `python -m zoo.train --help`")
        else:
            overrides.append(arg)
    if not recipe:
        raise UserError("no recipe given: python -m zoo.train recipe=NAME (see --list, and --help)")
    return recipe, overrides


def build(cfg: dict) -> tuple[Any, Any]:
    """Datamodule and model from a validated config."""
    from zoo.core.memory import AllocationGuard  # imported when used: torch

    data_opts = {k: v for k, v in cfg["data"].items() if k != "name"}
    model_opts = {k: v for k, v in cfg["model"].items() if k != "name"}
    datamodule = DATAMODULES.get(cfg["data"]["name"])(data_opts)
    datamodule.prepare_data()
    datamodule.setup("fit")
    with AllocationGuard():  # weights larger than the machine: one line, before they are allocated
        model = MODELS.get(cfg["model"]["name"])(model_opts, datamodule.info())
    return datamodule, model


def make_trainer(cfg: dict, run_dir: Path, model: Any, extra_callbacks: list, resumed: bool = False,
                 notes: list[str] | None = None) -> Any:
    """The lightning.Trainer of a run, built once, before any data: a setting Lightning refuses is a UserError
    before a corpus is generated or a file downloaded. ``model``: the model's class (its monitor is the one
    ``zoo.config.run_monitor`` states from the recipe, else the class's). ``notes``: lines about the run's
    settings, printed (``note: ...``) once training starts."""
    return build_trainer(lambda: _make_trainer(cfg, run_dir, model, extra_callbacks, resumed, list(notes or [])),
                         f"trainer settings {cfg['trainer']}")


def _make_trainer(cfg: dict, run_dir: Path, model: Any, extra_callbacks: list, resumed: bool,
                  notes: list[str]) -> Any:
    import lightning as L  # imported when used: lightning
    from lightning.pytorch.callbacks import ModelCheckpoint  # imported when used: lightning

    # imported when used: lightning
    from zoo.callbacks.safety import (
        AtomicCheckpointIO,
        FinalCheckpoint,
        LastCheckpoint,
        MonitorCheck,
        NonFiniteLossGuard,
        Notes,
        RNGState,
        SignalCheckpoint,
    )

    ck = cfg["checkpoint"]
    ckpt_dir = run_dir / "checkpoints"
    # "best" by the model's metric, and "last" = the latest state (a separate callback: with a
    # monitor, Lightning 2.6 refreshes save_last only when a new best is saved).
    own = run_monitor(cfg["model"]["name"], cfg)  # None: not stated before the model is built; the class's then
    monitor = ck["monitor"] or (own[0] if own else model.monitor)
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="best-{epoch}-{step}", monitor=monitor,
                           mode=ck["mode"] or (own[1] if own else model.monitor_mode), save_top_k=ck["save_top_k"],
                           every_n_epochs=ck["every_n_epochs"], auto_insert_metric_name=False)
    # validation turned off (trainer.limit_val_batches=0): no best by a val/ metric (Lightning warned that it
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
                 *build_callbacks(cfg["callbacks"]), SignalCheckpoint(last),
                 *([Notes(notes)] if notes else [])]
    trainer_opts = dict(cfg["trainer"])
    callbacks += console_callbacks(trainer_opts, callbacks)
    if trainer_opts.get("strategy") == "ddp" and getattr(model, "ddp_find_unused_parameters", False):
        trainer_opts["strategy"] = "ddp_find_unused_parameters_true"  # e.g. a GAN: each step trains one net
    return L.Trainer(default_root_dir=str(run_dir), logger=make_loggers(cfg, run_dir, resumed), callbacks=callbacks,
                     plugins=[AtomicCheckpointIO()], **trainer_opts)




def signal_callback(trainer: Any) -> Any:
    """The run's ``SignalCheckpoint`` (make_trainer adds one to every run)."""
    return next(c for c in trainer.callbacks if type(c).__name__ == "SignalCheckpoint")


def fit(trainer: Any, model: Any, datamodule: Any, ckpt: str | None, run_dir: Path, command: str, cfg: dict) -> None:
    """``trainer.fit`` in the run folder, its failures as the zoo's messages (a run that fails before its
    first checkpoint leaves no folder: ``runs.removed_if_unsaved`` around the whole of ``train``)."""
    from zoo.callbacks.safety import as_divergence  # imported when used: lightning

    if trainer.is_global_zero:
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            name = "config.yaml"  # a resumed run keeps the first one and adds its own beside it
            if ckpt is not None and (run_dir / name).is_file():
                name = f"config.resume-{1 + len(list(run_dir.glob('config.resume-*.yaml')))}.yaml"
            (run_dir / name).write_text(f"# {command}\n" + to_yaml(cfg))
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
            user = UserError(f"{user} (the last good checkpoint is kept: {kept[-1]}; resume with ckpt_path=last "
                             "once fixed)")
        raise user from None
    finally:
        if distributed and trainer.is_global_zero:
            os.environ.pop("ZOO_RUN_DIR", None)


def train(argv: list[str]) -> RunResult | None:
    recipe, overrides = split_args(argv)
    cfg = load_config(recipe, overrides)
    given = [a for a in argv if not a.startswith("-")]  # recipe= too: given twice, the last one wins, said
    if cfg["print_config"]:
        print(to_yaml(cfg), end="")
        for note in repeated_overrides(given):  # the config shows the last value: say it was chosen
            print(f"note: {note}", file=sys.stderr)
        return None
    import lightning as L  # imported when used: lightning

    from zoo.callbacks.safety import ReleaseHeldMessages, RunInfo  # imported when used: lightning
    from zoo.core.memory import check_step_fits  # imported when used: torch
    run_dir, ckpt = resolve_run_dir(cfg)
    check_writable(run_dir)
    run_dir, made = claim_run_dir(run_dir, cfg)  # the folders this run makes, removed again if it fails unsaved
    with removed_if_unsaved(run_dir, made):
        if cfg["threads"]:
            import torch  # imported when used: torch

            torch.set_num_threads(cfg["threads"])
        if cfg["matmul_precision"]:
            set_float32_precision(cfg["matmul_precision"])
        L.seed_everything(cfg["seed"], workers=True, verbose=False)
        saved = read_resume_checkpoint(ckpt, cfg) if ckpt is not None else None
        quiet_lightning()  # before the first loader: OOD's CombinedLoader warned of LeafSpec ahead of any message
        command = "python -m zoo.train " + shlex.join(argv)
        info = {"format": 1, "model": cfg["model"]["name"], "data": cfg["data"], "recipe": cfg["recipe"],
                "command": command, "config": cfg}
        # Lightning's start-up lines (devices, model summary) are printed once training starts: a mistake
        # it finds before then (in the data, or inside fit: a validation interval longer than the epoch) is the
        # only line
        with HeldMessages() as held:
            # the run's one Trainer, before any data is built or cached: Lightning's own checks of the trainer:
            # section (an accelerator this machine lacks, a strategy name that does not exist) come first
            trainer = make_trainer(cfg, run_dir, MODELS.get(cfg["model"]["name"]),
                                   [RunInfo(info), ReleaseHeldMessages(held)], resumed=ckpt is not None,
                                   notes=repeated_overrides(given))
            datamodule, model = build(cfg)
            # the training loader's own checks (a batch larger than the data) before Lightning prints its device
            # lines and model summary: a mistake found there is then the only line on the screen
            datamodule.train_dataloader()
            check_step_fits(model, datamodule, str(cfg["trainer"].get("accelerator", "auto")))  # MAML's meta-batch
            if ckpt is not None:
                check_resumable(ckpt, saved, model, cfg)
            elif hasattr(model, "before_fit"):  # a fresh run only: a resumed one's checkpoint holds what it sets up
                model.before_fit()  # (a plain LightningModule named by dotted path has no before_fit)
            model.plots_dir = run_dir / "plots"
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
            raise UserError(f"{user} (the trained run is kept in {run_dir}; test it with python -m zoo.evaluate "
                            f"{last})") from None
        result.test_metrics = {k: float(v) for k, v in (metrics[0] if metrics else {}).items()}
        if trainer.is_global_zero and result.test_metrics:
            (run_dir / "metrics.json").write_text(json.dumps(result.test_metrics, indent=2) + "\n")
        elif trainer.is_global_zero:  # an empty metrics.json, silently
            print("warning: the test logged no metric, so no metrics.json was written", file=sys.stderr)
    return result


def list_recipes() -> str:
    recipes = all_recipes()
    width = max((len(n) for n in recipes), default=10)
    return "\n".join(f"{name:<{width}}  {recipe_description(path)}" for name, path in sorted(recipes.items()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    if argv and argv[0] == "--list":
        print(list_recipes())
        return 0
    return exit_status(lambda: run(argv))


def run(argv: list[str]) -> int:
    """``train`` for the command line: the run folder and test metrics printed, a diverged run's
    message (exit status 1: not the user's mistake as such)."""
    try:
        result = train(argv)
    except Exception as err:
        if type(err).__name__ != "NonFiniteLossError":
            raise
        where = Path(getattr(err, "run_dir", "."))
        if any((where / "checkpoints").glob("*.ckpt")):
            kept = (f"the last good checkpoint is kept in {where}/checkpoints (resume with ckpt_path=last "
                    "after fixing the cause)")
        else:
            kept = "it diverged before its first checkpoint, so no run folder was kept"
        changed = [a for a in argv if a.startswith(("model.", "data.")) and not a.startswith("model.lr=")]
        hint = (f"; or an extreme value among the options changed from the recipe: {', '.join(changed)}"
                if changed else "")  # model.decoder_std=1e-30 diverges at any learning rate
        print(f"error: {err}. Training stopped; {kept}. A lower model.lr (or a smaller batch) is the usual "
              f"fix{hint}.", file=sys.stderr)
        return 1
    if result is not None and result.rank_zero:
        print(f"run folder: {result.run_dir}")
        if result.untested:  # said, where a tested run lists its metrics
            last = result.run_dir / "checkpoints" / "last.ckpt"
            print(f"  not tested ({result.untested})"
                  + (f": python -m zoo.evaluate {last} tests it" if last.is_file() else ""))
        width = max(map(len, result.test_metrics), default=0)  # 28 broke the columns of longer names
        for key, value in in_order(result.test_metrics):
            print(f"  {key:<{width}} {value:.4f}")
    return 0


def console() -> None:
    """The console script (pyproject.toml)."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
