"""One small registry type for models, datamodules and estimators (timm/torchvision style).

Each of the zoo's own entries has one spec, declared in its folder's torch-free ``config.py`` (the estimators':
``zoo/estimators/config.py``): a name, the class's dotted path (imported on first use), its options dataclass
and what the recipe check needs of it, so a recipe is checked before torch loads. The class points to that spec
(``spec = VAE_SPEC``) rather than restating it::

    VAE_SPEC = MODELS.declare(ModelSpec("vae", "zoo.models.vae.vae:VAE", VAEConfig, node=vae_node))

    MODELS.spec("vae").config    # -> VAEConfig (no torch)
    MODELS.get("vae")            # -> the class (its module imported now); MODELS.get("vae").spec is VAE_SPEC
    MODELS.list("v*")            # -> ["vae"]
    MODELS.get("mypkg.models:MyModel")   # a user's own class, by dotted path

A user's package registers with ``@MODELS.register("name")`` on the class, or through the Python
entry point group ``zoo.<kind>s`` (e.g. ``[project.entry-points."zoo.models"] mymodel =
"mypkg.models:MyModel"``); its spec is read from the class's attributes (``Config``, ``stochastic_node``, ...),
so every entry answers the same questions the same way, whether its class is imported or not.

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


def doc_line(obj: Any) -> str:
    """The first line of an object's docstring (a description)."""
    return (getattr(obj, "__doc__", None) or "").strip().split("\n")[0]


@dataclass(frozen=True)
class Spec:
    """What the zoo knows of an entry without importing its class."""

    name: str  # registered name, as written in recipes
    target: str  # the class's dotted path 'package.module:Name', imported when first used
    config: type | None = None  # dataclass of its options (None: not validated)
    description: str = ""  # one line shown by list commands ("": the class's docstring, once imported)

    @property
    def class_name(self) -> str:
        """The class's name, as messages print it (``VAE``)."""
        return self.target.rpartition(":")[2].rpartition(".")[2]

    @classmethod
    def of_class(cls, name: str, obj: Any, config: type | None = None, description: str = "") -> Spec:
        """The spec of a class that declares none (a user's own, a plugin's): read from its attributes."""
        return cls(name, _qualname(obj), config or getattr(obj, "Config", None), description or doc_line(obj),
                   **cls.facts_of(obj))

    @staticmethod
    def facts_of(obj: Any) -> dict:
        """A subclass's own fields, read from a class's attributes (``of_class``)."""
        return {}


# trainer.precision values a zoo model runs under unless its spec says otherwise: pure float16 / bfloat16 weights
# (16-true, bf16-true) overflow log-likelihoods or meet float32 tables
PRECISIONS = ("32-true", "64-true", "bf16-mixed", "16-mixed")


@dataclass(frozen=True)
class ModelSpec(Spec):
    """A model's spec: what the recipe check and the Hub need of it (``zoo.core.module.ZooModule.spec``)."""

    node: Callable | None = None  # (options, data_info=None) -> its StochasticNode, or None where these options
    # sample nowhere; None: the model samples nowhere
    monitor: tuple | Callable | None = ("val/loss", "min")  # (metric, mode) its best checkpoint is chosen by, or a
    # function of the run's validated config giving it (None there: known once the data are); None: not stated
    precisions: tuple | None = PRECISIONS  # trainer.precision values it runs under (None: not checked)
    check_run: Callable | None = None  # (the run's validated config) -> None; a UserError where settings each valid
    # make no run together (SeqGAN's schedule with every phase 0)
    task: str = "other"  # its task on the Hugging Face Hub (huggingface.co/tasks), in its model card
    compiled: tuple | str | None = None  # what the recipe key `compile` compiles in place (nn.Module.compile): the
    # attribute names of the submodules that carry the model's math (one absent or None on a built model, e.g. a
    # GAN part its options leave out, is skipped); a str: why the model refuses the key (one short line); None:
    # not stated (refused: a model names its own)

    @staticmethod
    def facts_of(obj: Any) -> dict:
        own = getattr(obj, "spec", None)
        return {"node": getattr(obj, "stochastic_node", None), "monitor": getattr(obj, "run_monitor", None),
                "precisions": getattr(obj, "precisions", None), "check_run": getattr(obj, "check_run", None),
                "task": own.task if isinstance(own, ModelSpec) else "other",
                "compiled": getattr(obj, "compiled", None)}

    def run_monitor(self, cfg: Any) -> tuple[str, str] | None:
        """(metric, mode) a model built from the run's validated config ``cfg`` will watch, None where not known."""
        return self.monitor(cfg) if callable(self.monitor) else self.monitor


