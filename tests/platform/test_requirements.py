"""`make test-oldest` pins every dependency to the lower bound pyproject.toml declares (.ci/requirements.py):
a dependency without one would be tested only at its newest version, and its bound would be a guess."""

import re
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


UPPER = re.compile(r"<|==|~=|!=")  # a specifier that refuses a newer release


def declared_lines() -> list[tuple[str, str]]:
    """(requirement, the comment on its line) for every requirement string in pyproject.toml's [project]."""
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("dependencies = ["):text.index("[project.scripts]")]
    found = []
    for line in block.splitlines():
        code, _, comment = line.partition("#")
        found += [(req, comment) for req in re.findall(r'"([^"]+)"', code)]
    return found


def test_an_upper_bound_only_with_the_break_it_avoids():
    """An upper pin lags the releases (torch<2.15 kept torch 2.15 out for months): each one names, after
    "breaks:", the release that breaks the zoo and how; make test-newest checks the newest of the others."""
    declared = declared_lines()
    assert len(declared) >= 20, declared  # the parse found the dependency lists
    unexplained = [req for req, comment in declared if UPPER.search(req) and "breaks:" not in comment]
    assert not unexplained, f"upper bounds without a 'breaks:' reason in a comment on their line: {unexplained}"


def test_an_unexplained_upper_bound_is_caught(tmp_path, monkeypatch):
    """The check above is not vacuous: a pin without a reason fails it."""
    fake = tmp_path / "pyproject.toml"
    fake.write_text('dependencies = [\n    "torch>=2.4,<2.15",\n    "wandb>=0.17,<1",  # breaks: 1.0 drops X\n]\n'
                    "[project.scripts]\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [r for r, c in declared_lines() if UPPER.search(r) and "breaks:" not in c] == ["torch>=2.4,<2.15"]


def test_make_test_newest_installs_past_every_cap():
    """make test-newest: a fresh .venv-newest, every dependency upgraded to its newest release (pip install -U),
    with a site pip.conf that empties a machine-wide constraints file (here /etc/xdg/pip caps torch)."""
    make = (ROOT / "Makefile").read_text()
    recipe = make[make.index("\ntest-newest:"):].split("\n\n")[0]
    assert "rm -rf .venv-newest" in recipe and "install -q -U" in recipe and "pip.conf" in recipe
    assert "test-newest" in (ROOT / "docs" / "development.md").read_text()
