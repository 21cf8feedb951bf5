"""Recipes: find, load, merge overrides, validate. Every user mistake is a `UserError` that says
what is wrong, where (recipe file, key) and the closest valid choice.

A recipe is a YAML file under ``recipes/`` (any depth; the file stem is its name) or a path.
Overrides are OmegaConf dotlist items ``key=value`` (``trainer.max_epochs=3 model.attention=hard``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from zoo.errors import UserError
from zoo.options import INTERPOLATION_SYNTAX, SEED_MAX, at_least, between, choice, positive
from zoo.options import validate as validate_options
from zoo.precheck import check_sections_early
from zoo.registry import closest
from zoo.trainer_options import check_trainer_options, check_validation_and_test

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
LOGGERS = ("csv", "wandb", "tensorboard")
WANDB_MODES = ("online", "offline", "disabled", "shared")
WANDB_PROJECT_FORBIDDEN = "/\\#?%:"  # characters W&B refuses in a project name
@dataclass
class CheckpointConfig:
    every_n_train_steps: Optional[int] = None  # also save last.ckpt every N steps (None: epoch ends only)
    every_n_epochs: int = positive(1)  # save at the end of every N-th epoch (0 saved no checkpoint, not even
    # last.ckpt: the finished run could be neither evaluated nor resumed)
    save_top_k: int = at_least(1, -1)  # how many "best" checkpoints to keep, by the model's monitored metric
    monitor: Optional[str] = None  # metric for "best"; None = the model's own (e.g. val/loss)
    mode: Optional[str] = choice(None, [None, "min", "max"])  # None = the model's own


@dataclass
class WandbConfig:
    project: str = "zoo"  # W&B project
    entity: Optional[str] = None  # W&B team or user; None = your default
    mode: Optional[str] = choice(None, [None, *WANDB_MODES])  # None = online if logged in, else offline
    log_model: bool = True  # upload checkpoints as artifacts (online only)
    tags: list[str] = field(default_factory=list)  # run tags

    def __post_init__(self):  # W&B's own rules, which it enforced only once the run had started (a traceback)
        bad = sorted(set(WANDB_PROJECT_FORBIDDEN) & set(self.project))
        if not 1 <= len(self.project) <= 128 or bad:
            why = f"contains {' '.join(bad)}" if bad else f"has {len(self.project)} characters"
            raise ValueError(f"wandb.project={self.project!r} {why}: W&B takes 1 to 128 characters, none of "
                             f"{' '.join(WANDB_PROJECT_FORBIDDEN)} (e.g. wandb.project=my-project)")
        for tag in self.tags:
            if not 1 <= len(tag) <= 64:
                raise ValueError(f"wandb.tags holds {tag[:20] + '...' if len(tag) > 20 else tag!r} of {len(tag)} "
                                 "characters: W&B takes tags of 1 to 64 characters")


MATMUL_PRECISIONS = ("highest", "high", "medium")  # torch.set_float32_matmul_precision's levels


@dataclass
class RunConfig:
    description: str = ""  # one line, shown by --list
    model: Any = None  # {name: <registered model or pkg.mod:Class>, ...its options}
    data: Any = None  # {name: <registered datamodule or pkg.mod:Class>, ...its options}
    trainer: Any = field(default_factory=dict)  # keyword arguments of lightning.Trainer
    seed: int = between(0, 0, SEED_MAX)  # seeds python, numpy and torch (and dataloader workers)
    threads: int = 0  # torch intra-op CPU threads; 0 = torch's default (one per core)
    # float32 arithmetic on a CUDA GPU: None = torch's defaults (matrix products in full float32, cuDNN
    # convolutions in TF32); highest = both in full float32 (nearest the CPU's numbers); high / medium =
    # both with TF32 / bf16 inside (faster from Ampere on; Lightning's tip names this setting)
    matmul_precision: Optional[str] = choice(None, [None, *MATMUL_PRECISIONS])
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
        if path.is_dir():  # said "recipe file not found" of a folder that is there
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


MAX_RECIPE_VALUES = 10_000  # keys and values of a recipe once its aliases are expanded (OmegaConf 2.4's own limit)


def expanded_size(node: Any, seen: dict | None = None) -> int:
    """How many YAML nodes a composed document holds once every alias is expanded; each node is counted
    once however often it is referred to, so a "billion laughs" is measured in microseconds."""
    import yaml

    seen = {} if seen is None else seen
    if node is None:
        return 0
    if id(node) not in seen:
        children = ([part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        seen[id(node)] = 1 + sum(expanded_size(child, seen) for child in children)
    return seen[id(node)]


def load_yaml(path: Path) -> Any:
    import io

    import yaml
    from omegaconf import OmegaConf

    try:
        text = path.read_text(encoding="utf-8")  # read once: the size check and OmegaConf see the same text
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":str") and node.value.strip():  # OmegaConf: a key
            raise UserError(f"recipe {path} must be a YAML mapping of keys to values (model:, data:, trainer:, ...); "
                            f"its top level is a single value ({node.value[:40]!r})")
        size = expanded_size(node)
        if size > MAX_RECIPE_VALUES:  # OmegaConf 2.3 built every copy (2.4 stops at 10,000 with its own message)
            raise UserError(f"recipe {path}: its YAML aliases (*name) expand to {size:,} values, more than the "
                            f"{MAX_RECIPE_VALUES:,} a recipe may hold (an alias bomb?): write the values out, or "
                            "nest fewer aliases")
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
        raise UserError(f"recipe {path} must be a YAML mapping of keys to values (model:, data:, trainer:, ...); "
                        f"its top level is a single value ({str(err).rsplit(' ', 1)[-1]})") from None


def named_keys(cfg: Any, prefix: str = "") -> list[str]:
    """Dotted keys of the mappings with a ``name`` (a model, datamodule, estimator, ...) in ``cfg``."""
    out = []
    if isinstance(cfg, dict):
        for key, value in cfg.items():
            if isinstance(value, dict) and "name" in value:
                out.append(f"{prefix}{key}")
            out += named_keys(value, f"{prefix}{key}.")
    return out


def merge_replacing(base: Any, top: Any) -> Any:
    """OmegaConf.merge, except that a mapping with a ``name`` in ``top`` replaces the one in ``base``
    instead of merging into it: it picks a new thing, whose options must not mix with the old one's
    (``model.estimator={name: rloo, n: 4}`` over a gumbel_softmax with tau)."""
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(base, top)
    for key in named_keys(OmegaConf.to_container(top)):
        OmegaConf.update(merged, key, OmegaConf.select(top, key), merge=False)
    return merged


def load_recipe(path: Path, chain: tuple = ()) -> Any:
    """A recipe file as a mapping, with its ``base:`` recipe (a name or a path relative to it)
    merged underneath: a variant holds only what differs from its base."""
    from omegaconf import OmegaConf

    raw = load_yaml(path)
    if not OmegaConf.is_dict(raw):
        kind = "list" if OmegaConf.is_list(raw) else type(raw).__name__
        raise UserError(f"recipe {path} must be a YAML mapping of keys to values (model:, data:, trainer:, ...); "
                        f"its top level is a {kind}")
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
        raise UserError(f"'base: {base}' in recipe {path}: {err}") from None
    if base_path.resolve() in chain or base_path.resolve() == path.resolve():
        names = " -> ".join(p.stem for p in (*chain, path.resolve(), base_path.resolve()))
        raise UserError(f"recipe {path}: 'base' recipes form a cycle ({names})")
    return merge_replacing(load_recipe(base_path, (*chain, path.resolve())), raw)


def parse_overrides(items: list[str]) -> Any:
    from zoo.options import parse_dotlist

    return parse_dotlist(items)


def repeated_overrides(overrides: list[str]) -> list[str]:
    """Notes for a key given more than once with different values (``model.lr=1e-3 model.lr=1e-2``): the
    last one wins, as in a shell, and the note says which."""
    given: dict[str, list[str]] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        given.setdefault(key, []).append(value)
    return [f"{key} given {'twice' if len(values) == 2 else f'{len(values)} times'}; using {key}={values[-1]} "
            "(the last)" for key, values in given.items() if len(set(values)) > 1]


def _section(raw: dict, key: str, registry: Any, where: str) -> dict:
    section = raw.get(key)
    if isinstance(section, str) and section:  # model=vae on the command line: a section given a name alone
        raise UserError(f"'{key}: {section}' in {where}: {key} is a section of options; its name is given as "
                        f"{key}.name={section} (known: {', '.join(registry.list())})")
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


# Lightning's short forms of trainer.precision
PRECISION_ALIASES = {"64": "64-true", "32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed"}


def check_precision(model_cls: Any, precision: Any, where: str) -> None:
    """``trainer.precision`` against the model's ``precisions``: pure float16 / bfloat16 weights
    (``16-true``, ``bf16-true``) overflow log-likelihoods or meet float32 tables and crash in fit."""
    if precision is None:
        return
    unified = PRECISION_ALIASES.get(str(precision), str(precision))
    allowed = getattr(model_cls, "precisions", None)
    if allowed and unified not in allowed:
        model = getattr(model_cls, "__name__", "the model")
        raise UserError(f"trainer.precision={precision} is not supported by {model} in {where}; use one of "
                        f"{', '.join(allowed)} (the *-mixed ones keep float32 weights)")


def load_config(recipe: str, overrides: list[str] | None = None) -> dict:
    """Recipe name/path + overrides -> a validated plain dict (see `RunConfig`)."""
    from omegaconf import OmegaConf

    from zoo.models import import_all
    from zoo.registry import DATAMODULES, MODELS

    path = find_recipe(recipe)
    where = f"recipe {path}"
    raw = load_recipe(path)
    parsed = parse_overrides(overrides or [])
    try:
        merged = merge_replacing(raw, parsed)
    except UserError:
        raise
    except Exception as err:  # e.g. a value where the recipe has a section
        raise UserError(f"cannot apply the overrides {overrides} to {where}: {str(err).splitlines()[0]}") from None
    try:
        raw = OmegaConf.to_container(merged, resolve=True)
    except Exception as err:
        key = getattr(err, "full_key", None)
        raise UserError(f"cannot resolve {where}{f' at {key}' if key else ''}: {str(err).splitlines()[0]}"
                        f"{_environment_hint(err) or _interpolation_hint(err)}") from None
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a YAML mapping of keys to values")
    top_schema = {f.name: f for f in dataclasses.fields(RunConfig)}
    for key in raw:
        if key not in top_schema:
            sections = [s for s in ("trainer", "model", "data") if isinstance(raw.get(s), dict) and key in raw[s]]
            hint = f" (did you mean {sections[0]}.{key}?)" if sections else closest(key, list(top_schema))
            raise UserError(f"unknown key '{key}' in {where}{hint}. Valid top-level keys: {', '.join(top_schema)}")
    check_sections_early(raw, where)  # mistyped keys and estimators, before torch is imported
    from zoo.callbacks.named import check_callbacks

    import_all()
    check_callbacks(raw.get("callbacks", []), where)
    cfg = {k: v for k, v in raw.items() if k not in ("model", "data", "trainer", "wandb", "checkpoint")}
    cfg = validate_options(RunConfig, cfg, where)
    cfg["model"] = _section(raw, "model", MODELS, where)
    cfg["data"] = _section(raw, "data", DATAMODULES, where)
    cfg["wandb"] = validate_options(WandbConfig, _mapping(raw, "wandb", where), f"{where} [wandb]")
    cfg["checkpoint"] = validate_options(CheckpointConfig, _mapping(raw, "checkpoint", where), f"{where} [checkpoint]")
    cfg["trainer"] = check_trainer_options(raw.get("trainer") or {}, where)
    model_cls = MODELS.entry(cfg["model"]["name"]).obj
    check_precision(model_cls, cfg["trainer"].get("precision"), where)
    check_run = getattr(model_cls, "check_run", None)  # a model's own checks of the run's settings together
    if check_run is not None:  # (a plain LightningModule named by dotted path has none: AttributeError)
        check_run(cfg)
    run_monitor = getattr(model_cls, "run_monitor", None)  # a plain LightningModule (a dotted path) has none
    check_validation_and_test(cfg, run_monitor(cfg) if run_monitor is not None else None)
    loggers = cfg["logger"] if isinstance(cfg["logger"], list) else [cfg["logger"]]
    for name in loggers:
        if name not in LOGGERS:
            raise UserError(f"unknown logger '{name}' in {where}{closest(str(name), list(LOGGERS))}. "
                            f"Choose from {', '.join(LOGGERS)}, or none: logger=[]")
    twice = sorted({name for name in loggers if loggers.count(name) > 1})
    if twice:  # two csv loggers wrote every row of metrics.csv twice
        raise UserError(f"logger lists {', '.join(twice)} more than once in {where}: list each logger once, "
                        f"e.g. logger=[{','.join(dict.fromkeys(loggers))}]")
    if "wandb" in loggers and cfg["wandb"]["mode"] is None:
        check_wandb_environment()
    cfg["logger"] = loggers
    cfg["recipe"] = cfg["recipe"] or path.stem
    return cfg


def check_wandb_environment() -> None:
    """WANDB_MODE, which decides the W&B mode when wandb.mode is not given: W&B refused a wrong one only
    once the run had started (a traceback, and a run folder left behind)."""
    mode = os.environ.get("WANDB_MODE")
    if mode and mode not in (*WANDB_MODES, "dryrun", "run"):
        raise UserError(f"the environment variable WANDB_MODE={mode!r} is not a W&B mode: unset it, or set it (or "
                        f"wandb.mode=) to one of {', '.join(WANDB_MODES)}")


def _environment_hint(err: Exception) -> str:
    """``${HOME}`` is OmegaConf's interpolation of a key named HOME, not the environment variable."""
    import re

    found = re.search(r"Interpolation key '(\w+)' not found", str(err))
    if found is None or not (found.group(1) in os.environ or found.group(1).isupper()):
        return ""
    return f" (an environment variable is written ${{oc.env:{found.group(1)}}})"


