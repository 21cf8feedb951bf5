"""python -m zoo.train recipe=NAME [key=value ...]

Recipe + overrides -> validated config (here, without torch: every recipe mistake and print_config=true
answered in a fraction of a second) -> ``zoo.runner``: Trainer, datamodule, model, callbacks, loggers ->
lightning.Trainer.fit -> test -> runs/<recipe>/<timestamp>/ (config.yaml, checkpoints/,
metrics.csv, metrics.json, plots/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from zoo import cli
from zoo.cli import exit_status, in_order
from zoo.config import load_config, to_yaml
from zoo.errors import UserError
from zoo.overrides import repeated_overrides
from zoo.recipe_files import all_recipes, recipe_description

USAGE = """\
usage: python -m zoo.train recipe=NAME [key=value ...]
       python -m zoo.train --list          recipes with a one-line description
       python -m zoo.train --help

  recipe=NAME          a recipe under recipes/ (file stem) or a path to a YAML file
  key=value            override any recipe key, OmegaConf dotlist syntax:
                         trainer.max_epochs=3 model.attention=hard data.batch_size=64
                         'logger=[csv,wandb]' trainer.devices=2 trainer.strategy=ddp
  model.estimator=rloo model.estimator.n=4
                       a key that names a thing picks it whole (the recipe's options do
                       not carry over); KEY.OPTION=VALUE refines it, in any order
  print_config=true    print the resolved config and exit
  ckpt_path=last       resume the latest run of this recipe (or ckpt_path=PATH/TO.ckpt)
  run_dir=runs         where runs are written: <run_dir>/<recipe>/<timestamp>/
  seed=0               seeds python, numpy, torch

User mistakes exit with status 2 and one message; Ctrl-C / SIGTERM save last.ckpt first.
Progress: Lightning's bar on a terminal, a plain line per epoch otherwise (a file, SLURM's output);
ZOO_PROGRESS=bar|lines forces either, ZOO_PROGRESS_EVERY=30 (seconds) spaces the lines inside an epoch.
"""


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
        named = [arg for arg in overrides if "=" not in arg and is_recipe(arg)]
        hint = f"did you mean recipe={named[0]}? " if named else ""
        raise UserError(f"no recipe given: {hint}python -m zoo.train recipe=NAME (see --list, and --help)")
    return recipe, overrides


def is_recipe(word: str) -> bool:
    """``word`` names a recipe (under recipes/) or a recipe file."""
    return word in all_recipes() or word.endswith((".yaml", ".yml")) and Path(word).is_file()


def train(argv: list[str]) -> Any:
    """The run of ``python -m zoo.train ARGV``: its ``zoo.runner.RunResult``, or None where only the config
    was printed. The recipe is checked here, without torch; the run is ``zoo.runner``'s."""
    recipe, overrides = split_args(argv)
    run = load_config(recipe, overrides)
    given = [a for a in argv if not a.startswith("-")]  # recipe= too: given twice, the last one wins, said
    if run["print_config"]:
        print(to_yaml(run.settings), end="")
        for note in repeated_overrides(given):  # the config shows the last value: say it was chosen
            print(f"note: {note}", file=sys.stderr)
        return None
    from zoo.runner import run_training  # torch and Lightning from here on: the recipe is checked

    return run_training(run, argv, given)


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
        if result.summary:
            print("\n".join(result.summary))
        if result.untested:  # said, where a tested run lists its metrics
            last = result.run_dir / "checkpoints" / "last.ckpt"
            print(f"  not tested ({result.untested})"
                  + (f": python -m zoo.evaluate {last} tests it" if last.is_file() else ""))
        width = max(map(len, result.test_metrics), default=0)  # the widest name sets the column
        for key, value in in_order(result.test_metrics):
            print(f"  {key:<{width}} {value:.4f}")
    return 0


def __getattr__(name: str) -> Any:
    """The runner's names, as ``zoo.train``'s too (``from zoo.train import build``), imported when asked for."""
    if name in ("RunResult", "build", "make_trainer", "fit", "signal_callback", "run_training"):
        from zoo import runner  # torch and Lightning: only for these names

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def console() -> None:
    """The console script (pyproject.toml)."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
