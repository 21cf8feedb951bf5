"""The typed seam: estimators declare capabilities, models declare their stochastic node, and the
recipe loader checks the pair (name, every option, fit) before any data is touched."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from zoo.config import load_config
from zoo.errors import UserError
from zoo.estimators import ESTIMATORS, Capabilities, StochasticNode, compatible
from zoo.estimators.seam import build_for_node, check_spec, mismatch
from zoo.registry import MODELS

# what each model's node accepts with default options: the fit of every registered estimator
EXPECTED_FITS = {
    "vae": ["dr_grpo", "grpo", "reinforce", "reinforce_pp", "reparam", "rloo"],
    "dvae": ["dr_grpo", "grpo", "gumbel_softmax", "reinforce", "reinforce_pp", "relax", "rloo", "straight_through"],
    "sat": ["dr_grpo", "grpo", "gumbel_softmax", "reinforce", "reinforce_pp", "relax", "rloo", "straight_through"],
    "seqgan": ["gumbel_softmax", "reinforce", "reinforce_pp", "relax", "straight_through"],
    "ood": ["reinforce", "reinforce_pp", "reparam"],
    "maml_rl": ["dr_grpo", "grpo", "reinforce", "reinforce_pp", "rloo"],
}
SAMPLING = {"sat": {"attention": "hard"}, "ood": {"mode": "joint"}}  # the options under which they sample
NODE_MODELS = [m for m in MODELS.list() if MODELS.get(m).stochastic_node(MODELS.get(m).Config(**SAMPLING.get(m, {})))]


def node_of(model: str, **options) -> StochasticNode:
    cls = MODELS.get(model)
    return cls.stochastic_node(cls.Config(**{**SAMPLING.get(model, {}), **options}), {"image_shape": [1, 8, 8]})


@pytest.mark.parametrize("name", ESTIMATORS.list())
def test_every_registered_estimator_declares_capabilities(name):
    cls = ESTIMATORS.get(name)
    caps = cls.capabilities
    assert isinstance(caps, Capabilities), f"{name} declares no Capabilities"
    assert cls.unbiased == caps.unbiased
    assert isinstance(cls.requirements(cls.Config()), Capabilities)


def test_capabilities_follow_the_options():
    reinforce = ESTIMATORS.get("reinforce")
    opts = reinforce.Config(baseline="rloo")
    assert reinforce.requirements(opts).min_samples == 2
    assert reinforce.requirements(reinforce.Config(baseline="learned")).context
    assert not reinforce.requirements(reinforce.Config(baseline="learned", context_dim=0)).context
    assert not ESTIMATORS.get("gumbel_softmax").capabilities.unbiased


@pytest.mark.parametrize("model", NODE_MODELS)
def test_models_declare_their_node_and_the_fits_are_as_designed(model):
    """Every registered model with a node: the node is a StochasticNode, its option ``estimator`` is
    declared with ``estimator_option`` (so ``zoo.schema.validate`` hands it to the seam) and its
    default fits; the fits are the designed ones (a new model adds its line to EXPECTED_FITS)."""
    cls = MODELS.get(model)
    node = node_of(model)
    assert isinstance(node, StochasticNode)
    fields = {f.name: f for f in dataclasses.fields(cls.Config)}
    assert "estimator" in fields and fields["estimator"].metadata.get("estimator"), \
        f"{model}: declare 'estimator' with estimator_option(default)"
    check_spec(cls.Config().estimator, node, f"{model}'s default")  # the default fits
    assert model in EXPECTED_FITS, f"{model} declares a node: add the estimators it should fit to EXPECTED_FITS"
    assert compatible(node) == EXPECTED_FITS[model]


def test_a_node_is_stated_only_where_the_options_sample():
    assert MODELS.get("sat").stochastic_node(MODELS.get("sat").Config(attention="soft")) is None
    assert MODELS.get("ood").stochastic_node(MODELS.get("ood").Config(mode="ce")) is None
    assert node_of("dvae", n_latents=5, n_classes=3, n_samples=4) == StochasticNode(
        kind="categorical", differentiable_cost=True, cost_function=True, context=True, context_dim=64,
        variables=5, categories=3, samples=4, sample_size=15, hint=node_of("dvae").hint)


@pytest.mark.parametrize("recipe, override, why", [
    ("dvae_digits", "model.estimator=expectation", "one cost per categorical variable"),
    ("dvae_digits", "model.estimator=reparam", "continuous distribution with rsample"),
    ("vae_digits", "model.estimator=gumbel_softmax", "handles categorical distributions"),
    ("seqgan_oracle_small", "model.estimator=reparam", "continuous distribution with rsample"),
    ("seqgan_oracle_small", "model.estimator=rloo", "this model draws one"),
    ("sat_shapes_hard", "model.estimator={name: reinforce, baseline: learned}", "features this model does not"),
    ("dvae_digits", "model.estimator={name: reinforce, baseline: rloo}", "n >= 2 samples per input, got n=1"),
])
def test_misfits_are_refused_when_the_recipe_loads(recipe, override, why):
    with pytest.raises(UserError) as err:
        load_config(recipe, [override])
    msg = str(err.value)
    assert why in msg and "Estimators that fit:" in msg
    model = load_config(recipe)["model"]["name"]
    assert msg.rstrip().split("Estimators that fit: ")[1].startswith(", ".join(EXPECTED_FITS[model]))


def test_estimator_options_are_checked_when_the_recipe_loads():
    with pytest.raises(UserError, match="unknown option 'tua'.*did you mean: tau"):
        load_config("dvae_digits", ["model.estimator={name: gumbel_softmax, tua: 0.5}"])
    with pytest.raises(UserError, match="'tau' in estimator 'gumbel_softmax' must be > 0"):
        load_config("dvae_digits", ["model.estimator={name: gumbel_softmax, tau: 0}"])
    with pytest.raises(UserError, match="unknown estimator 'reinfroce'"):
        load_config("seqgan_oracle_small", ["model.estimator=reinfroce"])


def test_samples_option_and_context_size_reach_the_estimator():
    cfg = load_config("dvae_digits", ["model.estimator={name: reinforce, baseline: rloo}", "model.n_samples=3"])
    assert cfg["model"]["estimator"] == {"name": "reinforce", "baseline": "rloo"}
    # the learned baseline is sized from the node (the image: 8 x 8) instead of built lazily
    est = build_for_node({"name": "reinforce", "baseline": "learned"}, node_of("dvae"))
    assert est.baseline.net[0].in_features == 64
    est = build_for_node({"name": "reinforce", "baseline": "learned"}, node_of("seqgan", gen_hidden_dim=7))
    assert est.baseline.net[0].in_features == 7
    # relax's control variate reads the N x K relaxed sample and the image: sized up front (DDP, meta device)
    est = build_for_node("relax", node_of("dvae", n_latents=5, n_classes=3))
    assert est.control.net[0].in_features == 5 * 3 + 64


def test_a_recipe_estimator_replaces_the_default_instead_of_merging_into_it():
    # the captioning default is reinforce with an EMA baseline: its options must not leak into gumbel_softmax
    cfg = load_config("sat_shapes_soft", ["model.attention=hard", "model.estimator={name: gumbel_softmax}"])
    assert cfg["model"]["estimator"] == {"name": "gumbel_softmax"}


def test_an_inactive_node_is_not_checked_and_an_undeclared_estimator_is_not_refused():
    load_config("sat_shapes_soft", ["model.estimator=expectation"])  # soft attention samples nothing
    node = StochasticNode(kind="categorical", differentiable_cost=False)

    class Mine(ESTIMATORS.get("reparam")):  # a user's own estimator that declares nothing
        capabilities = None

    assert Mine.requirements(None) is None and mismatch(None, node) is None
    assert mismatch(ESTIMATORS.get("reparam").capabilities, node) is not None


def test_a_model_that_passes_no_context_refuses_a_learned_baseline_with_a_fix():
    node = StochasticNode(kind="discrete", differentiable_cost=False)
    with pytest.raises(UserError, match="context_dim: 0"):
        check_spec({"name": "reinforce", "baseline": "learned"}, node, "here")
    est = build_for_node({"name": "reinforce", "baseline": "learned", "context_dim": 0}, node)
    assert isinstance(est.baseline.const, torch.nn.Parameter)


def test_a_misfit_exits_2_before_anything_is_written(tmp_path, capsys):
    from zoo.train import main

    code = main(["recipe=dvae_digits", "model.estimator=expectation", f"run_dir={tmp_path}/runs"])
    assert code == 2
    assert "Estimators that fit: dr_grpo, grpo, gumbel_softmax" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_the_docs_seqgan_refusals_are_the_tools_words():
    """docs/estimators.md's SeqGAN column quotes the reason the recipe check gives for each estimator it refuses."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "estimators.md").read_text()
    rows = [line.strip("| ").split(" | ") for line in page.splitlines() if "| refused: " in line]
    assert len(rows) == 2, rows
    for names, cell in rows:
        for name in names.split(", "):
            with pytest.raises(UserError) as err:
                load_config("seqgan_oracle_small", [f"model.estimator={name}"])
            why = err.value.message.split(" node: ", 1)[1].removesuffix("; use one below")
            assert cell.removeprefix("refused: ") == why, (name, why)
