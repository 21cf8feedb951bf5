"""Recipes: find, load, merge overrides, validate. Every user mistake is a `UserError` that says
what is wrong, where (recipe file, key) and the closest valid choice.

A recipe is a YAML file under ``recipes/`` (any depth; the file stem is its name) or a path.
Overrides are OmegaConf dotlist items ``key=value`` (``trainer.max_epochs=3 model.attention=hard``).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from zoo.errors import UserError
from zoo.registry import closest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
LOGGERS = ("csv", "wandb", "tensorboard")


@dataclass
class CheckpointConfig:
    every_n_train_steps: Optional[int] = None  # also save last.ckpt every N steps (None: epoch ends only)
    every_n_epochs: int = 1  # save at the end of every N-th epoch
    save_top_k: int = 1  # how many "best" checkpoints to keep, by the model's monitored metric
    monitor: Optional[str] = None  # metric for "best"; None = the model's own (e.g. val/loss)
    mode: Optional[str] = None  # "min" or "max"; None = the model's own


@dataclass
class WandbConfig:
    project: str = "zoo"  # W&B project
    entity: Optional[str] = None  # W&B team or user; None = your default
    mode: Optional[str] = None  # online | offline | disabled; None = online if logged in, else offline
    log_model: bool = True  # upload checkpoints as artifacts (online only)
    tags: list = field(default_factory=list)  # run tags


@dataclass
class RunConfig:
    description: str = ""  # one line, shown by --list
    model: Any = None  # {name: <registered model or pkg.mod:Class>, ...its options}
    data: Any = None  # {name: <registered datamodule or pkg.mod:Class>, ...its options}
    trainer: Any = field(default_factory=dict)  # keyword arguments of lightning.Trainer
    seed: int = 0  # seeds python, numpy and torch (and dataloader workers)
    threads: int = 0  # torch intra-op CPU threads; 0 = torch's default (one per core)
    logger: Any = field(default_factory=lambda: ["csv"])  # any of csv, wandb, tensorboard
    wandb: WandbConfig = field(default_factory=WandbConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    callbacks: Any = field(default_factory=list)  # e.g. [{name: grad_variance, every_n_steps: 50}]
    run_dir: str = "runs"  # runs are written to <run_dir>/<recipe>/<timestamp>/
    ckpt_path: Optional[str] = None  # resume: "last" (latest run of this recipe) or a .ckpt path
    test_after_fit: bool = True  # run the test split after training and write metrics.json
    print_config: bool = False  # print the resolved config and exit
    recipe: str = ""  # filled in: the recipe's name


def recipe_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("ZOO_RECIPES", "").split(os.pathsep) if p]
    dirs += [Path.cwd() / "recipes", PACKAGE_ROOT / "recipes"]
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
    for line in path.read_text().splitlines():
        if line.startswith("description:"):
            return line.split(":", 1)[1].strip().strip("\"'")
    return ""


def find_recipe(name: str) -> Path:
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise UserError(f"recipe file not found: {path}")
        return path
    recipes = all_recipes()
    if name not in recipes:
        raise UserError(f"unknown recipe '{name}'{closest(name, list(recipes))}. "
                        "See `python -m zoo.train --list`.")
    return recipes[name]


def load_yaml(path: Path) -> Any:
    import yaml
    from omegaconf import OmegaConf

    try:
        return OmegaConf.load(path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"YAML syntax error in {path}{where}: {problem}") from None


def parse_overrides(items: list[str]) -> Any:
    from omegaconf import OmegaConf

    for item in items:
        key = item.split("=", 1)[0]
        if "=" not in item or not key or key.strip() != key:
            raise UserError(f"malformed override '{item}': write key=value, e.g. trainer.max_epochs=3")
    try:
        return OmegaConf.from_dotlist(items)
    except Exception as err:  # omegaconf's grammar errors
        raise UserError(f"malformed override in {items}: {str(err).splitlines()[0]}") from None


def validate_options(schema: type, options: dict, where: str) -> dict:
    """Check ``options`` against the dataclass ``schema``: known keys, types, choices
    (``field(metadata={"choices": [...]})``) and the schema's own ``__post_init__`` checks."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    names = [f.name for f in dataclasses.fields(schema)]
    for key in options:
        if key not in names:
            raise UserError(f"unknown key '{key}' in {where}{closest(key, names)}. Valid keys: {', '.join(names)}")
    # an estimator spec replaces the default one instead of merging into it (its own options differ)
    specs = {f.name: options[f.name] for f in dataclasses.fields(schema)
             if f.metadata.get("estimator") and f.name in options}
    options = {k: v for k, v in options.items() if k not in specs}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), options)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or ""
        msg = str(err).splitlines()[0]
        raise UserError(f"bad value for '{key}' in {where}: {msg}") from None
    plain = OmegaConf.to_container(merged, resolve=True)
    for key, value in specs.items():
        plain[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    for f in dataclasses.fields(schema):
        choices = f.metadata.get("choices")
        if choices is not None and plain[f.name] not in choices:
            raise UserError(f"'{f.name}' in {where} must be one of {list(choices)}, got {plain[f.name]!r}"
                            f"{closest(str(plain[f.name]), [str(c) for c in choices])}")
    try:
        schema(**plain)
    except (ValueError, TypeError) as err:
        raise UserError(f"invalid options in {where}: {err}") from None
    return plain


def _section(raw: dict, key: str, registry: Any, where: str) -> dict:
    section = raw.get(key)
    if not isinstance(section, dict) or "name" not in section:
        raise UserError(f"{where} needs a '{key}:' section with a 'name' "
                        f"(known: {', '.join(registry.list())})")
    options = {k: v for k, v in section.items() if k != "name"}
    entry = registry.entry(section["name"])
    if entry.config is not None:
        options = validate_options(entry.config, options, f"{where} [{key}: {section['name']}]")
    check_stochastic_node(entry.obj, options, f"{where} [{key}: {section['name']}]")
    return {"name": section["name"], **options}


def check_stochastic_node(model_cls: Any, options: dict, where: str) -> None:
    """A model's estimator option against its declared stochastic node (name, options, fit)."""
    node = getattr(model_cls, "stochastic_node", None)
    if node is None or not node.active(options):
        return
    from zoo.estimators.seam import check_spec

    spec = options.get(node.option)
    if spec is None:
        spec = getattr(model_cls.Config(), node.option)  # the model's default
    check_spec(spec, node, options, f"{where} [{node.option}]", model=getattr(model_cls, "__name__", "model"))


def load_config(recipe: str, overrides: list[str] | None = None) -> dict:
    """Recipe name/path + overrides -> a validated plain dict (see `RunConfig`)."""
    from omegaconf import OmegaConf

    from zoo.models import import_all
    from zoo.registry import DATAMODULES, MODELS

    path = find_recipe(recipe)
    where = f"recipe {path}"
    raw = load_yaml(path)
    parsed = parse_overrides(overrides or [])
    merged = OmegaConf.merge(raw, parsed)
    # `model.estimator={name: rloo, n: 4}` replaces the recipe's estimator instead of merging into
    # it: a mapping with a `name` picks a new thing, whose options must not mix with the old one's.
    for item in overrides or []:
        key = item.split("=", 1)[0]
        value = OmegaConf.select(parsed, key)
        if OmegaConf.is_dict(value) and "name" in value:
            OmegaConf.update(merged, key, value, merge=False)
    try:
        raw = OmegaConf.to_container(merged, resolve=True)
    except Exception as err:
        raise UserError(f"cannot resolve {where}: {str(err).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a YAML mapping of keys to values")
    top_schema = {f.name: f for f in dataclasses.fields(RunConfig)}
    for key in raw:
        if key not in top_schema:
            raise UserError(f"unknown key '{key}' in {where}{closest(key, list(top_schema))}. "
                            f"Valid top-level keys: {', '.join(top_schema)}")
    import_all()
    cfg = {k: v for k, v in raw.items() if k not in ("model", "data", "trainer", "wandb", "checkpoint")}
    cfg = validate_options(RunConfig, cfg, where)
    cfg["model"] = _section(raw, "model", MODELS, where)
    cfg["data"] = _section(raw, "data", DATAMODULES, where)
    cfg["wandb"] = validate_options(WandbConfig, raw.get("wandb") or {}, f"{where} [wandb]")
    cfg["checkpoint"] = validate_options(CheckpointConfig, raw.get("checkpoint") or {}, f"{where} [checkpoint]")
    cfg["trainer"] = _trainer_options(raw.get("trainer") or {}, where)
    loggers = cfg["logger"] if isinstance(cfg["logger"], list) else [cfg["logger"]]
    for name in loggers:
        if name not in LOGGERS:
            raise UserError(f"unknown logger '{name}' in {where}{closest(str(name), list(LOGGERS))}. "
                            f"Choose from {', '.join(LOGGERS)}")
    cfg["logger"] = loggers
    cfg["recipe"] = cfg["recipe"] or path.stem
    return cfg


RESERVED_TRAINER_KEYS = ("logger", "callbacks", "plugins", "default_root_dir", "enable_checkpointing")


def _trainer_options(options: dict, where: str) -> dict:
    import lightning as L

    if not isinstance(options, dict):
        raise UserError(f"'trainer' in {where} must be a mapping of lightning.Trainer arguments")
    valid = [p for p in inspect.signature(L.Trainer.__init__).parameters if p != "self"]
    for key in options:
        if key in RESERVED_TRAINER_KEYS:
            raise UserError(f"'trainer.{key}' is set by the zoo; use the top-level 'logger', "
                            "'callbacks', 'checkpoint' or 'run_dir' keys instead")
        if key not in valid:
            raise UserError(f"unknown key 'trainer.{key}' in {where}{closest(key, valid)}: "
                            "the trainer section takes lightning.Trainer arguments")
    return dict(options)


def to_yaml(cfg: dict) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(cfg))
