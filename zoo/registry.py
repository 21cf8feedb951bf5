"""One small registry type for models, datamodules and estimators (timm/torchvision style).

The zoo's own entries are declared once, in their folder's torch-free ``config.py``: a name, the
class's dotted path (imported on first use) and its options dataclass, so a recipe's keys are
checked before torch loads::

    MODELS = Registry("model")
    MODELS.declare("vae", "zoo.models.vae.vae:VAE", config=VAEConfig)

    MODELS.entry("vae").config   # -> VAEConfig (no torch)
    MODELS.get("vae")            # -> the class (its module imported now)
    MODELS.list("v*")            # -> ["vae"]
    MODELS.get("mypkg.models:MyModel")   # a user's own class, by dotted path

A user's package registers with ``@MODELS.register("name")`` on the class, or through the Python
entry point group ``zoo.<kind>s`` (e.g. ``[project.entry-points."zoo.models"] mymodel =
"mypkg.models:MyModel"``).

Names read from a file someone else wrote (a checkpoint's run info, a ``save_pretrained`` folder, a card) are
resolved inside ``loaded_config(source)``: the zoo's own entries and the installed plugins only; a dotted path
there is refused before its module is imported (importing runs the module's code), unless the user passed
``trust_code=True`` (as the Hub's ``trust_remote_code``).
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from zoo.errors import UserError


@dataclass
class Entry:
    name: str  # registered name, as written in recipes
    target: Any  # the class or builder, or its dotted path 'package.module:Name' (a declaration: .obj imports it)
    config: type | None = None  # dataclass schema of its options (None: no validation)
    description: str = ""  # one line shown by list commands
    loaded: Any = field(default=None, repr=False)  # a declared target, once imported
    facts: dict = field(default_factory=dict)  # what a declaration states for the recipe check, without the class
    # (a model's stochastic node, precisions, monitor, check_run; an estimator's capabilities and requirements)

    @property
    def obj(self) -> Any:
        """The class or builder (a declared entry's module is imported on first use)."""
        if not isinstance(self.target, str):
            return self.target
        if self.loaded is None:
            self.loaded = import_dotted(self.target)
            self.description = self.description or (self.loaded.__doc__ or "").strip().split("\n")[0]
        return self.loaded


def import_dotted(path: str) -> Any:
    """Import ``package.module:Name`` (or ``package.module.Name``)."""
    module_name, _, attr = path.partition(":") if ":" in path else path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise UserError(f"cannot import module '{module_name}' named in '{path}': {err}") from None
    except Exception as err:  # the module itself fails as it is imported (a bug of the plugin, not the zoo's)
        raise UserError(f"importing module '{module_name}' (named in '{path}') failed: fix the error below in it",
                        details=[f"{_where(err)}{type(err).__name__}: {err}"]) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"module '{module_name}' has no attribute '{attr}' (from '{path}')") from None


def _where(err: BaseException) -> str:
    """'file.py line N: ' of the innermost frame an exception came from (a SyntaxError: its own place)."""
    if isinstance(err, SyntaxError) and err.filename:
        return f"{err.filename} line {err.lineno}: "
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename} line {tb.tb_lineno}: " if tb is not None else ""


def closest(name: str, choices: list[str], n: int = 3) -> str:
    """Human hint: ' (did you mean: a, b?)' or ''."""
    by_lower = {}
    for choice in choices:  # compared without case: VAE-DIGITS is one letter-case away from vae-digits
        by_lower.setdefault(str(choice).lower(), choice)
    hits = [by_lower[hit] for hit in difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=0.5)]
    return f" (did you mean: {', '.join(map(str, hits))}?)" if hits else ""


def _qualname(obj: Any) -> str:
    if isinstance(obj, str):  # a declared entry's dotted path
        return obj
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def unknown_entry(kind: str, name: str, names: list[str]) -> UserError:
    """The error for a name no registry entry has: the closest name, the known ones below."""
    article = "an" if kind[0] in "aeiou" else "a"  # an estimator, a model
    return UserError(f"unknown {kind} '{name}'{closest(name, names)}: name a known one (below), or {article} {kind} "
                     "of your own by dotted path 'package.module:Name'", details=[f"Known: {', '.join(names)}"])


# the file whose names are being resolved (None: the user's own recipe, command line or code)
_LOADED_FROM: ContextVar[str | None] = ContextVar("zoo_loaded_from", default=None)


@contextmanager
def loaded_config(source: str, trust_code: bool = False) -> Iterator[None]:
    """Names looked up inside come from ``source``, a file someone else may have written: a dotted path among
    them is refused before it is imported, unless ``trust_code`` (the user trusts the file's author)."""
    token = _LOADED_FROM.set(None if trust_code else str(source))
    try:
        yield
    finally:
        _LOADED_FROM.reset(token)


def untrusted_code(kind: str, name: str, source: str) -> UserError:
    """The refusal of a dotted path read from ``source``: what and the fix first, the other fix below."""
    return UserError(f"refusing to import the {kind} '{name}' that a loaded file names by dotted path (importing "
                     "runs its code): pass trust_code=True (--trust-code) if you trust its author",
                     details=[f"named in {source}",
                              f"or install the package that publishes it under the entry point group zoo.{kind}s: "
                              "a loaded checkpoint, model folder or card resolves only the zoo's own names and the "
                              "installed plugins, as the Hub's trust_remote_code=False does"])


def _entry_points(group: str) -> Any:
    """The installed packages' entry points of ``group``."""
    from importlib.metadata import entry_points  # imported when used: importlib.metadata (~40 ms, plugins only)

    return entry_points(group=group)


