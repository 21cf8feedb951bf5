"""Docs that cannot rot: the README's and docs/'s code blocks run, their commands are checked, their links resolve.

- every ```python block of a page runs: a page's blocks in order, in one namespace, in a process of its own
  (an example may register an estimator or a model; a forkserver's child, so torch and Lightning are imported
  once, not once a page) whose working folder is a temporary one, named ``tmp_path`` in that namespace;
- every ``python -m zoo.train ...`` line of a shell block (torchrun and srun lines too) is run in-process with
  ``print_config=true`` appended: the recipe, its overrides and every option are validated, nothing trains.
  A device count this machine lacks (``trainer.devices=8`` on a CPU) is checked as 1 device;
- ``zoo.evaluate`` / ``zoo.predict`` name a released entry or a path, ``zoo.pretrained`` and ``zoo.estimators``
  a subcommand they have, ``python FILE.py`` / ``bash FILE.sh`` a file that exists, ``make X`` a target;
- every relative link of README.md, docs/, benchmarks/README.md, studies/ and CHANGELOG.md names a file that
  exists, and an anchor into a markdown file names one of its headings.

The README's block of the models' inference methods (marked ``<!-- api-snippets -->``) runs on its own.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from platform_testlib import exec_in_child, forkserver  # tests/platform, on sys.path via conftest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = PAGES + [ROOT / "benchmarks" / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "studies").glob("*.md"))]
API_MARKER = "<!-- api-snippets -->"
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


def blocks(path: Path) -> list[tuple[str, int, str, bool]]:
    """(language, first line, text, marked as the api snippets) of every fenced block of a page."""
    found, lines = [], path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i + 1
        j = start
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        text = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[start:j])
        found.append((lang, start + 1, text, before == API_MARKER))
        i = j + 1
    return found


def python_blocks(path: Path, api: bool) -> list[tuple[int, str]]:
    return [(line, text) for lang, line, text, marked in blocks(path) if lang == "python" and marked == api]


RUNNER = r"""
import sys, traceback
from pathlib import Path
namespace = {"__name__": "__docs__", "tmp_path": Path.cwd()}
for line, code in BLOCKS:
    try:
        exec(compile(code, f"{PAGE}, block at line {line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED: {PAGE}, the python block at line {line}", file=sys.stderr)
        sys.exit(1)
print("OK", len(BLOCKS))
"""


def run_blocks(page: Path, code_blocks: list[tuple[int, str]], tmp_path: Path) -> tuple[int | None, str]:
    """(exit code, output) of the page's blocks run in a forkserver's child whose working folder is a new one."""
    runner = f"PAGE = {page.relative_to(ROOT).as_posix()!r}\nBLOCKS = {code_blocks!r}\n" + RUNNER
    work, log = tmp_path / "work", tmp_path / "output.log"
    work.mkdir()
    p = forkserver().Process(target=exec_in_child, args=(runner, str(work), str(log)))
    p.start()
    p.join(600)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail(f"{page.name}'s blocks were still running after 600 s")
    return p.exitcode, log.read_text() if log.is_file() else ""


PAGES_WITH_PYTHON = [p for p in PAGES if python_blocks(p, api=False)]


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=lambda p: p.name)
def test_every_python_block_of_a_page_runs(page, tmp_path):
    code, output = run_blocks(page, python_blocks(page, api=False), tmp_path)
    assert code == 0, output[-4000:]
    assert f"OK {len(python_blocks(page, api=False))}\n" in output, output[-4000:]


def test_the_readme_api_snippets_run(tmp_path):
    code_blocks = python_blocks(ROOT / "README.md", api=True)
    assert len(code_blocks) == 1, f"one block after {API_MARKER} in the README"
    code, output = run_blocks(ROOT / "README.md", code_blocks, tmp_path)
    assert code == 0, output[-4000:]
    assert "OK 1\n" in output, output[-4000:]


def shell_commands(path: Path) -> list[tuple[int, list[str]]]:
    """(line, words) of every command in the page's shell blocks: continuations joined, comments dropped."""
    commands = []
    for lang, start, text, _ in blocks(path):
        if lang not in SHELL:
            continue
        pending, first = "", start
        for offset, raw in enumerate(text.split("\n")):
            if not pending:
                first = start + offset
            pending += raw.rstrip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            words = shlex.split(pending, comments=True)
            pending = ""
            if words:
                commands.append((first, words))
    return commands


def after(words: list[str], module: str) -> list[str] | None:
    """The arguments after ``-m MODULE`` (python, torchrun, srun ... python), or None."""
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1] == module:
            return words[i + 2:]
    return None


