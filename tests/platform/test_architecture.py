"""The zoo's layers, checked on the source: every import counts, function-level ones too.

Top to bottom (a module imports its own layer or the ones below, never above; nothing goes round in
a circle, within a layer either):

    commands   zoo (the package: zoo.load), zoo.train (and the run it hands over to, zoo.runner), zoo.evaluate,
               zoo.predict, zoo.sweep (a package: its command, runs and slurm launcher),
               zoo.pretrained.__main__, zoo.estimators.__main__, zoo.__main__
    models     zoo.models.<name>: one folder each, never importing another's; they use the layers
               below. The platform finds them as it finds a user's plugin: through the registry, which
               imports the declarations in their torch-free config.py by name (``zoo.models:declare_all``)
    platform   zoo.cli, zoo.messages, zoo.config, zoo.overrides, zoo.monitoring, zoo.recipe_files,
               zoo.trainer_schema, zoo.run_folder,
               zoo.tracking, zoo.loading, zoo.pretrained, zoo.record (the run's record: code, versions, machine)
    parts      zoo.core, zoo.estimators, zoo.callbacks (estimators know nothing of models or core), zoo.hf_hub (a
               model as a Hugging Face Hub folder: ZooModule's save_pretrained / from_pretrained / push_to_hub)
    ground     zoo.registry, zoo.schema, zoo.source_signature, zoo.errors, zoo.paths, zoo.spread (seed spreads),
               zoo.data_schema

One boundary for heavy imports: a torch-free front (the command lines, the recipe check: zoo.train,
zoo.config and what they import) hands over to a runner (zoo.runner, the models, zoo.core) that imports
what it uses at its top. A function-level import is there only to keep a heavy package (HEAVY) out of a
module that does not import it at its top: it names one, or a zoo module that brings one, and the
module's top-level imports bring none of those; there are at most MAX_FUNCTION_LEVEL of them.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "zoo"

LAYERS = {  # module prefix -> layer (higher imports lower); the longest matching prefix wins
    "zoo": 4, "zoo.__main__": 4, "zoo.train": 4, "zoo.runner": 4, "zoo.evaluate": 4, "zoo.predict": 4, "zoo.sweep": 4,
    "zoo.pretrained.__main__": 4, "zoo.estimators.__main__": 4,
    "zoo.models": 3,
    "zoo.cli": 2, "zoo.messages": 2, "zoo.config": 2, "zoo.recipe_files": 2, "zoo.trainer_schema": 2,
    "zoo.run_folder": 2, "zoo.overrides": 2, "zoo.monitoring": 2,
    "zoo.tracking": 2, "zoo.loading": 2, "zoo.pretrained": 2, "zoo.record": 2,
    "zoo.core": 1, "zoo.estimators": 1, "zoo.callbacks": 1, "zoo.hf_hub": 1,
    "zoo.registry": 0, "zoo.schema": 0, "zoo.source_signature": 0, "zoo.errors": 0, "zoo.paths": 0, "zoo.spread": 0,
    "zoo.data_schema": 0,
}
FORBIDDEN = {  # within a layer: prefix -> prefixes it must not import
    "zoo.estimators": ("zoo.core", "zoo.callbacks", "zoo.models"),
}
HEAVY = {"torch", "torchvision", "torchmetrics", "lightning", "matplotlib", "wandb", "tokenizers", "sklearn",
         "scipy", "PIL", "pytorch_ood", "safetensors", "numba", "triton", "gensim", "tensorboard", "submitit",
         "numpy", "importlib.metadata", "pooch", "requests", "tqdm", "huggingface_hub",
         "matplotlib.pyplot"}  # each takes tens of milliseconds or more to import, and a recipe check needs none
# (matplotlib.pyplot on its own: it chooses a GUI backend, which the zoo's figures, matplotlib.figure.Figure, do not)
# (omegaconf and yaml are light enough: every recipe check reads a YAML file and merges its overrides with them)
MAX_FUNCTION_LEVEL = 40  # in zoo/


LIGHT_PACKAGE = "zoo/__init__.py"  # `import zoo` (every command's first import) imports nothing of the zoo's


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = modules()


def resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> list[tuple[ast.AST, list[str], bool]]:
    """(node, imported names, inside a function) of every import statement in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f)}
    base = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                b = base
                for _ in range(node.level - 1):
                    b = b.rpartition(".")[0]
                mod = f"{b}.{mod}" if node.module else b
            names = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        out.append((node, names, id(node) in in_function))
    return out


def zoo_edges(module: str) -> set[str]:
    out = set()
    for _, names, _ in imports(module):
        for name in names:
            target = resolve(name) if name.split(".")[0] == "zoo" else None
            if target and target != module and not module.startswith(target + "."):  # a package's own __init__
                out.add(target)
    return out


def layer(module: str) -> int | None:
    """The layer of ``module``: its longest prefix in LAYERS ("zoo" itself only for the package)."""
    found = [p for p in LAYERS if module == p or (p != "zoo" and module.startswith(p + "."))]
    return LAYERS[max(found, key=len)] if found else None


def model_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "models" else None


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer(m) is None] == []  # a new top-level module: give it its layer here


def test_no_import_circle():
    edges = {m: zoo_edges(m) for m in MODULES}
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for m in MODULES:
        if m not in index:
            visit(m)
    assert circles == []