class Registry:
    def __init__(self, kind: str, base: str | None = None, builtins: str | None = None):
        self.kind = kind  # "model", "datamodule", "estimator"
        self.base = base  # dotted path of the class a user's own entry must subclass (None: any object)
        self.builtins = builtins  # dotted path of a function that imports the zoo's own entries (None: none)
        self._entries: dict[str, Entry] = {}
        self.group = f"zoo.{kind}s"  # the entry-point group third-party packages publish entries under
        self._loaded_plugins = False
        self._loaded_builtins = builtins is None

    def declare(self, name: str, target: str, config: type | None = None, description: str = "", **facts: Any) -> None:
        """The zoo's own entry ``name``: its class's dotted path ``target`` (imported when first used), its
        options dataclass and ``facts`` (what the recipe check needs of the class), declared in the torch-free
        ``config.py`` of its folder."""
        known = self._entries.get(name)
        if known is not None and known.target != target:
            raise UserError(f"two {self.kind}s are declared as '{name}': {_qualname(known.target)} and {target}; "
                            "give one of them another name")
        self._entries[name] = Entry(name, target, config, description, facts=facts)

    def register(self, name: str, config: type | None = None, description: str = "") -> Callable:
        """Decorator for a user's own class (the zoo's own are declared: ``declare``)."""
        def decorator(obj: Any) -> Any:
            if name in self._entries and self._entries[name].obj is not obj:
                raise UserError(f"two {self.kind}s are registered as '{name}': {_qualname(self._entries[name].target)} "
                                f"and {_qualname(obj)}; give one of them another name")
            desc = description or (obj.__doc__ or "").strip().split("\n")[0]
            self._entries[name] = Entry(name, obj, config or getattr(obj, "Config", None), desc)
            return obj

        return decorator

    def _load_builtins(self) -> None:
        """The zoo's own entries are declared when their ``config.py`` files are imported (no torch); the
        first lookup imports them (``zoo.models.declare_all``), so no caller has to."""
        if not self._loaded_builtins:
            self._loaded_builtins = True
            import_dotted(self.builtins)()

    def _load_plugins(self) -> None:
        self._load_builtins()
        if self._loaded_plugins:
            return
        self._loaded_plugins = True
        for ep in _entry_points(self.group):
            if ep.name not in self._entries:
                try:
                    obj = ep.load()
                except Exception as err:  # one broken plugin package: named, not a traceback in every run
                    raise UserError(f"the {self.kind} '{ep.name}' that an installed package publishes cannot be "
                                    "imported (the error below): fix or uninstall that package",
                                    details=[f"entry point: {ep.value} (group {self.group})",
                                             f"{_where(err)}{type(err).__name__}: {err}"]) from None
                self._check_base(f"{ep.name} ({ep.value})", obj)
                desc = (getattr(obj, "__doc__", None) or "").strip().split("\n")[0]
                self._entries[ep.name] = Entry(ep.name, obj, getattr(obj, "Config", None), desc)

    def entry(self, name: str) -> Entry:
        self._load_builtins()  # the zoo's own declarations first: their lookup reads no installed package's metadata
        if name in self._entries:
            return self._entries[name]
        if ":" in name:  # a user's own class by dotted path; its schema is its `Config` attribute
            source = _LOADED_FROM.get()
            if source is not None:  # read from someone else's file: nothing imported
                raise untrusted_code(self.kind, name, source)
            obj = import_dotted(name)
            self._check_base(name, obj)
            return Entry(name, obj, getattr(obj, "Config", None))
        self._load_plugins()
        if name in self._entries:
            return self._entries[name]
        raise unknown_entry(self.kind, name, sorted(self._entries))

    def _check_base(self, name: str, obj: Any) -> None:
        """A dotted path to a function or an unrelated class would fail only when the run calls it."""
        if self.base is None:
            return
        base = import_dotted(self.base)
        if not (isinstance(obj, type) and issubclass(obj, base)):
            what = f"class {obj.__name__}" if isinstance(obj, type) else type(obj).__name__
            raise UserError(f"'{name}' is a {what}, not a {self.kind}: a {self.kind} named by dotted path "
                            f"must be a subclass of {self.base}")

    def get(self, name: str) -> Any:
        return self.entry(name).obj

    def list(self, pattern: str = "*") -> list[str]:
        self._load_plugins()
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def declared(self) -> list[str]:
        """The names of the zoo's own entries (their declarations alone: no torch, no plugin imported)."""
        self._load_builtins()
        return sorted(n for n, e in self._entries.items() if isinstance(e.target, str))

    def fact(self, name: str, key: str, default: Any = None) -> Any:
        """What the entry ``name`` states as ``key``: its declaration's (no import), else its class's attribute
        of that name (a user's own class: imported)."""
        entry = self.entry(name)
        if isinstance(entry.target, str):
            return entry.facts.get(key, default)
        return getattr(entry.obj, key, default)

    def builtin_config(self, name: str) -> type | None:
        """The options dataclass of the zoo's own entry ``name`` (None: not one of the zoo's own), read from
        the declarations alone: no torch, no plugin imported."""
        self._load_builtins()
        entry = self._entries.get(name)
        return entry.config if entry is not None and isinstance(entry.target, str) else None

    def __contains__(self, name: str) -> bool:
        self._load_builtins()
        return name in self._entries


MODELS = Registry("model", base="lightning.pytorch:LightningModule", builtins="zoo.models:declare_all")
DATAMODULES = Registry("datamodule", base="lightning.pytorch:LightningDataModule",
                       builtins="zoo.models:declare_all")
ESTIMATORS = Registry("estimator", builtins="zoo.estimators:declare_all")  # declared in zoo/estimators/options.py
