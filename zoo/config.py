"""A run's config: a recipe (``zoo.recipe_files``) and its overrides (``zoo.overrides``), validated against
``RunConfig`` and the model's, datamodule's, estimator's and trainer's options, and the metrics it watches
(``zoo.monitoring``). Every user mistake is a `UserError` that says what is wrong, where (recipe file, key)
and the closest valid choice.

Overrides are OmegaConf dotlist items ``key=value`` (``trainer.max_epochs=3 model.attention=hard``).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import OmegaConf

from zoo.callbacks.named import check_callbacks
from zoo.errors import UserError
from zoo.estimators.seam import check_spec, keep_checked
from zoo.monitoring import check_validation_and_test
from zoo.overrides import parse_overrides
from zoo.recipe_files import find_recipe, load_recipe, merge_replacing
from zoo.registry import DATAMODULES, MODELS, closest
from zoo.schema import INTERPOLATION_SYNTAX, SEED_MAX, at_least, between, choice, freeze, positive, thaw
from zoo.schema import validate as validate_options
from zoo.trainer_schema import check_trainer_options, trainer_arguments

LOGGERS = ("csv", "wandb", "tensorboard")
WANDB_MODES = ("online", "offline", "disabled", "shared")
WANDB_PROJECT_FORBIDDEN = "/\\#?%:"  # characters W&B refuses in a project name


@dataclass
class CheckpointConfig:
    every_n_train_steps: Optional[int] = None  # also save last.ckpt every N steps (None: epoch ends only)
    every_n_epochs: int = positive(1)  # save at the end of every N-th epoch (0 would leave no last.ckpt)
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

    def __post_init__(self):  # W&B's own rules, which W&B checks only once the run has started
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
    # float32 on a CUDA GPU: None = torch's defaults (full float32 matmuls, TF32 cuDNN convolutions); highest =
    # both in full float32 (nearest the CPU's numbers); high / medium = TF32 / bf16 inside (faster from Ampere on)
    matmul_precision: Optional[str] = choice(None, [None, *MATMUL_PRECISIONS])
    # torch.compile the model's nets in place (their state_dict keys unchanged; the model's spec names them, or why
    # it refuses): false, true, or a mapping of torch.compile's options {mode, backend, fullgraph, dynamic, options}
    compile: Any = False
    logger: Any = field(default_factory=lambda: ["csv"])  # any of csv, wandb, tensorboard
    wandb: WandbConfig = field(default_factory=WandbConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    callbacks: Any = field(default_factory=list)  # e.g. [{name: grad_variance, every_n_steps: 50}]
    run_dir: str = "runs"  # runs are written to <run_dir>/<recipe>/<timestamp>/
    ckpt_path: Optional[str] = None  # resume: "last" (latest run of this recipe) or a .ckpt path
    test_after_fit: bool = True  # run the test split after training and write metrics.json
    print_config: bool = False  # print the resolved config and exit
    recipe: str = ""  # filled in: the recipe's name


@dataclass(frozen=True)
class LoadedRun:
    """A recipe and its overrides, checked (``load_config``): the one object a run reads from the recipe to its
    fitted Trainer. ``run[KEY]`` and ``run.get(KEY)`` read ``settings``."""

    settings: dict  # the resolved recipe, read-only (a FrozenDict of RunConfig's keys, each section as validated):
    # what config.yaml, the checkpoints and the loggers hold (thaw gives plain dicts)
    model_options: Any  # the model's constructor argument: the model: section as its options dataclass (the
    # estimator's check kept on it, keep_checked); a dict of the section's options for a class without one
    data_options: Any  # the datamodule's constructor argument, likewise from the data: section
    monitor: Optional[tuple[str, str]]  # (metric, mode) the model watches, stated before it is built
    # (run_monitor); None: not stated (a class named by dotted path), the built model's own then

    def __getitem__(self, key: str) -> Any:
        return self.settings[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)


def _section(raw: dict, key: str, registry: Any, where: str) -> tuple[dict, Any]:
    """The ``model:`` or ``data:`` section, validated once against its options dataclass (the zoo's own: from
    its declaration, no torch; a plugin's or a dotted path's: its class, imported now), and a model's
    estimator against the stochastic node its options give, its result kept on the options object for the model
    (``keep_checked``): (the section as a plain dict, the options object; None for a class without an options
    dataclass)."""
    section = raw.get(key)
    if isinstance(section, str) and section:  # model=vae on the command line: a section given a name alone
        raise UserError(f"'{key}: {section}' in {where}: {key} is a section of options; its name is given as "
                        f"{key}.name={section} (known: {', '.join(registry.list())})")
    if not isinstance(section, dict) or "name" not in section:
        raise UserError(f"{where} needs a '{key}:' section with a 'name' "
                        f"(known: {', '.join(registry.list())})")
    options = {k: v for k, v in section.items() if k != "name"}
    at = f"{where} [{key}: {section['name']}]"
    entry = registry.entry(section["name"])
    validated = None
    if entry.config is not None:
        options, validated = validate_options(entry.config, options, at, instance=True)
    return {"name": section["name"], **options}, validated


def known_data_info(name: str, options: Any) -> dict | None:
    """What the data's validated ``options`` state of the data info before any data are read (a data module's
    ``known_info``, e.g. the oracle's vocabulary size), else None."""
    known = DATAMODULES.spec(name).known_info if options is not None else None
    return known(options) if callable(known) else None