def test_imports_go_down_the_layers():
    wrong = []
    for m in MODULES:
        for target in zoo_edges(m):
            if layer(target) > layer(m):
                wrong.append(f"{m} (layer {layer(m)}) imports {target} (layer {layer(target)})")
            for prefix, banned in FORBIDDEN.items():
                if (m == prefix or m.startswith(prefix + ".")) and m != f"{prefix}.__main__":
                    wrong += [f"{m} imports {target}" for b in banned if target == b or target.startswith(b + ".")]
    assert wrong == []


def test_the_package_never_imports_the_benchmarks_helpers():
    """benchmarks/common/ (the benchmarks' helpers) is in the checkout, not in the wheel: an installed zoo cannot
    import it."""
    wrong = [f"{m} imports {n}" for m in MODULES for _, names, _ in imports(m) for n in names
             if n.split(".")[0] == "benchmarks"]
    assert wrong == []


MODEL_FILES = ("__init__.py", "config.py", "data.py", "nets.py", "module.py", "evaluation.py", "predict.py", "plots.py")


def test_every_model_folder_has_the_shape_zoo_models_states():
    """zoo/models/__init__.py: every model folder holds these files (a further one only for a second idea)."""
    folders = sorted(p for p in (PACKAGE / "models").iterdir() if (p / "__init__.py").is_file())
    assert len(folders) >= 6
    missing = {p.name: [f for f in MODEL_FILES if not (p / f).is_file()] for p in folders}
    assert missing == {p.name: [] for p in folders}


def test_models_never_import_each_other():
    wrong = [f"{m} imports {t}" for m in MODULES for t in zoo_edges(m)
             if model_of(m) and model_of(t) and model_of(m) != model_of(t)]
    assert wrong == []


def top_level_names(module: str) -> tuple[set[str], dict[str, int]]:
    """(names ``module`` defines at its top level, {name it imports there: the import's line number})."""
    defined, imported = set(), {}
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update({(a.asname or a.name).split(".")[0]: node.lineno for a in node.names})
        else:  # assignments, and names bound inside a top-level if / try
            defined |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return defined, imported


def test_names_are_imported_from_where_they_live():
    """``from zoo.X import NAME`` names the module that defines NAME, or one that re-exports it on purpose (a
    package's __init__, or an import marked ``# noqa: F401``): an import that X only uses itself is no public
    name of X's, and the arrow to X is one the layers do not need."""
    wrong = []
    for m in MODULES:
        for node, names, _ in imports(m):
            source = names[0]
            if not isinstance(node, ast.ImportFrom) or source not in MODULES or MODULES[source].name == "__init__.py":
                continue
            defined, imported = top_level_names(source)
            lines = MODULES[source].read_text(encoding="utf-8").splitlines()
            for alias in node.names:
                line = imported.get(alias.name)
                if alias.name not in defined and line is not None and "noqa: F401" not in lines[line - 1]:
                    wrong.append(f"{m} imports {alias.name} from {source}, which imports it itself")
    assert wrong == []


def heavy_of(name: str) -> str | None:
    """The heavy package ``name`` is (or is inside of), else None."""
    return max((h for h in HEAVY if name == h or name.startswith(h + ".")), key=len, default=None)


def heavy_packages(module: str, seen: set[str] | None = None) -> set[str]:
    """The heavy packages that importing ``module`` imports (its top-level imports, followed through the zoo)."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    found = set()
    for _, names, inside in imports(module):
        if inside:
            continue
        for name in names:
            found |= brought(name, module, seen)
    parent = module.rpartition(".")[0]  # importing a.b.c runs a/__init__ and a/b/__init__ first
    return found | (heavy_packages(parent, seen) if parent in MODULES else set())


def brought(name: str, module: str, seen: set[str] | None = None) -> set[str]:
    """The heavy packages an import of ``name`` from ``module`` brings in."""
    if heavy_of(name):
        return {heavy_of(name)}
    target = resolve(name) if name.startswith("zoo.") else None
    return heavy_packages(target, seen) if target and target != module else set()


def test_function_level_imports_keep_heavy_packages_out_of_start_up():
    """A function-level import is there only to bring a heavy package that its module does not already
    import at its top (where it does, the import belongs at the top too): a comment is no reason."""
    wrong, count = [], 0
    for m, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        has = heavy_packages(m)
        for node, names, inside in imports(m):
            if not inside:
                continue
            count += 1
            new = set().union(*(brought(n, m) for n in names)) - has
            where = f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
            if not new and str(path.relative_to(ROOT)) != LIGHT_PACKAGE:
                wrong.append(f"{where} (brings nothing heavy the module lacks: import it at the top)")
    assert wrong == [], f"{len(wrong)} function-level imports:\n" + "\n".join(wrong)
    assert count <= MAX_FUNCTION_LEVEL, f"{count} function-level imports in zoo/: import at the top of a runner module"


def test_start_up_imports_nothing_heavy():
    """What every command imports before its work: `import zoo` only the package (and zoo.paths under
    `python -m`), and the recipe check (zoo.train's front, zoo.config, with the declarations) no heavy package."""
    code = ("import sys, zoo; first = sorted(m for m in sys.modules if m.startswith('zoo'))\n"
            "import zoo.train, zoo.config; zoo.config.MODELS.builtin_config('vae')\n"
            "heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + '.') for h in HEAVY))\n"
            "print(first, heavy)\n")
    out = subprocess.run([sys.executable, "-c", f"HEAVY = {sorted(HEAVY)!r}\n" + code], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['zoo'] []", out.stdout
