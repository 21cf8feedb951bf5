"""What the shared recipe tests need of each model's recipes, found in the model's own tests folder
(``tests/<folder>/<folder>_cases.py``: a new model adds its cases there and edits nothing here). Each of these
tables is the union of the tables of that name in those files (a key in two of them is refused):

- ``REAL_DATA``: recipe -> writer(tmp_path) -> the overrides that point a recipe made for a real dataset at tiny
  files in the real format (the smoke, meta-device, GPU and resume tests run the recipe on them);
- ``RESUME``: recipe, or recipe:variant for another loop of the same recipe -> the overrides that make it small for
  tests/test_recipe_resume.py; ``NOT_RESUMED``: recipe -> why it has no case of its own; ``RESUME_STEPS``: case ->
  its global steps (epoch 0's end, the step save, the kill, the end) where its batches are not one step each;
  ``RESUME_FAST``: the cases `make test` resumes (a model without the table: all of its cases), the others
  run in `make test-slow`;
- ``ESTIMATOR_HOSTS``: model with a stochastic node -> the cases whose settings train it (every estimator that fits
  its node runs on the first of them it fits); ``HOST_SETTINGS``: a host that is not a case of its own -> (the case
  it starts from, its own overrides).
"""

import importlib.util
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent


def case_modules() -> list[ModuleType]:
    """Every model's ``tests/<folder>/<folder>_cases.py``, imported."""
    modules = []
    for path in sorted(TESTS.glob("*/*_cases.py")):
        spec = importlib.util.spec_from_file_location(f"{path.parent.name}_cases", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
    return modules


def merged(name: str, modules: list[ModuleType]) -> dict:
    """The union of the tables ``name`` of ``modules``."""
    out: dict = {}
    for module in modules:
        table = getattr(module, name, {})
        twice = set(out) & set(table)
        assert not twice, f"{sorted(twice)} in {name} of {module.__file__} and of another model's cases"
        out.update(table)
    return out


MODULES = case_modules()
REAL_DATA = merged("REAL_DATA", MODULES)
RESUME = merged("RESUME", MODULES)
RESUME_STEPS = merged("RESUME_STEPS", MODULES)
NOT_RESUMED = merged("NOT_RESUMED", MODULES)
ESTIMATOR_HOSTS = merged("ESTIMATOR_HOSTS", MODULES)
HOST_SETTINGS = merged("HOST_SETTINGS", MODULES)
RESUME_FAST = {case for module in MODULES for case in getattr(module, "RESUME_FAST", getattr(module, "RESUME", {}))}