def check_stochastic_node(registry: Any, name: str, cfg: Any, where: str, data_info: dict | None = None) -> None:
    """A model's estimator option (its validated options ``cfg``) against the stochastic node those options give
    (its spec's ``node``: the zoo's own models, no torch), given what the data's options state of the data
    (``known_data_info``). The node's sizes that come from the data alone (context_dim, ...) do not decide the
    fit; the model fills them in."""
    spec = registry.spec(name)
    state, model = spec.node, spec.class_name
    if state is None:  # a plain LightningModule named by dotted path has none
        return
    node = state(cfg, data_info) if data_info else state(cfg)
    if node is None:  # the options leave nothing to sample
        return
    spec = cfg.estimator if cfg.estimator is not None else type(cfg)().estimator
    keep_checked(cfg, spec, check_spec(spec, node, f"{where} [estimator]", model=model))


# torch.compile's options the key `compile` takes (the rest of its keywords concern other callers), and its modes
COMPILE_OPTIONS = ("mode", "backend", "fullgraph", "dynamic", "options")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_options(value: Any) -> dict | None:
    """The keyword arguments of ``nn.Module.compile`` that a checked ``compile`` value gives, None for false."""
    if value is False:
        return None
    return {} if value is True else dict(value)


def check_compile(model: str, value: Any, where: str) -> None:
    """The key ``compile`` (false, true or a mapping of ``COMPILE_OPTIONS``), and the model's own word on it (its
    spec's ``compiled``: the submodules compiled, or why it refuses), before torch is imported. The backend's name
    is checked against torch's list once torch is (``zoo.core.compiling``)."""
    example = "compile=true or compile={mode: max-autotune}"
    if isinstance(value, str) and value in COMPILE_MODES:
        raise UserError(f"compile={value} in {where}: a mode is given as an option, compile={{mode: {value}}}")
    if not isinstance(value, (bool, dict)):
        raise UserError(f"compile={value!r} in {where} must be true, false or a mapping of torch.compile's options "
                        f"({', '.join(COMPILE_OPTIONS)}), e.g. {example}")
    for key, option in (value.items() if isinstance(value, dict) else ()):
        if key not in COMPILE_OPTIONS:
            raise UserError(f"unknown option '{key}' in compile in {where}{closest(str(key), list(COMPILE_OPTIONS))}: "
                            f"torch.compile's options here are {', '.join(COMPILE_OPTIONS)}")
        rule = _COMPILE_RULES[key]
        if not rule[0](option):
            raise UserError(f"compile.{key}={option!r} in {where}: {rule[1]}")
    if isinstance(value, dict) and value.get("mode") is not None and value.get("options") is not None:
        raise UserError(f"compile in {where} gives both mode and options, which torch.compile takes one at a time: "
                        "drop one of them")
    compiled = MODELS.spec(model).compiled
    if value is False or isinstance(compiled, tuple) and compiled:
        return
    why = compiled if isinstance(compiled, str) else (f"{MODELS.spec(model).class_name} names no submodules to "
                                                       "compile (a `compiled` attribute, docs/adding_a_model.md)")
    raise UserError(f"model '{model}' takes no compile: leave compile out (or compile=false)", details=[f"why: {why}"])


_COMPILE_RULES = {  # option: (test of its value, what it takes)
    "mode": (lambda v: v is None or v in COMPILE_MODES, f"mode is one of {', '.join(COMPILE_MODES)}"),
    "backend": (lambda v: isinstance(v, str) and v != "", "backend is the name of a torch.compile backend (e.g. "
                "inductor, the default, or eager, aot_eager)"),
    "fullgraph": (lambda v: isinstance(v, bool), "fullgraph is true or false"),
    "dynamic": (lambda v: v is None or isinstance(v, bool), "dynamic is true, false or null (torch decides)"),
    "options": (lambda v: isinstance(v, dict), "options is a mapping of the backend's settings, e.g. "
                "{triton.cudagraphs: false}"),
}


