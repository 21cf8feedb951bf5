"""Every recipe under recipes/ validates and runs one training + validation batch
(`trainer.fast_dev_run=true`), like lightning-hydra-template's sweep over experiments.

Recipes for real datasets run on tiny files in the real format, written by the writers in
`REAL_DATA` (each returns the overrides that point the recipe at them)."""

from pathlib import Path

import pytest

from zoo.config import all_recipes, load_config
from zoo.train import train

RECIPES = sorted(all_recipes())

# recipe -> function(tmp_path) -> overrides; filled by each model's test helpers
REAL_DATA: dict = {}
try:
    from recipe_data import REAL_DATA  # noqa: F811  (tests/recipe_data.py)
except ImportError:
    pass


def test_there_are_recipes():
    assert "vae_digits" in RECIPES


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_validates(name):
    cfg = load_config(name)
    assert cfg["description"], f"recipe {name} needs a one-line description"


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_smoke(name, tmp_path: Path):
    overrides = REAL_DATA[name](tmp_path) if name in REAL_DATA else []
    result = train([f"recipe={name}", f"run_dir={tmp_path}/runs", "trainer.fast_dev_run=true",
                    "trainer.enable_progress_bar=false", *overrides])
    assert result is not None and result.run_dir.is_dir()
