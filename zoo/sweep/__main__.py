"""``python -m zoo.sweep`` (the command: zoo/sweep/command.py)."""

from zoo import cli
from zoo.sweep.command import main

if __name__ == "__main__":
    cli.run(main)
