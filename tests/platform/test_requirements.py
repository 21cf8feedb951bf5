"""`make test-oldest` pins every dependency to the lower bound pyproject.toml declares (.ci/requirements.py):
a dependency without one would be tested only at its newest version, and its bound would be a guess."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(mode: str) -> list[str]:
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "requirements.py"), mode], capture_output=True,
                          text=True, check=True)
    return done.stdout.splitlines()


def test_every_dependency_has_a_lower_bound_to_be_tested_at():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + [s for extra in project["optional-dependencies"].values() for s in extra]
    pins = run("oldest")
    assert len(pins) == len(declared), (pins, declared)
    assert "torch==2.4" in pins and "lightning==2.6" in pins  # the bounds `make test-oldest` passed on


def test_the_check_names_what_is_installed_and_what_is_outside_the_range():
    lines = run("check")
    torch_line = next(line for line in lines if line.startswith("torch "))
    import torch

    assert torch.__version__.split("+")[0] in torch_line and torch_line.endswith("ok")
    assert lines[-1].endswith("missing or outside their range")
