"""The checks of a recipe that need no torch, run before ``zoo.config.load_config`` imports the models
(torch and Lightning: ~4 s): trainer keys (against Lightning's source), the model and data keys of the
zoo's own models (declared in their torch-free ``config.py``), and their estimators' names and options
(``zoo/estimators/options.py``). A mistyped key is refused in a fraction of a second; ``load_config``
checks everything again, with the classes, afterwards, with the same messages."""

from __future__ import annotations

import dataclasses

from zoo.errors import UserError
from zoo.estimators.options import split_spec
from zoo.options import validate as validate_options
from zoo.registry import DATAMODULES, ESTIMATORS, MODELS, unknown_entry
from zoo.trainer_options import check_trainer_keys_early


def check_sections_early(raw: dict, where: str) -> None:
    """The trainer keys (against Lightning's source), and the model and data keys of the zoo's own models
    against their option dataclasses, which import no torch (``Registry.builtin_config``): a mistyped
    key is refused in a fraction of a second instead of after torch and Lightning are imported (~4 s).
    Everything is checked again, with the classes, afterwards."""
    check_trainer_keys_early(raw.get("trainer") or {}, where)
    for key, registry in (("model", MODELS), ("data", DATAMODULES)):
        section = raw.get(key)
        schema = registry.builtin_config(section["name"]) if isinstance(section, dict) and isinstance(
            section.get("name"), str) else None
        if schema is not None:
            options = {k: v for k, v in section.items() if k != "name"}
            at = f"{where} [{key}: {section['name']}]"
            validate_options(schema, options, at)
            check_estimators_early(schema, options, at)


def check_estimators_early(schema: type, options: dict, where: str) -> None:
    """Each estimator option of a model (``estimator_option`` fields): the name and the options of a
    built-in estimator, against ``zoo.estimators.options`` (no torch), with the messages the registry
    and ``build_options`` give. Names the zoo does not ship (a dotted path, a plugin, one registered in
    this process) are left to ``check_stochastic_node``, as is the fit to the model's node."""
    for f in dataclasses.fields(schema):
        if not f.metadata.get("estimator") or f.name not in options:
            continue
        name, estimator_options = split_spec(options[f.name], f"{where} [{f.name}]")
        schema = ESTIMATORS.builtin_config(name)
        if schema is not None:
            validate_options(schema, estimator_options, f"estimator '{name}'", what="option")
            continue
        if not ESTIMATORS.known_without_builtins(name):
            known = set(ESTIMATORS.declared()) | ESTIMATORS.plugin_names()
            raise UserError(unknown_entry("estimator", name, sorted(known)))