@dataclass(frozen=True)
class DataSpec(Spec):
    """A datamodule's spec."""

    known_info: Callable | None = None  # (options) -> what they state of the data's info() before any data are
    # read (the oracle's vocabulary), for the check of the model's estimator

    @staticmethod
    def facts_of(obj: Any) -> dict:
        return {"known_info": getattr(obj, "known_info", None)}


@dataclass
class Entry:
    spec: Spec  # what it states: its declaration (the zoo's own), or read from its class (a user's own, a plugin's)
    loaded: Any = field(default=None, repr=False)  # the class, once imported
    builtin: bool = False  # declared by the zoo itself

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def target(self) -> str:
        return self.spec.target

    @property
    def config(self) -> type | None:
        return self.spec.config

    @property
    def description(self) -> str:
        return self.spec.description or (doc_line(self.loaded) if self.loaded is not None else "")

    @property
    def obj(self) -> Any:
        """The class (imported on first use)."""
        if self.loaded is None:
            self.loaded = import_dotted(self.spec.target)
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
    """A class's dotted path 'package.module:Name'."""
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
    from importlib.metadata import entry_points  # imported when used: importlib.metadata (plugins only)

    return entry_points(group=group)


class Registry:
    def __init__(self, kind: str, spec: type | str = Spec, base: str | None = None, builtins: str | None = None):
        self.kind = kind  # "model", "datamodule", "estimator"
        self.spec_type = spec  # the Spec subclass of its entries (or its dotted path, imported when first needed)
        self.base = base  # dotted path of the class a user's own entry must subclass (None: any object)
        self.builtins = builtins  # dotted path of a function that imports the zoo's own entries (None: none)
        self._entries: dict[str, Entry] = {}
        self.group = f"zoo.{kind}s"  # the entry-point group third-party packages publish entries under
        self._loaded_plugins = False
        self._loaded_builtins = builtins is None

    def declare(self, spec: Spec) -> Spec:
        """The zoo's own entry, stated once by ``spec`` in the torch-free ``config.py`` of its folder (its class,
        imported when first used, points to it); returns ``spec``."""
        known = self._entries.get(spec.name)
        if known is not None and known.target != spec.target:
            raise UserError(f"two {self.kind}s are declared as '{spec.name}': {known.target} and {spec.target}; "
                            "give one of them another name")
        self._entries[spec.name] = Entry(spec, builtin=True)
        return spec

    def _spec_of(self, name: str, obj: Any, config: type | None = None, description: str = "") -> Spec:
        """The spec of a class that declares none, read from its attributes."""
        spec_type = import_dotted(self.spec_type) if isinstance(self.spec_type, str) else self.spec_type
        return spec_type.of_class(name, obj, config, description)

    def register(self, name: str, config: type | None = None, description: str = "") -> Callable:
        """Decorator for a user's own class (the zoo's own are declared: ``declare``)."""
        def decorator(obj: Any) -> Any:
            if name in self._entries and self._entries[name].obj is not obj:
                raise UserError(f"two {self.kind}s are registered as '{name}': {self._entries[name].target} "
                                f"and {_qualname(obj)}; give one of them another name")
            self._entries[name] = Entry(self._spec_of(name, obj, config, description), loaded=obj)
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
                self._entries[ep.name] = Entry(self._spec_of(ep.name, obj), loaded=obj)

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
            return Entry(self._spec_of(name, obj), loaded=obj)
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

    def spec(self, name: str) -> Spec:
        """What the entry ``name`` states (its declaration: no import; a user's own class's: imported)."""
        return self.entry(name).spec

    def list(self, pattern: str = "*") -> list[str]:
        self._load_plugins()
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def declared(self) -> list[str]:
        """The names of the zoo's own entries (their declarations alone: no torch, no plugin imported)."""
        self._load_builtins()
        return sorted(n for n, e in self._entries.items() if e.builtin)

    def builtin_spec(self, name: str) -> Spec | None:
        """The spec of the zoo's own entry ``name`` (None: not one of the zoo's own), read from the declarations
        alone: no torch, no plugin imported."""
        self._load_builtins()
        entry = self._entries.get(name)
        return entry.spec if entry is not None and entry.builtin else None

    def builtin_config(self, name: str) -> type | None:
        """The options dataclass of the zoo's own entry ``name`` (None: not one of the zoo's own)."""
        spec = self.builtin_spec(name)
        return spec.config if spec is not None else None

    def __contains__(self, name: str) -> bool:
        self._load_builtins()
        return name in self._entries


MODELS = Registry("model", ModelSpec, base="lightning.pytorch:LightningModule", builtins="zoo.models:declare_all")
DATAMODULES = Registry("datamodule", DataSpec, base="lightning.pytorch:LightningDataModule",
                       builtins="zoo.models:declare_all")
ESTIMATORS = Registry("estimator", "zoo.estimators.capabilities:EstimatorDef",  # declared in zoo/estimators/config.py
                      builtins="zoo.estimators:declare_all")
