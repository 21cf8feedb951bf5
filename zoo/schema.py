"""One validation mechanism for every option set of the zoo, and one ``key=value`` parser.

Options are declared as dataclass fields (models, datamodules, estimators, the run config) or are
the keyword arguments of a callable (``lightning.Trainer``, callbacks). Either way a mistake is a
``UserError`` naming the key, where it was given, and the closest valid key or choice:

- ``validate(schema, options, where)``: known keys; types through OmegaConf's structured configs;
  choices (``field(metadata={"choices": [...]})`` or ``choice(...)``); ranges; then the schema's own
  ``__post_init__`` checks. Ranges: ``positive(8)`` (> 0), ``at_least(1, 2)``, ``between(0.9, 0, 1)``
  as field defaults; a number without a declared range must be >= 0 (no option of the zoo is
  negative: sizes, rates, counts, seeds) unless its default is negative (a sentinel such as -1);
  ``signed(x)`` lifts that. Every option, declared or not, also keeps within what it feeds:
  an integer within a C int (2**31 - 1), a float within float32 (the tensors' dtype), a ``seed``
  or ``*_seed`` within 0..SEED_MAX (numpy's 32-bit seeds), and ``num_workers`` / ``threads``
  within 4 x this machine's cores (more only forks processes or threads that wait).
- ``validate_call(fn, options, where, ranges=...)``: keys against the signature, types against its
  annotations (``Optional``, ``Union``, ``Literal``, ``list[int]``, classes), and optionally ranges,
  before ``fn`` is ever called.
- ``parse_kv(items)``: command-line ``key=value`` items (OmegaConf dotlist grammar) -> a flat dict
  ``{"data.root": "x", "n": 3}``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, Optional

from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from zoo.errors import UserError
from zoo.paths import expand_path
from zoo.registry import closest

# The type of a model option that names an estimator: a registry name ("reinforce"), a dotted path
# ("pkg.mod:Cls") or a mapping {name: ..., **options}. To OmegaConf it is Any (its unions hold no
# mappings); ``zoo.estimators.seam.check_spec`` checks it, name, options and fit, when the recipe loads.
EstimatorSpec = Any

NUMBER_TYPES = (int, float)
SEED_MAX = 2**32 - 1  # numpy's seeds are 32-bit: Lightning's seed_everything refuses larger ones
INT_MAX = 2**31 - 1  # a C int: sizes, counts and thread numbers go to torch and the OS as one
FLOAT_MAX = 3.4028234663852886e38  # float32's largest: rates and weights meet float32 tensors


# ---- declaring ranges and choices ---------------------------------------------------------------
def _field(default: Any, **metadata: Any) -> Any:
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def positive(default: Any) -> Any:
    """A size or count that must be > 0."""
    return _field(default, gt=0)


def at_least(default: Any, low: float, why: str | None = None) -> Any:
    """value >= low; ``why``: the reason for the bound, in its message."""
    return _field(default, ge=low, **({"low_why": why} if why else {}))


def between(default: Any, low: float, high: float, high_open: bool = False, why: str | None = None,
            low_open: bool = False) -> Any:
    """low <= value <= high (< high with ``high_open``, > low with ``low_open``); ``why``: the reason for
    the upper bound, in its message."""
    lower = {"gt": low} if low_open else {"ge": low}
    upper = {"lt": high} if high_open else {"le": high}
    return _field(default, **lower, **upper, **({"why": why} if why else {}))


def signed(default: Any) -> Any:
    """A number that may be negative."""
    return _field(default, signed=True)


def nonempty_path(default: str) -> Any:
    """A path that must not be empty ('' would silently mean the working directory)."""
    return _field(default, nonempty=True)


def interval(default: tuple[float, float], signed: bool = False) -> Any:
    """A pair [low, high] with low <= high (each end range-checked like a number; ``signed``: may be < 0)."""
    return _field(default, interval=True, **({"signed": True} if signed else {}))


def choice(default: Any, choices: list) -> Any:
    return _field(default, choices=list(choices))


def range_error(name: str, value: Any, meta: Mapping) -> str | None:
    if isinstance(value, bool) or not isinstance(value, NUMBER_TYPES):
        return None
    if not math.isfinite(value):  # .inf passes "> 0", .nan every comparison: no option means either
        return "must be a finite number"
    if meta.get("seed") and not (isinstance(value, int) and meta["ge"] <= value <= meta["le"]):
        return f"must be an integer from {meta['ge']} to {meta['le']}"
    if isinstance(value, int) and abs(value) > INT_MAX and "le" not in meta and "lt" not in meta:
        return f"must be at most {INT_MAX} in size"
    if isinstance(value, float) and abs(value) > FLOAT_MAX:
        return f"must be at most {FLOAT_MAX:.3g} in size (float32)"
    low_why = f" ({meta['low_why']})" if "low_why" in meta else ""
    if "gt" in meta and not value > meta["gt"]:
        return f"must be > {meta['gt']}{low_why}"
    if "ge" in meta and not value >= meta["ge"]:
        return f"must be >= {meta['ge']}{low_why}"
    if "lt" in meta and not value < meta["lt"]:
        return f"must be < {meta['lt']}"
    if "le" in meta and not value <= meta["le"]:
        return f"must be <= {meta['le']}" + (f" ({meta['why']})" if "why" in meta else "")
    if "ne" in meta and value == meta["ne"]:
        return f"must not be {meta['ne']}" + (f" ({meta['why']})" if "why" in meta else "")
    if not meta.get("signed") and not {"gt", "ge"} & set(meta) and value < 0:
        return "must be >= 0"
    return None


def check_value(name: str, value: Any, meta: Mapping, where: str) -> None:
    """Choices and range of one value (lists: every element)."""
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise UserError(f"'{name}' in {where} must be one of {list(choices)}, got {value!r}"
                        f"{closest(str(value), [str(c) for c in choices])}")
    if meta.get("nonempty") and isinstance(value, str) and not value.strip():
        raise UserError(f"'{name}' in {where} must not be empty (write '.' for the working directory)")
    for item in value if isinstance(value, (list, tuple)) else [value]:  # OmegaConf 2.3 gives lists, 2.4 tuples
        why = range_error(name, item, meta)
        if why:
            raise UserError(f"'{name}' in {where} {why}, got {value!r}")
    if meta.get("interval") and not (isinstance(value, (list, tuple)) and len(value) == 2 and value[0] <= value[1]):
        raise UserError(f"'{name}' in {where} must be a pair [low, high] with low <= high, got {value!r}")


def implicit_range(name: str) -> dict:
    """The range an option has by its name alone (see the module docstring)."""
    if name == "seed" or name.endswith("_seed"):
        return {"ge": 0, "le": SEED_MAX, "seed": True}
    if name in ("num_workers", "threads"):
        return {"le": 4 * (os.cpu_count() or 1), "why": f"{os.cpu_count()} CPU cores here"}
    return {}


def unknown_key(key: str, valid: list[str], where: str, what: str = "key") -> UserError:
    listing = f". Valid: {', '.join(valid) or '(none)'}" if len(valid) <= 25 else ""
    return UserError(f"unknown {what} '{key}' in {where}{closest(key, valid)}{listing}")


# ---- dataclass schemas ----------------------------------------------------------------------------
def validate(schema: type, options: Mapping, where: str, what: str = "key", prefix: str = "",
             instance: bool = False) -> Any:
    """Check ``options`` against the dataclass ``schema``; returns the plain dict with defaults filled in
    (with ``instance``: and the ``schema`` object made of it, its ``__post_init__`` run once). Fields marked
    ``metadata['estimator']`` hold an estimator spec, kept as given (a new
    spec replaces the default one instead of merging into it; the seam checks it)."""
    fields = dataclasses.fields(schema)
    names = [f.name for f in fields]
    options = dict(options)
    for key in options:
        if key not in names:
            raise unknown_key(key, names, where, what)
    specs = {f.name: refined_spec(f, options.pop(f.name)) for f in fields
             if f.metadata.get("estimator") and f.name in options}
    for key, annotation in _bool_fields(schema).items():  # OmegaConf would read -1, 2, 'yes' or 'on' as true
        if key in options and not conforms(options[key], annotation):
            raise UserError(f"bad value for '{key}' in {where}: must be true or false, got {options[key]!r}")
    hints, defaults = _type_hints(schema), {f.name: f.default for f in fields}
    for key, value in options.items():
        annotation, default = hints.get(key), defaults.get(key)
        if value is None and annotation is not None and not conforms(None, annotation):  # key=null
            shown = f", {key}={default}" if default is not dataclasses.MISSING else ""
            raise UserError(f"'{prefix}{key}' in {where} cannot be unset (null): give a value, or leave it out for "
                            f"its default{shown}")
        if annotation in (int, Optional[int]) and isinstance(value, (bool, float)):  # 1.5, true: not a count
            bounds = implicit_range(key)
            what_int = f"an integer from 0 to {bounds['le']}" if bounds.get("seed") else "an integer"
            raise UserError(f"'{prefix}{key}' in {where} must be {what_int}, got {value!r}")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), options)
        plain = OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)  # else '???' goes on as a value
    except MissingMandatoryValue as err:  # a field without a default that the options leave out
        raise UserError(f"missing value for '{prefix}{err.full_key}' in {where}: {schema.__name__} gives it no "
                        "default; set it in the recipe or on the command line") from None
    except (OmegaConfBaseException, TypeError, ValueError) as err:  # TypeError: a mapping where a list is
        key = getattr(err, "full_key", None) or _first_bad_key(schema, options) or ""
        raise UserError(f"bad value for '{key}' in {where}: {str(err).splitlines()[0]}") from None
    for key, value in specs.items():
        plain[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    nested = {k: t for k, t in _type_hints(schema).items() if dataclasses.is_dataclass(t)}
    for f in fields:
        if f.name in nested and isinstance(plain[f.name], dict):  # a section of its own: its ranges too
            plain[f.name] = validate(nested[f.name], plain[f.name], where, what, f"{prefix}{f.name}.")
            continue
        plain[f.name] = expand_path(plain[f.name], prefix + f.name, where)  # ~/runs, $SCRATCH/data
        default = f.default if f.default is not dataclasses.MISSING else None
        negative_default = isinstance(default, NUMBER_TYPES) and default < 0
        meta = {**implicit_range(f.name), **f.metadata}
        if {"le", "lt"} & set(f.metadata) and "why" not in f.metadata:  # a declared upper bound replaces
            meta.pop("why", None)  # the implicit one (and its reason)
        check_value(prefix + f.name, plain[f.name], {"signed": True, **meta} if negative_default else meta, where)
    try:
        made = schema(**plain)
    except (ValueError, TypeError) as err:
        raise UserError(f"invalid options in {where}: {err}") from None
    return (plain, made) if instance else plain


def _type_hints(schema: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(schema)
    except Exception:  # unresolvable annotations: leave the checking to OmegaConf
        return {}


def _bool_fields(schema: type) -> dict[str, Any]:
    """{field: annotation} for the fields typed ``bool`` or ``Optional[bool]``."""
    return {k: a for k, a in _type_hints(schema).items()
            if a is bool or set(typing.get_args(a)) == {bool, type(None)}}


def _first_bad_key(schema: type, options: Mapping) -> str | None:
    """The first key whose value alone fails to merge into ``schema`` (OmegaConf's plain TypeErrors
    do not name it)."""
    for key, value in options.items():
        try:
            OmegaConf.merge(OmegaConf.structured(schema), {key: value})
        except Exception:
            return key
    return None


# ---- signatures (lightning.Trainer, callbacks) ------------------------------------------------------
def type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return "None"
    args = typing.get_args(annotation)
    name = getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
    return f"{name}[{', '.join(type_name(a) for a in args)}]" if args and origin is not None else name


def conforms(value: Any, annotation: Any) -> bool:
    """Whether a recipe value (YAML scalars, lists, dicts) fits a type annotation; annotations it
    cannot judge (type variables, unresolved names) accept anything."""
    if annotation in (inspect.Parameter.empty, Any, object):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, NUMBER_TYPES) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin in (list, tuple, typing.Sequence, __import__("collections.abc").abc.Sequence):
        if not isinstance(value, (list, tuple)):
            return False
        return not args or all(conforms(v, args[0]) for v in value)
    if origin in (dict, Mapping, __import__("collections.abc").abc.Mapping) or annotation is dict:
        return isinstance(value, dict)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def signature_types(fn: Any) -> tuple[dict[str, inspect.Parameter], dict[str, Any], bool]:
    """(parameters without self, resolved annotations, takes **kwargs) of a callable, or of a signature read
    from source (``zoo.source_signature.SourceSignature``, which is that triple already)."""
    if isinstance(fn, tuple):
        return fn
    params = {k: p for k, p in inspect.signature(fn).parameters.items() if k != "self"}
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: judge nothing
        hints = {}
    takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in params.values())
    return params, hints, takes_kwargs


def validate_call(fn: Any, options: Mapping, where: str, what: str = "option",
                  ranges: Mapping[str, Mapping] | None = None) -> dict:
    """Check keyword ``options`` for ``fn`` (or its ``SourceSignature``) against its signature before calling
    it. With ``ranges``
    (``{name: {"gt": 0}}``, the metadata of ``positive``/``at_least``/...), numbers are range-checked
    too: a name listed there by its range, any other number must be >= 0. Without it, numbers are
    not range-checked (a callable's own checks apply)."""
    params, hints, takes_kwargs = signature_types(fn)
    valid = [k for k, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    for key, value in options.items():
        if key not in params:
            if takes_kwargs:
                continue
            raise unknown_key(key, valid, where, what)
        annotation = hints.get(key, inspect.Parameter.empty)
        if not conforms(value, annotation):
            expected = type_name(annotation)
            if len(expected) > 60:  # Lightning's long Literal types: the values on a line of their own
                raise UserError(f"'{key}' in {where} must be one of the values below, got {value!r}",
                                details=[f"{key}: {expected}"])
            raise UserError(f"'{key}' in {where} must be {expected}, got {value!r}")
        if ranges is not None:
            check_value(key, value, ranges.get(key, {}), where)
    return dict(options)


# ---- the command line -----------------------------------------------------------------------------
def parse_kv(items: list[str]) -> dict[str, Any]:
    """``["a.b=1", "c=[x, y]"]`` -> ``{"a.b": 1, "c": ["x", "y"]}`` (OmegaConf dotlist values)."""
    return flatten(parse_dotlist(items))


def parse_dotlist(items: list[str]) -> Any:
    """``key=value`` items -> a nested OmegaConf config (what recipes are merged with)."""
    for item in items:
        key = item.split("=", 1)[0]
        if key.startswith(("+", "~")):  # Hydra's add / force-add / delete prefixes
            plain = key.lstrip("+~")
            raise UserError(f"malformed override '{item}': the zoo's overrides are plain key=value, without Hydra's "
                            f"'+', '++' or '~' prefixes: write {plain}=VALUE (every option exists already; "
                            f"{plain}=null unsets an optional one)")
        if "=" not in item or not key or key.strip() != key:
            raise UserError(f"malformed override '{item}': write key=value, e.g. trainer.max_epochs=3")
        if "" in key.split("."):  # model..lr=3 or model.lr.=3: "unknown key ''", or a mapping {'': 3} as the value
            raise UserError(f"malformed override '{item}': the key '{key}' has an empty part between its dots; "
                            "write e.g. model.lr=0.01")
        if not item.split("=", 1)[1].strip():  # OmegaConf reads it as null: ckpt_path=$UNSET would start a new run
            raise UserError(f"'{item}' gives {key} no value (a shell variable that is not set expands to nothing): "
                            f"write one ({key}=null unsets an optional key), or leave the key out")
    try:
        return OmegaConf.from_dotlist(items)
    except Exception:  # YAML's or OmegaConf's grammar errors, which do not say which item
        for item in items:  # one at a time, so that the message names the item at fault
            try:
                OmegaConf.from_dotlist([item])
            except Exception as err:
                raise UserError(f"malformed override '{item}': {_grammar_problem(err)}") from None
        raise


# How a ``${...}`` is written, for OmegaConf's grammar errors (which name only what failed to parse):
# in an override here, in a recipe in zoo.config's interpolation hint
INTERPOLATION_SYNTAX = ("(an interpolation is written ${dotted.key} or ${oc.env:VARIABLE}, closed by '}'; "
                        "a literal '${' is written '\\${')")


def _grammar_problem(err: Exception) -> str:
    """What is wrong with one override's value, and how it is written: YAML's own message starts with
    its context ("while parsing a flow sequence"), the problem comes after."""
    problem = getattr(err, "problem", None)  # yaml's MarkedYAMLError
    if problem:
        return (f"{problem} in its value: close every bracket and quote (a list is written 'key=[a,b]', a mapping "
                "'key={a: 1}', in quotes for the shell)")
    text = str(err).splitlines()[0]
    return f"{text} {INTERPOLATION_SYNTAX}" if "${" in str(err) else text


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config -> {"a.b": value}; a mapping with a 'name' (an estimator spec) stays whole."""
    plain = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg
    out: dict[str, Any] = {}
    for key, value in plain.items():
        if isinstance(value, dict) and value and "name" not in value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def refined_spec(field: dataclasses.Field, spec: Any) -> Any:
    """An estimator field's ``spec``; options without a ``name`` (``model.estimator.n=4`` where the recipe names
    no estimator) refine the field's default estimator."""
    if not isinstance(spec, Mapping) or "name" in spec or field.default_factory is dataclasses.MISSING:
        return spec
    default = field.default_factory()
    if isinstance(default, str):
        return {"name": default, **spec}
    return {**default, **spec} if isinstance(default, Mapping) and "name" in default else spec


def estimator_option(default: EstimatorSpec, doc: str = "") -> Any:
    """A model config field that names the estimator of its node: a name or {name: ..., options}.
    The default is copied per instance; ``metadata['estimator']`` marks the field for the docs."""
    factory = (lambda: dict(default)) if isinstance(default, Mapping) else (lambda: default)
    return dataclasses.field(default_factory=factory, metadata={"estimator": True, "doc": doc})


# ---- the validated run config, read-only ----------------------------------------------------------------------
def _read_only(self: Any, *args: Any, **kwargs: Any) -> None:
    raise TypeError("the validated config is read-only: build a new value instead (e.g. dict(cfg, key=value))")


class FrozenDict(dict):
    """A dict that refuses every change (``zoo.config.LoadedRun.settings``): reads, ``isinstance(x, dict)``, ``json``
    and ``dict(x)`` (a plain, changeable copy of one level) work as for a dict; ``thaw`` gives the plain tree."""

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple:  # pickle and deepcopy: rebuilt through dict.__init__, not __setitem__
        return type(self), (dict(self),)


class FrozenList(list):
    """A list that refuses every change, as ``FrozenDict``; equal to the plain list of its items."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = append = extend = insert = pop = remove = clear = sort = \
        reverse = _read_only

    def __reduce__(self) -> tuple:
        return type(self), (list(self),)


def freeze(value: Any) -> Any:
    """A tree of dicts and lists -> the same tree of ``FrozenDict`` and ``FrozenList`` (new containers)."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """``freeze``'s tree -> plain dicts and lists (new containers), for what is saved: config.yaml, a checkpoint
    (loaded with ``weights_only=True``: no class of the zoo's inside), the loggers' config."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value