# Lightning's short forms of trainer.precision
PRECISION_ALIASES = {"64": "64-true", "32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed"}


def check_precision(name: str, precision: Any, where: str) -> None:
    """``trainer.precision`` against the model's ``precisions``: pure float16 / bfloat16 weights
    (``16-true``, ``bf16-true``) overflow log-likelihoods or meet float32 tables and crash in fit."""
    if precision is None:
        return
    unified = PRECISION_ALIASES.get(str(precision), str(precision))
    spec = MODELS.spec(name)
    allowed = spec.precisions
    if allowed and unified not in allowed:
        raise UserError(f"trainer.precision={precision} is not supported by {spec.class_name} in {where}; use one of "
                        f"{', '.join(allowed)} (the *-mixed ones keep float32 weights)")


def load_config(recipe: str, overrides: list[str] | None = None) -> LoadedRun:
    """Recipe name/path + overrides -> the run they describe, checked (``LoadedRun``): its settings a read-only
    tree of dicts and lists (see `RunConfig`; ``zoo.schema.FrozenDict``: a change is a TypeError, ``thaw`` gives
    plain ones), each section validated once against the declarations (no torch imported; a plugin's or a dotted
    path's class is imported), and the options objects the ``model:`` and ``data:`` sections were validated
    into, which the run's constructors take as given (``zoo.runner.build``), so a section's checks run once."""
    path = find_recipe(recipe)
    where = f"recipe {path}"
    from_file = load_recipe(path)
    parsed = parse_overrides(overrides or [])
    try:
        merged = merge_replacing(from_file, parsed)
    except UserError:
        raise
    except Exception as err:  # e.g. a value where the recipe has a section
        raise UserError(f"cannot apply the overrides {overrides} to {where}: {str(err).splitlines()[0]}") from None
    try:
        raw = OmegaConf.to_container(merged, resolve=True)
    except Exception as err:
        key = getattr(err, "full_key", None)
        hint = _environment_hint(err) or _interpolation_hint(err) or ": fix its ${...}"
        raise UserError(f"cannot resolve {key or where}{hint}", details=[
            f"OmegaConf: {str(err).splitlines()[0]}", *([f"in {where}"] if key else [])]) from None
    if not isinstance(raw, dict):
        raise UserError(f"{where} must be a YAML mapping of keys to values")
    top_schema = {f.name: f for f in dataclasses.fields(RunConfig)}
    for key in raw:
        if key not in top_schema:
            sections = [s for s in ("trainer", "model", "data") if isinstance(raw.get(s), dict) and key in raw[s]]
            if not sections and key in trainer_arguments():  # a lightning.Trainer argument, without its section
                sections = ["trainer"]
            given = [item for item in overrides or [] if item.split("=", 1)[0] == key]
            written = given[-1] if given else key  # the override as it was given, under its section
            hint = f" (did you mean {sections[0]}.{written}?)" if sections else closest(key, list(top_schema))
            raise UserError(f"unknown key '{key}' in {where}{hint}: use a valid one (below)",
                            details=[f"Valid top-level keys: {', '.join(top_schema)}"])
    trainer = check_trainer_options(raw.get("trainer") or {}, where)  # read from Lightning's source: no torch
    try:
        model, model_made = _section(raw, "model", MODELS, where)
        data, data_made = _section(raw, "data", DATAMODULES, where)
        if model_made is not None:  # the estimator against the node the model's and the data's options give
            check_stochastic_node(MODELS, model["name"], model_made, f"{where} [model: {model['name']}]",
                                  known_data_info(data["name"], data_made))
    except UserError as err:  # an option the thing an override names or refines does not have
        raise UserError(f"{err.message}{_option_hint(err.message, overrides or [], from_file, parsed)}",
                        details=err.details) from None
    callbacks = check_callbacks(raw.get("callbacks", []), where)  # (name, dotted path, options) each
    top = {k: v for k, v in raw.items() if k not in ("model", "data", "trainer", "wandb", "checkpoint")}
    top = validate_options(RunConfig, top, where)
    loggers = top["logger"] if isinstance(top["logger"], list) else [top["logger"]]
    wandb = validate_options(WandbConfig, _mapping(raw, "wandb", where), f"{where} [wandb]")
    checkpoint = validate_options(CheckpointConfig, _mapping(raw, "checkpoint", where), f"{where} [checkpoint]")
    # read-only from here on, for the checks below (a model's check_run and monitor) and whatever runs it
    cfg = freeze({**top, "model": model, "data": data, "trainer": trainer, "wandb": wandb, "checkpoint": checkpoint,
                  "logger": loggers, "recipe": top["recipe"] or path.stem})
    name = cfg["model"]["name"]
    check_precision(name, cfg["trainer"].get("precision"), where)
    check_compile(name, top["compile"], where)
    check_run = MODELS.spec(name).check_run  # a model's own checks of the run's settings together
    if check_run is not None:  # (a plain LightningModule named by dotted path has none)
        check_run(cfg)
    monitor = run_monitor(name, cfg)
    check_validation_and_test(cfg, monitor, callbacks)
    for name in loggers:
        if name not in LOGGERS:
            raise UserError(f"unknown logger '{name}' in {where}{closest(str(name), list(LOGGERS))}. "
                            f"Choose from {', '.join(LOGGERS)}, or none: logger=[]")
    twice = sorted({name for name in loggers if loggers.count(name) > 1})
    if twice:  # two csv loggers would write every row of metrics.csv twice
        raise UserError(f"logger lists {', '.join(twice)} more than once in {where}: list each logger once, "
                        f"e.g. logger=[{','.join(dict.fromkeys(loggers))}]")
    if "wandb" in loggers and cfg["wandb"]["mode"] is None:
        check_wandb_environment()
    return LoadedRun(cfg, model_options=_options(model, model_made), data_options=_options(data, data_made),
                     monitor=monitor)


