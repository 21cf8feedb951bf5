"""The scripts under benchmarks/ and studies/ import this checkout's ``zoo`` and ``benchmarks.common`` (their
shared helpers, which the wheel leaves out) when run as ``python benchmarks/NAME.py`` from the repository root,
where ``sys.path[0]`` is the script's own folder: each puts the checkout's root first on ``sys.path``
before its first import of either (docs/development.md, "Benchmarks and studies")."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for folder in ("benchmarks", "studies") for p in (ROOT / folder).rglob("*.py")
                 if "results" not in p.parts and "common" not in p.parts)
HELPERS = sorted((ROOT / "benchmarks" / "common").glob("*.py"))  # imported by the scripts, not run
OURS = ("zoo", "benchmarks")


def first_party(node: ast.stmt) -> bool:
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
        [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
    return any(n.split(".")[0] in OURS for n in names)


def puts_root_first(node: ast.stmt) -> bool:
    """``sys.path.insert(0, <the checkout's root>)`` at the top of the module."""
    call = node.value if isinstance(node, ast.Expr) else None
    return (isinstance(call, ast.Call) and ast.unparse(call.func) == "sys.path.insert"
            and ast.unparse(call.args[0]) == "0" and "benchmarks" not in ast.unparse(call.args[1])
            and "tests" not in ast.unparse(call.args[1]))


def test_every_script_puts_the_checkout_first_before_importing_zoo_or_its_helpers():
    assert len(SCRIPTS) >= 30
    wrong = []
    for path in SCRIPTS:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if puts_root_first(node):
                break
            if first_party(node):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
                break
    assert wrong == [], "add sys.path.insert(0, str(Path(__file__).resolve().parents[1])) above:\n" + "\n".join(wrong)


@pytest.mark.slow  # a process that imports torch (~5 s): `make test-slow`
def test_a_script_run_from_the_root_imports_the_checkouts_helpers():
    """One script as a user runs it (its folder first on sys.path, not the root), stopped before its work."""
    code = ("import runpy, sys; sys.path[0] = 'benchmarks'; runpy.run_path('benchmarks/recipe_seeds.py', "
            "run_name='imported'); print(sys.modules['benchmarks.common'].__file__, sys.modules['zoo'].__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    helpers = ROOT / "benchmarks" / "common" / "__init__.py"
    assert out.stdout.split() == [str(helpers), str(ROOT / "zoo" / "__init__.py")]


def test_every_name_a_script_imports_from_the_checkout_exists():
    """A module renamed or a name moved breaks a script only when someone runs it: read every first-party
    ``from X import a, b`` of every script (at any depth) and look the names up."""
    import importlib.util

    missing = []
    for path in SCRIPTS + HELPERS:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and first_party(node)):
                continue
            try:
                module = importlib.import_module(node.module)
            except ImportError as err:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {err}")
                continue
            missing += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                        if not hasattr(module, a.name) and not (hasattr(module, "__path__")
                                                            and importlib.util.find_spec(f"{node.module}.{a.name}"))]
    assert missing == []


def test_no_script_writes_under_tmp_by_default():
    """A script's default output folder lies in the checkout (a runs/ folder, which git ignores, or a results/
    one): a folder under /tmp is emptied by the machine and is not where a reader of the study looks."""
    wrong = [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for path in SCRIPTS
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/tmp")]
    assert wrong == []


def optional_imports(tree: ast.Module) -> set[str]:
    """Top-level names imported inside a ``try`` that catches ImportError: a peer the script runs without."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is not None and any(n in ast.unparse(h.type) for n in ("ImportError", "ModuleNotFoundError"))
                for h in node.handlers):
            found |= {a.name.split(".")[0] for stmt in node.body if isinstance(stmt, ast.Import) for a in stmt.names}
    return found


def added_folders(tree: ast.Module) -> list[Path]:
    """The checkout's folders a script puts on ``sys.path`` itself (``... / "benchmarks"``, ``ROOT / "tests"``)."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "sys.path.insert"]
    return [ROOT / name for call in calls for name in ("benchmarks", "tests") if f"'{name}'" in ast.unparse(call)]


def test_every_other_module_a_script_imports_is_installed_or_beside_it():
    """A bare ``import name`` / ``from name import x`` (at any depth, a function's too) resolves where the script
    runs: an installed module, or a file or package in the script's own folder (``sys.path[0]``) or in a folder
    the script puts on ``sys.path``; peers imported under ``except ImportError`` are optional. A module moved
    into ``zoo`` and still imported by its old bare name fails only when someone runs that branch."""
    import importlib.util

    unresolved = []
    for path in SCRIPTS + HELPERS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        folders, optional = [path.parent, *added_folders(tree)], optional_imports(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for top in {n.split(".")[0] for n in names} - set(OURS) - optional:
                if not any((f / f"{top}.py").exists() or (f / top / "__init__.py").exists() for f in folders) \
                        and importlib.util.find_spec(top) is None:
                    unresolved.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert len(SCRIPTS) >= 30 and unresolved == []
