"""python -m zoo.evaluate TARGET [key=value ...] [--json]

TARGET is a checkpoint path or a pretrained name. Rebuilds the model's datamodule (the data
options stored with the model, overridable with data.KEY=VALUE), runs the test split and prints
every ``test/*`` metric as a table (or one JSON object with --json).

  data.root=PATH        where the data lives (any data option can be overridden)
  trainer.KEY=VALUE     lightning.Trainer arguments (e.g. trainer.limit_test_batches=10)
  seed=N                seed for stochastic metrics (default: the run's seed; where the model has its own
                        model.eval_seed, that too: the VAE's latents, SeqGAN's samples)
  plots_dir=PATH        where the model writes its test figures (default: not kept)
  matmul_precision=highest|high|medium
                        float32 products and convolutions on a GPU (as zoo.train's; default: torch's)
  --trust-code          import the modules a checkpoint or model folder names by dotted path (its author's
                        code; refused without it)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from zoo import cli
from zoo.cli import CommandLineParser, build_trainer, ctrl_c_in_lightning, exit_status, format_table, user_error_in_fit
from zoo.config import MATMUL_PRECISIONS
from zoo.errors import UserError
from zoo.loading import load_any, locate
from zoo.messages import HeldMessages
from zoo.overrides import repeated_overrides
from zoo.registry import DATAMODULES, loaded_config
from zoo.schema import SEED_MAX, between, choice, parse_kv, validate
from zoo.trainer_schema import check_trainer_options


@dataclass
class EvaluateOptions:
    """zoo.evaluate's own options, checked as a recipe's are (data.KEY= and trainer.KEY= go to the model's
    datamodule and to lightning.Trainer, checked there)."""

    seed: Optional[int] = between(None, 0, SEED_MAX)  # stochastic metrics' seed (None: the run's); where the
    # model has its own eval_seed (the VAE's latents, SeqGAN's samples), that too
    plots_dir: Optional[str] = None  # where the model writes its test figures (None: not kept)
    matmul_precision: Optional[str] = choice(None, [None, *MATMUL_PRECISIONS])  # float32 products on a GPU


def split_options(options: dict[str, Any], target: str) -> tuple[dict, dict, EvaluateOptions]:
    """``key=value`` options -> (data options, trainer options, the command's own, validated)."""
    data_opts, trainer_opts, own = {}, {}, {}
    for key, value in options.items():
        if key == "data" and isinstance(value, dict):  # data.name=... parses as one {name: ...} mapping
            data_opts.update(value)
        elif key.startswith("data."):
            data_opts[key[5:]] = value
        elif key.startswith("trainer."):
            trainer_opts[key[8:]] = value
        else:
            own[key] = value
    where = "zoo.evaluate's options (besides data.KEY= and trainer.KEY=)"
    return data_opts, trainer_opts, EvaluateOptions(**validate(EvaluateOptions, own, where, what="option"))


def evaluate(target: str, options: dict[str, Any] | None = None, trust_code: bool = False) -> dict[str, float]:
    """The test metrics of ``target``. ``trust_code``: import the modules its file names by dotted path (model,
    estimator, datamodule); else they are refused (``zoo.registry.loaded_config``)."""
    data_opts, trainer_opts, own = split_options(options or {}, target)
    locate(target)  # a mistyped name or path: answered before torch is imported
    import lightning as L  # the front (options, target, --help) stays light: torch and Lightning from here on

    from zoo.callbacks.run_notes import ReleaseHeldMessages
    from zoo.tracking import set_float32_precision

    model, info = load_any(target, trust_code)
    data_cfg = {**info["data"], **data_opts}
    trainer_opts = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                    "enable_model_summary": False, **trainer_opts}
    seed = info.get("config", {}).get("seed", info.get("card", {}).get("seed", 0))
    if own.seed is not None:
        seed = own.seed
        if hasattr(getattr(model, "cfg", None), "eval_seed"):  # the VAE's latents, SeqGAN's samples, MAML's
            model.cfg.eval_seed = own.seed  # rollouts come from model.eval_seed, which seed= left as trained
    if own.matmul_precision is not None:
        set_float32_precision(own.matmul_precision)
    plots_dir = Path(own.plots_dir) if own.plots_dir is not None else None
    if plots_dir is not None and plots_dir.exists() and not plots_dir.is_dir():
        raise UserError(f"plots_dir={plots_dir} is a file, not a folder; choose another plots_dir=")
    given = set(data_opts)  # the data options named on the command line
    name = data_cfg.pop("name")
    with loaded_config(target, trust_code or "name" in given):  # a data.name= of the user's own is trusted
        entry = DATAMODULES.entry(name)
    if name != info["data"]["name"] and entry.config is not None:
        data_cfg = _carried_over(data_cfg, given, entry.config)
    opts = validate(entry.config, data_cfg, f"data options of {target}") if entry.config else data_cfg
    user_trainer = {k: v for k, v in trainer_opts.items() if k not in ("logger", "enable_checkpointing")}
    trainer_opts.update(check_trainer_options(user_trainer, f"zoo.evaluate {target}"))
    datamodule = entry.obj(opts)
    datamodule.prepare_data()
    datamodule.setup("test")
    L.seed_everything(seed, verbose=False)
    with tempfile.TemporaryDirectory() as tmp:
        model.plots_dir = plots_dir or Path(tmp)
        try:
            with HeldMessages() as held:  # Lightning's device lines: printed once the test starts
                trainer = build_trainer(lambda: L.Trainer(callbacks=[ReleaseHeldMessages(held)], **trainer_opts),
                                        "trainer option")
                with ctrl_c_in_lightning(trainer):
                    results = trainer.test(model, datamodule=datamodule, verbose=False)
        except Exception as err:
            user = user_error_in_fit(err)  # e.g. a trainer.limit_test_batches that selects no batch
            if user is None:
                raise
            raise user from None
    if not results or not results[0]:
        raise UserError("no test batch was evaluated: leave out trainer.limit_test_batches, or give it a value "
                        "that keeps at least one batch")
    return {k: float(v) for k, v in results[0].items()}


