"""A class's ``__init__`` signature read from its installed source, without importing it.

lightning.Trainer's arguments and a callback's options are checked (``zoo.schema.validate_call``) before
torch and Lightning are imported (~4 s): their annotations are evaluated from the source, each name
followed through the package's own imports to where it is defined; a class there stands for itself by
name only (a recipe's YAML value is never one), and a name that cannot be followed accepts anything.
"""

from __future__ import annotations

import ast
import builtins
import collections.abc
import datetime
import functools
import importlib.util
import inspect
import os
import pathlib
import typing
from pathlib import Path
from typing import Any

# standard-library modules whose names an annotation may use (imported for real: they are light)
LIGHT_MODULES = {"typing": typing, "typing_extensions": typing, "collections.abc": collections.abc,
                 "datetime": datetime, "pathlib": pathlib, "os": os, "builtins": builtins}


class SourceSignature(typing.NamedTuple):
    params: dict[str, inspect.Parameter]  # keyword arguments, in order (without self)
    hints: dict[str, Any]  # their annotations, evaluated (names that could not be followed: Any)
    takes_kwargs: bool  # the signature takes **kwargs


def module_file(name: str) -> Path | None:
    """The source file of module ``name``, found without importing any package on its way."""
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: finds it without importing it
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    base = Path(spec.origin).parent if spec.submodule_search_locations else None
    if not rest:
        return Path(spec.origin)
    if base is None:
        return None
    path = base.joinpath(*rest)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.lru_cache(maxsize=64)
def _parsed(name: str) -> ast.Module | None:
    path = module_file(name)
    try:
        return ast.parse(path.read_text("utf-8")) if path is not None else None
    except (OSError, SyntaxError, ValueError):
        return None


def _package(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    path = module_file(module)
    base = _package(module, path is not None and path.name == "__init__.py")
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def resolve_name(module: str, name: str, depth: int = 0) -> Any:
    """The object ``name`` means at the top of ``module`` (read from source), or Any."""
    if depth > 12:
        return Any
    if module in LIGHT_MODULES:
        return getattr(LIGHT_MODULES[module], name, Any)
    tree = _parsed(module)
    if tree is None:
        return Any
    found: Any = None
    for node in tree.body:  # the last definition at the top wins, as when the module runs
        if isinstance(node, ast.ClassDef) and node.name == name:
            found = type(name, (), {"__module__": module})  # stands for the class by name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = ("expr", node.value)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    found = ("import", _absolute(module, node), alias.name)
    if found is None:
        return getattr(builtins, name, Any)
    if isinstance(found, tuple) and found[0] == "expr":
        return evaluate(module, found[1], depth + 1)
    if isinstance(found, tuple):
        source, original = found[1], found[2]
        if source in LIGHT_MODULES:
            return getattr(LIGHT_MODULES[source], original, Any)
        if source.split(".")[0] != module.split(".")[0]:  # another package: not followed
            return Any
        return resolve_name(source, original, depth + 1)
    return found


def evaluate(module: str, node: ast.expr, depth: int = 0) -> Any:
    """An annotation (or type alias) of ``module``, evaluated with its names followed; Any where it cannot be."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return Any
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    scope = {name: resolve_name(module, name, depth) for name in names}
    try:
        return eval(compile(ast.Expression(node), "<annotation>", "eval"), {"__builtins__": {}}, scope)
    except Exception:  # a construct these stand-ins do not support: judge nothing
        return Any


def _lineage(target: str, across_packages: bool) -> tuple[list[tuple[str, ast.ClassDef]], bool]:
    """The classes from ``package.module:Class`` up its bases, each with the module that defines it, read from
    source (re-exports followed: into other packages too where ``across_packages``), and whether the walk reached
    a class without bases (False: it stopped at several bases, a base that is not a plain name, or no source)."""
    module, _, name = target.partition(":")
    found: list[tuple[str, ast.ClassDef]] = []
    for _ in range(16):
        tree = _parsed(module)
        cls = next((n for n in (tree.body if tree else []) if isinstance(n, ast.ClassDef) and n.name == name), None)
        if cls is None:  # re-exported: follow the import
            entry = _where_defined(module, name)
            if entry is None or entry == (module, name):
                return found, False
            if not across_packages and entry[0].split(".")[0] != module.split(".")[0]:
                return found, False
            module, name = entry
            continue
        found.append((module, cls))
        if not cls.bases:
            return found, True
        if len(cls.bases) != 1 or not isinstance(cls.bases[0], ast.Name):
            return found, False
        entry = _where_defined(module, cls.bases[0].id)
        if entry is None:
            return found, False
        module, name = entry
    return found, False


@functools.lru_cache(maxsize=32)
def init_signature(target: str) -> SourceSignature | None:
    """``package.module:Class``'s ``__init__`` (its own, or the nearest base's), read from source; None where the
    source is not there or not followed (then the caller imports the class)."""
    for module, cls in _lineage(target, across_packages=False)[0]:
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None:
            return _signature(module, init)
    return None


def class_lineage(target: str) -> list[str] | None:
    """``package.module:Class`` and its bases, each as ``module:Class`` where it is defined, read from source;
    None where the walk did not reach a class without bases (then the caller imports the class)."""
    classes, complete = _lineage(target, across_packages=True)
    return [f"{module}:{cls.name}" for module, cls in classes] if complete else None


def _where_defined(module: str, name: str) -> tuple[str, str] | None:
    """(module, name) a base class's name refers to, where it is defined in Python source."""
    tree = _parsed(module)
    for node in tree.body if tree else []:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, name
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _absolute(module, node), alias.name
    return None


def _signature(module: str, init: ast.FunctionDef) -> SourceSignature:
    args = init.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params, hints = {}, {}
    kinds = [(a, d, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a, d in zip(positional, defaults)]
    kinds += [(a, d, inspect.Parameter.KEYWORD_ONLY) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    for arg, default, kind in kinds:
        if arg.arg == "self":
            continue
        params[arg.arg] = inspect.Parameter(arg.arg, kind, default=inspect.Parameter.empty if default is None
                                            else ast.unparse(default))
        if arg.annotation is not None:
            hints[arg.arg] = evaluate(module, arg.annotation)
    if args.vararg is not None:
        params[args.vararg.arg] = inspect.Parameter(args.vararg.arg, inspect.Parameter.VAR_POSITIONAL)
    if args.kwarg is not None:
        params[args.kwarg.arg] = inspect.Parameter(args.kwarg.arg, inspect.Parameter.VAR_KEYWORD)
    return SourceSignature(params, hints, args.kwarg is not None)
