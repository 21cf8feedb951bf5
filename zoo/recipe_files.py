"""Recipes as files: found by name under ``recipes/`` folders (any depth; the file stem is the name) or
given as a path, read as YAML with OmegaConf (a ``base:`` recipe merged underneath). Validation is
``zoo.config``'s."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from zoo.errors import UserError
from zoo.registry import closest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
MAX_RECIPE_VALUES = 10_000  # keys and values of a recipe once its aliases are expanded (OmegaConf 2.4's own limit)


def recipe_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("ZOO_RECIPES", "").split(os.pathsep) if p]
    # the checkout's recipes/, then those a wheel installs inside the package (setup.py maps recipes/ there)
    dirs += [Path.cwd() / "recipes", PACKAGE_ROOT / "recipes", PACKAGE_ROOT / "zoo" / "recipes"]
    out: list[Path] = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


def all_recipes() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in recipe_dirs():
        for path in sorted(d.rglob("*.yaml")):
            found.setdefault(path.stem, path)
    return found


def recipe_description(path: Path) -> str:
    # a byte-order mark skipped; a recipe in Latin-1 shows U+FFFD in its line instead of ending --list
    for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
        if line.startswith("description:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    return ""


def find_recipe(name: str) -> Path:
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        path = Path(name)
        if path.is_dir():  # a folder: not "recipe file not found"
            example = min(path.glob("*.yaml"), default=None)
            raise UserError(f"recipe {path} is a folder, not a recipe file: give a YAML file"
                            f"{f' (e.g. {example})' if example else ''} or a recipe name (python -m zoo.train --list)")
        if not path.is_file():
            raise UserError(f"recipe file not found: {path}")
        return path
    recipes = all_recipes()
    if name not in recipes:
        raise UserError(f"unknown recipe '{name}'{closest(name, list(recipes))}. "
                        "See `python -m zoo.train --list`.")
    return recipes[name]


def expanded_size(node: Any, seen: dict | None = None) -> int:
    """How many YAML nodes a composed document holds once every alias is expanded; each node is counted
    once however often it is referred to, so a "billion laughs" is measured in microseconds."""
    seen = {} if seen is None else seen
    if node is None:
        return 0
    if id(node) not in seen:
        children = ([part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        seen[id(node)] = 1 + sum(expanded_size(child, seen) for child in children)
    return seen[id(node)]


def load_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")  # read once: the size check and OmegaConf see the same text
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str") and node.value.strip():  # OmegaConf: a key
            raise not_a_mapping(path, f"a single value ({node.value[:40]!r})")
        size = expanded_size(node)
        if size > MAX_RECIPE_VALUES:  # OmegaConf 2.3 builds every copy (2.4 stops at 10,000 with its own message)
            raise UserError(f"the recipe is too large: its YAML aliases (*name) expand to {size:,} values, more "
                            f"than the {MAX_RECIPE_VALUES:,} a recipe may hold (an alias bomb?): write the values "
                            "out, or nest fewer aliases", details=[f"recipe: {path}"])
        return OmegaConf.load(io.StringIO(text))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"YAML syntax error in {path}{where}: {problem}") from None
    except UnicodeDecodeError:
        raise UserError(f"recipe {path} is not a text file (not UTF-8): give a YAML recipe") from None
    except OSError as err:  # OmegaConf refuses a scalar top level ("Invalid loaded object type: int")
        if not str(err).startswith("Invalid loaded object type"):
            raise
        raise not_a_mapping(path, f"a single value ({str(err).rsplit(' ', 1)[-1]})") from None


def not_a_mapping(path: Path, top: str) -> UserError:
    """A recipe whose top level is ``top`` (a single value, a list), not a mapping."""
    return UserError(f"a recipe must be a YAML mapping of keys to values (model:, data:, trainer:, ...); its top "
                     f"level is {top}", details=[f"recipe: {path}"])


def named_keys(cfg: Any, prefix: str = "") -> list[str]:
    """Dotted keys of the mappings with a ``name`` (a model, datamodule, estimator, ...) in ``cfg``."""
    out = []
    if isinstance(cfg, dict):
        for key, value in cfg.items():
            if isinstance(value, dict) and "name" in value:
                out.append(f"{prefix}{key}")
            out += named_keys(value, f"{prefix}{key}.")
    return out


def named_refinements(base: Any, top: Any, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, name) of the mappings without a ``name`` in ``top`` over a name alone in ``base``
    (``estimator: {n: 4}`` over ``estimator: rloo``): options of the thing ``base`` names."""
    out = []
    if isinstance(top, dict) and isinstance(base, dict):
        for key, value in top.items():
            below = base.get(key)
            if isinstance(value, dict) and "name" not in value and isinstance(below, str) and below:
                out.append((f"{prefix}{key}", below))
            else:
                out += named_refinements(below, value, f"{prefix}{key}.")
    return out


def merge_replacing(base: Any, top: Any) -> Any:
    """OmegaConf.merge, except that a mapping with a ``name`` in ``top`` replaces the one in ``base``
    instead of merging into it: it picks a new thing, whose options must not mix with the old one's
    (``model.estimator={name: rloo, n: 4}`` over a gumbel_softmax with tau); and a mapping of options
    without a ``name`` over a name alone refines the thing named (``{n: 4}`` over ``rloo``: ``{name: rloo, n: 4}``)."""
    merged = OmegaConf.merge(base, top)
    plain_top = OmegaConf.to_container(top)
    for key in named_keys(plain_top):
        OmegaConf.update(merged, key, OmegaConf.select(top, key), merge=False)
    for key, name in named_refinements(OmegaConf.to_container(base), plain_top):
        OmegaConf.update(merged, key, {"name": name, **OmegaConf.to_container(OmegaConf.select(top, key))},
                         merge=False)
    return merged


def load_recipe(path: Path, chain: tuple = ()) -> Any:
    """A recipe file as a mapping, with its ``base:`` recipe (a name or a path relative to it)
    merged underneath: a variant holds only what differs from its base."""
    raw = load_yaml(path)
    if not OmegaConf.is_dict(raw):
        kind = "list" if OmegaConf.is_list(raw) else type(raw).__name__
        raise not_a_mapping(path, f"a {kind}")
    base = raw.pop("base", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise UserError(f"'base' in recipe {path} must be a recipe name or path, got {base!r}")
    try:
        if base.endswith((".yaml", ".yml")):  # a path, relative to this recipe's folder
            base_path = path.parent / base
            if not base_path.is_file():
                raise UserError(f"recipe file not found: {base_path}")
        else:
            base_path = find_recipe(base)
    except UserError as err:  # say which recipe asked for it
        raise UserError(f"'base: {base}' in recipe {path}: {err.message}", details=err.details) from None
    if base_path.resolve() in chain or base_path.resolve() == path.resolve():
        names = " -> ".join(p.stem for p in (*chain, path.resolve(), base_path.resolve()))
        raise UserError(f"recipe {path}: 'base' recipes form a cycle ({names})")
    return merge_replacing(load_recipe(base_path, (*chain, path.resolve())), raw)

