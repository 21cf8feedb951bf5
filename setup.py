"""Build glue that pyproject.toml cannot express: the top-level ``recipes/`` folder ships inside the
package as ``zoo/recipes/`` (a package directory mapped onto it), so an installed zoo finds its recipes
(``zoo.recipe_files.recipe_dirs``). Everything else is configured in pyproject.toml."""

from setuptools import find_namespace_packages, find_packages, setup

RECIPES = ["zoo.recipes", *(f"zoo.recipes.{p}" for p in find_namespace_packages(where="recipes"))]  # one a folder

setup(
    packages=[*find_packages(include=["zoo*"]), *RECIPES],
    package_dir={"zoo.recipes": "recipes"},
    package_data={"zoo.pretrained": ["*.json", "*.safetensors"], **{p: ["*.yaml"] for p in RECIPES}},
)
