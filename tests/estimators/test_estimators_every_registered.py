"""Tests parametrized over the registries, so that registering something new tests it:

- every registered estimator estimates what its capabilities declare on an exact-enumeration
  problem (a categorical with K = 4 for categorical / any, K = 2 for binary-only ones, a Gaussian
  for continuous / any):
  unbiased ones within 4 standard errors of the exact gradient (seed 0, 20,000 draws), biased
  ones more than 4 standard errors away;
- every registered estimator that fits a registered model trains that model's stochastic node
  (its gradient reaches the parameters before the node);
- every registered model has a recipe, and its smallest recipe loads and validates; every recipe
  then builds its model and runs a batch in ``tests/test_recipes.py`` (``test_recipe_smoke``);
- every registered model with a stochastic node declares it as designed: ``test_estimators_seam.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch
from torch.distributions import Normal

from zoo.config import load_config
from zoo.estimators import ESTIMATORS, get_estimator
from zoo.estimators.seam import default_requirements, mismatch
from zoo.recipe_files import all_recipes
from zoo.registry import MODELS

D = 20000  # draws per check
Z = 4.0  # standard errors
LOGITS = [0.3, -0.2, 1.0, -1.0]  # K = 4
VALUES = [0.0, 1.0, 2.0, 3.0]


def z_score(draws: torch.Tensor, exact: torch.Tensor) -> float:
    """Largest |mean - exact| in standard errors (an absolute floor for exact, zero-variance ones)."""
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(draws.shape[0])
    return float(((mean - exact).abs() - 1e-4).clamp_min(0).div(se.clamp_min(1e-8)).max())


def categorical_check(name: str) -> float:
    """The K = 4 problem E[(y . v - 1.2)^2 + 5] (its first 2 categories for a binary-only estimator):
    the gradient w.r.t. the logits, D independent draws."""
    torch.manual_seed(0)
    est = get_estimator(name)
    caps = default_requirements(type(est))
    n = max(caps.min_samples, 1)
    k = min(len(LOGITS), caps.max_categories or len(LOGITS))
    logits = torch.tensor(LOGITS[:k]).expand(D, -1).clone().requires_grad_()
    s = est.sample(logits, n)
    cost = 5.0 + (s.value @ torch.tensor(VALUES[:k]) - 1.2) ** 2  # (n, D)
    (g,) = torch.autograd.grad(est.loss(s, cost), logits)
    exact_logits = torch.tensor(LOGITS[:k], dtype=torch.float64, requires_grad=True)
    f = 5.0 + (torch.tensor(VALUES[:k], dtype=torch.float64) - 1.2) ** 2
    (exact,) = torch.autograd.grad((exact_logits.softmax(-1) * f).sum(), exact_logits)
    return z_score(g * D, exact.float())


def gaussian_check(name: str) -> float:
    """Seed 001's example: d/dtheta E[z^2], z ~ N(2 theta + 3, 1), exact 2a(a theta + b) = 16 at 0.5."""
    torch.manual_seed(0)
    est = get_estimator(name)
    n = max(default_requirements(type(est)).min_samples, 1)
    theta = torch.full((D,), 0.5, requires_grad=True)
    s = est.sample(Normal(2 * theta + 3, 1.0), n)
    (g,) = torch.autograd.grad(est.loss(s, s.value**2), theta)
    return z_score((g * D).unsqueeze(1), torch.tensor([16.0]))


@pytest.mark.parametrize("name", ESTIMATORS.list())
def test_every_estimator_estimates_what_it_declares(name):
    caps = default_requirements(ESTIMATORS.get(name))
    checks = []
    if caps.distributions in ("categorical", "any"):
        checks.append(("categorical", categorical_check(name)))
    if caps.distributions in ("continuous", "any"):
        checks.append(("gaussian", gaussian_check(name)))
    assert checks, f"{name}: no exact problem for distributions={caps.distributions!r}"
    for problem, z in checks:
        if caps.unbiased:
            assert z < Z, f"{name} declares unbiased but is {z:.1f} standard errors off on the {problem} problem"
        else:
            assert z > Z, f"{name} declares a bias that the {problem} problem does not show ({z:.1f} s.e.)"


# the cheapest registered model for a fitting estimator first (built here without data files)
IMAGE_INFO = {"dataset": "digits", "image_shape": [1, 8, 8], "binarize": "static", "threshold": 0.5}
CHEAP_MODELS = {"vae": IMAGE_INFO, "dvae": IMAGE_INFO}
SAMPLING = {"sat": {"attention": "hard"}, "ood": {"mode": "joint"}}  # the options under which they sample


@pytest.mark.parametrize("name", ESTIMATORS.list())
def test_every_estimator_trains_a_model_it_fits(name):
    caps = default_requirements(ESTIMATORS.get(name))
    nodes = {m: MODELS.get(m).stochastic_node(MODELS.get(m).Config(**SAMPLING.get(m, {}))) for m in MODELS.list()}
    fits = [m for m, node in nodes.items() if node is not None and mismatch(caps, dataclasses.replace(
        node, categories=node.categories and (caps.max_categories or node.categories))) is None]  # binary-only:
    # the model's binary variant, where its variables' categories are an option
    if not fits:  # e.g. expectation: no model of the zoo has a cost per categorical variable
        assert caps.per_variable_cost, f"no registered model fits {name}"
        return
    cheap = [m for m in fits if m in CHEAP_MODELS]
    assert cheap, f"{name} fits {fits}: add the cheapest of them to CHEAP_MODELS"
    torch.manual_seed(0)
    options = {"estimator": name, "hidden": 32}
    if caps.max_categories and nodes[cheap[0]].categories:  # a binary-only estimator: the model's binary variant
        options["n_classes"] = caps.max_categories
    model = MODELS.get(cheap[0])(options, CHEAP_MODELS[cheap[0]])
    x = (torch.rand(16, 1, 8, 8) > 0.5).float()
    loss = model.estimator_loss((x, torch.zeros(16)))
    grads = torch.autograd.grad(loss, list(model.estimator_parameters()), allow_unused=True)
    assert torch.isfinite(loss) and any(g is not None and g.abs().sum() > 0 for g in grads)
    assert model.estimator.name == name


@functools.cache
def recipe_models() -> dict:
    """recipe name -> (model name, path)."""
    return {name: (load_config(name)["model"]["name"], path) for name, path in all_recipes().items()}


@pytest.mark.parametrize("model", MODELS.list())
def test_every_model_has_a_recipe_whose_config_validates(model):
    recipes = {name: path for name, (m, path) in recipe_models().items() if m == model}
    assert recipes, f"model '{model}' has no recipe"
    smallest = min(recipes, key=lambda r: recipes[r].stat().st_size)
    cfg = load_config(smallest, ["trainer.fast_dev_run=true"])
    assert cfg["model"]["name"] == model and cfg["recipe"] == smallest