def _carried_over(data_cfg: dict, given: set[str], schema: type) -> dict:
    """Data options for another datamodule (``data.name=OTHER``): the ones the user gave, and those
    of the model's own datamodule that the other one also has (root, batch_size, ...); the rest
    belong to the old datamodule and would be refused as unknown keys the user never wrote."""
    known = {f.name for f in dataclasses.fields(schema)}
    return {k: v for k, v in data_cfg.items() if k in known or k in given}


def main(argv: list[str] | None = None) -> int:

    parser = CommandLineParser(prog="python -m zoo.evaluate", description=(__doc__ or "").split("\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=(__doc__ or "").split("\n\n", 2)[-1])
    parser.add_argument("target", help="a checkpoint path or a pretrained name")
    # default=[]: else argparse names this optional list among the "required" arguments when target is missing
    parser.add_argument("overrides", nargs="*", default=[], metavar="key=value",
                        help="data.KEY=, trainer.KEY=, seed=, plots_dir=, matmul_precision=")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--trust-code", action="store_true",
                        help="import the modules the checkpoint or model folder names by dotted path "
                        "(its author's code)")
    try:
        args = parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2, message printed)
        return int(exit.code or 0)

    def run() -> int:
        metrics = evaluate(args.target, parse_kv(args.overrides), trust_code=args.trust_code)
        for note in repeated_overrides(args.overrides):  # after the test, as zoo.train's: a mistake is the only line
            print(f"note: {note}", file=sys.stderr)
        print(json.dumps(metrics) if args.json else format_table(metrics))
        return 0

    return exit_status(run)


def console() -> None:
    """The ``zoo-evaluate`` console script (pyproject.toml): what ``python -m zoo.evaluate`` does."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