def _options(section: dict, made: Any) -> Any:
    """A section's constructor argument: its options object, else (a class without an options dataclass) a plain
    dict of its options."""
    return made if made is not None else {k: v for k, v in section.items() if k != "name"}


def _option_hint(message: str, overrides: list[str], recipe: Any, parsed: Any) -> str:
    """For "unknown option 'OPT' in estimator 'NAME'" caused by an override ``X.OPT=V``: whether ``X``'s
    thing was picked on the command line (its options are its own: the recipe's do not carry over) or is the
    recipe's (refined: another is picked by naming it too)."""
    found = re.match(r"unknown option '([^']+)' in (\w+) '([^']+)'", message)
    if found is None:
        return ""
    option, kind, name = found.groups()
    for item in overrides:
        thing, _, last = item.split("=", 1)[0].rpartition(".")
        if last != option or "." not in thing:  # a model's or datamodule's own key: a typo, said as it is
            continue
        mine = OmegaConf.select(parsed, thing, default=None)
        before = OmegaConf.select(recipe, thing, default=None)
        was = before.get("name") if OmegaConf.is_dict(before) else before
        if OmegaConf.is_dict(mine) and "name" in mine:  # picked by the overrides
            if mine["name"] != name:
                continue
            article = "an" if kind[0] in "aeiou" else "a"
            namer = [i for i in overrides if i.split("=", 1)[0] in (thing, f"{thing}.name")][-1]
            carried = f" (the recipe's {was} and its options do not carry over)" if was and was != name else ""
            return f"; {namer} picks {name}{carried}: drop {item}, or pick {article} {kind} that has {option}"
        whose = f"the recipe's {kind} {was}" if was else f"the model's default {kind} {name}"
        return f"; {item} refines {whose}: to pick another {kind}, name it too ({thing}=NAME {item})"
    return ""


def run_monitor(name: str, cfg: dict) -> tuple[str, str] | None:
    """(monitor, mode) the model ``name`` built from the validated ``cfg`` will have, known before it is built
    (its declaration's ``monitor``: a pair, or a function of ``cfg``; a class's ``run_monitor``), or None where
    it depends on the data or is not stated (a plain LightningModule named by dotted path)."""
    return MODELS.spec(name).run_monitor(cfg)


def check_wandb_environment() -> None:
    """WANDB_MODE, which decides the W&B mode when wandb.mode is not given: W&B refused a wrong one only
    once the run had started (a traceback, and a run folder left behind)."""
    mode = os.environ.get("WANDB_MODE")
    if mode and mode not in (*WANDB_MODES, "dryrun", "run"):
        raise UserError(f"the environment variable WANDB_MODE={mode!r} is not a W&B mode: unset it, or set it (or "
                        f"wandb.mode=) to one of {', '.join(WANDB_MODES)}")


def _environment_hint(err: Exception) -> str:
    """``${HOME}`` is OmegaConf's interpolation of a key named HOME, not the environment variable."""
    found = re.search(r"Interpolation key '(\w+)' not found", str(err))
    if found is None or not (found.group(1) in os.environ or found.group(1).isupper()):
        return ""
    return f" (an environment variable is written ${{oc.env:{found.group(1)}}})"


def _interpolation_hint(err: Exception) -> str:
    """How to write the ``${...}`` OmegaConf could not resolve (its own messages name only what failed)."""
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
    return OmegaConf.to_yaml(OmegaConf.create(thaw(cfg)))
