"""The command line's ``key=value`` items (OmegaConf dotlist syntax): parsed into the nested config merged over
the recipe, a thing picked by name taken whole, YAML's glued ``key:value`` refused, a repeated key noted."""

from __future__ import annotations

import re
from typing import Any

from omegaconf import OmegaConf

from zoo.errors import UserError
from zoo.schema import parse_dotlist


def parse_overrides(items: list[str]) -> Any:
    """``key=value`` items -> the nested config merged over the recipe (``merge_replacing``). A key that names
    a thing (``X=NAME``, ``X={name: NAME, ...}``, ``X.name=NAME``) picks it whole, so the recipe's choice and
    its options do not carry over; the items ``X.OPTION=VALUE`` refine the thing named, wherever they stand
    on the command line. ``X.OPTION=VALUE`` alone refines the recipe's choice."""
    parse_dotlist(items)  # the syntax, each item on its own
    given = [(item, item.split("=", 1)[0], _value(item)) for item in items]
    for item, _, value in given:
        _check_yaml_spaces(item, value)
    picks = picked_names(given)
    ordered = [(key, {"name": value} if isinstance(value, str) else value) for key, (_, value) in picks.items()]
    ordered += [(key, value) for _, key, value in given if key not in picks]  # refinements after their pick
    out = OmegaConf.create({})
    for key, value in ordered:
        OmegaConf.update(out, key, value, merge=True)  # as OmegaConf.from_dotlist does, item by item
    return out


def _value(item: str) -> Any:
    """The value of one ``key=value`` item as OmegaConf reads it (YAML; a ``${...}`` kept as written)."""
    return OmegaConf.to_container(OmegaConf.from_dotlist([f"value={item.split('=', 1)[1]}"]))["value"]


def picked_names(given: list[tuple[str, str, Any]]) -> dict[str, tuple[str, Any]]:
    """{X: (item, value)} for each key X among the overrides ``given`` ((item, key, value) each) whose last
    value names a thing (``X=NAME`` refined by an ``X.OPTION=...`` item, or ``X={name: NAME, ...}``); a name
    that an ``X.name=...`` item contradicts is refused."""
    last = {key: (item, value) for item, key, value in given}
    picks = {}
    for key, (item, value) in last.items():
        refined = any(other.startswith(f"{key}.") for _, other, _ in given)
        if isinstance(value, dict) and "name" in value or isinstance(value, str) and value and refined:
            picks[key] = (item, value)
            name = value["name"] if isinstance(value, dict) else value
            other = last.get(f"{key}.name")
            if other is not None and other[1] != name:
                raise UserError(f"'{item}' and '{other[0]}' name two things for {key}: name one, "
                                f"e.g. {key}={other[1]}, and give its options as {key}.OPTION=VALUE")
    return picks


def _check_yaml_spaces(item: str, value: Any) -> None:
    """``{name:rloo,n:1}``: YAML reads ``name:rloo`` as one key without a value, not ``name: rloo``."""
    glued = _glued_keys(value)
    if glued:
        text = item.split("=", 1)[1]
        for key in glued:  # its first colon: the one meant to end the key (a dotted path's value keeps its own)
            text = text.replace(key, key.replace(":", ": ", 1))
        spaced = glued[0].replace(":", ": ", 1)
        mapping = next((m for m in re.findall(r"\{[^{}]*\}", text) if spaced in m), text)
        mapping = re.sub(r",(?=\S)", ", ", mapping)
        raise UserError(f"malformed override '{item}': YAML reads '{glued[0]}' as one key because no space "
                        f"follows its colon, write {mapping}")


def _glued_keys(value: Any) -> list[str]:
    """Keys of the mappings in ``value`` written ``key:value`` without a space (YAML: a key, no value)."""
    if isinstance(value, list):
        return [k for v in value for k in _glued_keys(v)]
    if not isinstance(value, dict):
        return []
    own = [k for k, v in value.items() if isinstance(k, str) and ":" in k and v is None]
    return own + [k for v in value.values() for k in _glued_keys(v)]


def repeated_overrides(overrides: list[str]) -> list[str]:
    """Notes for a key given more than once with different values (``model.lr=1e-3 model.lr=1e-2``): the
    last one wins, as in a shell, and the note says which."""
    given: dict[str, list[str]] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        given.setdefault(key, []).append(value)
    return [f"{key} given {'twice' if len(values) == 2 else f'{len(values)} times'}; using {key}={values[-1]} "
            "(the last)" for key, values in given.items() if len(set(values)) > 1]
