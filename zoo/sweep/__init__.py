"""``python -m zoo.sweep``: every combination of a recipe's options, each a ``python -m zoo.train`` run,
summarised over seeds. ``command.py`` holds the command line, the plan and the summary; ``runs.py`` one
run (its process and result.json), whichever launcher starts it; ``slurm.py`` the SLURM launcher."""

from zoo.sweep.command import console, main, make_sweep, run_sweep, summarise
from zoo.sweep.runs import Run, Sweep, run_env, train_command

__all__ = ["Run", "Sweep", "console", "main", "make_sweep", "run_env", "run_sweep", "summarise", "train_command"]