def devices_here(args: list[str]) -> list[str]:
    import torch

    have = torch.cuda.device_count() or (os.cpu_count() or 1)
    out = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key == "trainer.devices" and value.isdigit() and int(value) > have:
            arg = "trainer.devices=1"
        elif key == "trainer.num_nodes" and value.isdigit() and int(value) > 1:
            arg = "trainer.num_nodes=1"
        out.append(arg)
    return out


ALL_COMMANDS = [(page, line, words) for page in PAGES for line, words in shell_commands(page)]
TRAIN_COMMANDS = [(page, line, args) for page, line, words in ALL_COMMANDS
                  if (args := after(words, "zoo.train")) is not None]


@pytest.mark.parametrize("page,line,args", TRAIN_COMMANDS,
                         ids=[f"{p.name}:{line}" for p, line, _ in TRAIN_COMMANDS])
def test_every_train_command_is_a_valid_config(page, line, args, tmp_path, monkeypatch, capsys):
    from zoo.train import main

    monkeypatch.chdir(ROOT)  # recipe=recipes/... paths are the repository's
    if args and args[0] in ("--list", "--help"):
        assert main(args) == 0
        return
    code = main(devices_here(args) + [f"run_dir={tmp_path}/runs", "print_config=true"])
    out, err = capsys.readouterr()
    assert code == 0, f"{page.name}:{line}: python -m zoo.train {shlex.join(args)}\n{err}"
    assert "recipe:" in out


def test_the_pages_train_something():
    assert len(TRAIN_COMMANDS) >= 20 and {p.name for p, _, _ in TRAIN_COMMANDS} >= {"README.md", "training.md"}


def makefile_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))


def command_problem(words: list[str]) -> str | None:
    """What is wrong with a shell command that is not a training run, or None."""
    from zoo.loading import pretrained_cards

    released = set(pretrained_cards())
    for module in ("zoo.evaluate", "zoo.predict"):
        args = after(words, module)
        if args is not None:
            target = next((a for a in args if not a.startswith("-") and "=" not in a), None)
            looks_like_path = target is not None and ("/" in target or target.endswith(".ckpt"))
            if target not in released and not looks_like_path:
                return f"{module} {target!r}: neither a released entry ({', '.join(sorted(released))}) nor a path"
            return None
    subcommands = {"zoo.pretrained": {None, "export"}, "zoo.estimators": {"list", "compare"}}
    for module, allowed in subcommands.items():
        args = after(words, module)
        if args is not None:
            sub = args[0] if args and not args[0].startswith("-") else None
            return None if sub in allowed else f"{module} has no subcommand {sub!r}"
    if words[0] in ("python", "python3", "bash") and len(words) > 1 and words[1].endswith((".py", ".sh")):
        return None if (ROOT / words[1]).is_file() else f"{words[1]} does not exist"
    if words[0] == "make":
        missing = [t for t in words[1:] if t not in makefile_targets()]
        return f"make has no target {missing}" if missing else None
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_other_command_names_what_exists(page):
    problems = [f"{page.name}:{line}: {shlex.join(words)}: {problem}" for line, words in shell_commands(page)
                if (problem := command_problem(words))]
    assert not problems, "\n".join(problems)


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    inside, found = False, set()
    for line in path.read_text().split("\n"):
        if FENCE.match(line):
            inside = not inside
        elif not inside and (m := re.match(r"^#{1,6}\s+(.*)", line)):
            found.add(slug(m.group(1)))
    return found


def without_code(text: str) -> str:
    """The page without its fenced blocks and inline code spans (no links there)."""
    text = re.sub(r"^\s*```.*?^\s*```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("page", [p for p in LINKED if p.exists()], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    broken = []
    text = without_code(page.read_text())
    for target in LINK.findall(text) + IMAGE.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#") and not target[1:]:
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading with that anchor in {path.name}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_readme_is_a_way_in():
    """Short, no dates, the first training command early, the test command shown (.ci/run runs it)."""
    text = (ROOT / "README.md").read_text()
    lines = text.split("\n")
    assert len(lines) <= 250
    assert not re.search(r"20\d\d-[01]\d-[0-3]\d", text)
    assert next(i for i, line in enumerate(lines) if line.startswith("python -m zoo.train")) < 40
    assert next(i for i, line in enumerate(lines) if "zoo.load(" in line) < 100
    assert "make test" in text and "make test" in (ROOT / ".ci" / "run").read_text()