def _interpolation_hint(err: Exception) -> str:
    """How to write the ``${...}`` OmegaConf could not resolve (its own messages name only what failed)."""
    import re

    text = str(err)
    unset = re.search(r"Environment variable '(\w+)' not found", text)
    if unset:
        return (f" (set the environment variable {unset.group(1)}, or give a default: "
                f"${{oc.env:{unset.group(1)},DEFAULT}})")
    if "Recursive interpolation" in text:
        return " (it refers back to itself through ${...}: give one of the keys in the loop a value)"
    if "Interpolation key" in text:
        return " (${...} names another key of the recipe by its full dotted path, e.g. ${data.batch_size})"
    if "Unsupported interpolation type" in text:
        return " (the resolvers are oc.env, oc.decode, oc.select, oc.create; a literal '${' is written '\\${')"
    if "GrammarParseError" in type(err).__name__ or "GrammarParseError" in text:
        return f" {INTERPOLATION_SYNTAX}"
    return ""


def _mapping(raw: dict, key: str, where: str) -> dict:
    """A section of keys (``wandb:``, ``checkpoint:``); absent or null means its defaults."""
    section = raw.get(key)
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise UserError(f"'{key}' in {where} must be a mapping of its options ({key}.KEY=VALUE), got {section!r}")
    return section


def to_yaml(cfg: dict) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.create(cfg))
