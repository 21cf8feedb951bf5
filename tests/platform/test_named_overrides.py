"""Overrides of an option whose value names a thing (an estimator, an optimiser, a model, ...): a key that names
it (``X=NAME``, ``X={name: NAME, ...}``, ``X.name=NAME``) picks it whole, ``X.OPTION=V`` refines the thing
named in any order, ``X.OPTION=V`` alone refines the recipe's choice; a mix that cannot be resolved is refused.
And the command line's hints: a bare recipe name, a Trainer argument without ``trainer.``, YAML's ``a:b``."""

import json

import pytest
import yaml
from platform_testlib import assert_refused, run_main

from zoo.config import load_config
from zoo.registry import ESTIMATORS


def printed_config(argv: list[str], capsys) -> dict:
    """``python -m zoo.train ARGV print_config=true``'s config, read back."""
    from zoo.train import main

    code = main([*argv, "print_config=true"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return yaml.safe_load(printed.out)


PICKS = [  # recipe, overrides in one order, the estimator that must result
    ("dvae_digits", ["model.estimator=rloo", "model.estimator.n=4"], {"name": "rloo", "n": 4}),
    ("sat_shapes_hard", ["model.estimator=rloo", "model.estimator.n=4"], {"name": "rloo", "n": 4}),
    ("dvae_digits", ["model.estimator=reinforce", "model.estimator.baseline=ema"],
     {"name": "reinforce", "baseline": "ema"}),
    ("dvae_digits", ["model.estimator={name: rloo}", "model.estimator.n=4"], {"name": "rloo", "n": 4}),
    ("dvae_digits", ["model.estimator.name=rloo", "model.estimator.n=4"], {"name": "rloo", "n": 4}),
    ("dvae_digits", ["model.estimator={name: gumbel_softmax, tau: 0.5}", "model.estimator.n=2"],
     {"name": "gumbel_softmax", "tau": 0.5, "n": 2}),  # the recipe's own name, picked afresh: its tau_min goes
    # X=NAME twice: the last wins (as any key given twice), refined all the same
    ("dvae_digits", ["model.estimator=reinforce", "model.estimator=rloo", "model.estimator.n=4"],
     {"name": "rloo", "n": 4}),
]


@pytest.mark.parametrize("order", ["as given", "options first"])
@pytest.mark.parametrize("recipe, overrides, expected", PICKS)
def test_a_key_that_names_a_thing_picks_it_and_its_options_refine_it(recipe, overrides, expected, order, capsys):
    if order == "options first":  # model.estimator.OPTION=V before model.estimator=NAME: the same
        options = [o for o in overrides if o.split("=")[0].count(".") > 1]
        overrides = [*reversed(options), *(o for o in overrides if o not in options)]
    assert printed_config([f"recipe={recipe}", *overrides], capsys)["model"]["estimator"] == expected


def test_an_option_alone_refines_the_recipes_choice(tmp_path, capsys):
    cfg = printed_config(["recipe=dvae_digits", "model.estimator.tau=0.7"], capsys)
    assert cfg["model"]["estimator"] == {"name": "gumbel_softmax", "tau": 0.7, "tau_min": 0.5, "anneal_rate": 1e-3}
    # a choice made by name alone ("estimator: rloo") is refined the same way
    recipe = tmp_path / "by_name.yaml"
    recipe.write_text("base: dvae_digits\nmodel: {estimator: rloo}\n")
    cfg = printed_config([f"recipe={recipe}", "model.estimator.n=4"], capsys)
    assert cfg["model"]["estimator"] == {"name": "rloo", "n": 4}
    # a recipe that names no estimator: the model's default (dvae: gumbel_softmax) is refined
    recipe = tmp_path / "default.yaml"
    recipe.write_text("description: t\nmodel: {name: dvae}\ndata: {name: digits}\n")
    cfg = printed_config([f"recipe={recipe}", "model.estimator.tau=0.5"], capsys)
    assert cfg["model"]["estimator"] == {"name": "gumbel_softmax", "tau": 0.5}
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "model.estimator.baseline=ema"], capsys)
    assert_refused(code, err, r"model.estimator.baseline=ema refines the model's default estimator gumbel_softmax: "
                   r"to pick another estimator, name it too", tmp_path / "runs")


def test_other_named_options_follow_the_same_rule():
    # the recipe's classifier_optim is {name: adam, lr: 2.0e-4}; sgd picked afresh takes the model's default lr
    for overrides in (["model.classifier_optim=sgd", "model.classifier_optim.beta1=0.0"],
                      ["model.classifier_optim.beta1=0.0", "model.classifier_optim=sgd"]):
        optim = load_config("ood_cifar10_joint", overrides)["model"]["classifier_optim"]
        assert optim == {"name": "sgd", "lr": 1e-3, "beta1": 0.0, "weight_decay": 0.0}
    optim = load_config("ood_cifar10_joint", ["model.classifier_optim.beta1=0.0"])["model"]["classifier_optim"]
    assert optim == {"name": "adam", "lr": 2e-4, "beta1": 0.0, "weight_decay": 0.0}  # refined: the recipe's lr


def test_a_sweep_over_estimators_trains_the_estimator_each_run_names(tmp_path):
    from zoo.sweep.command import make_sweep

    sweep = make_sweep("dvae_digits", {"model.estimator": ["rloo", "reinforce"]}, ["model.estimator.n=2"],
                       parallel=1, name="s", yes=False, command="test", launcher="local")
    picked = [load_config(sweep.recipe, run.overrides)["model"]["estimator"] for run in sweep.runs]
    assert picked == [{"name": "rloo", "n": 2}, {"name": "reinforce", "n": 2}]


@pytest.mark.parametrize("overrides, expected", [
    (["model.estimator={name: rloo}", "model.estimator.name=reinforce"],
     r"'model.estimator=\{name: rloo\}' and 'model.estimator.name=reinforce' name two things for model.estimator: "
     r"name one, e\.g\. model.estimator=reinforce"),
    (["model.estimator.name=reinforce", "model.estimator=rloo", "model.estimator.n=4"],
     r"'model.estimator=rloo' and 'model.estimator.name=reinforce' name two things"),
    # an option the named estimator does not have: the recipe's options did not carry over
    (["model.estimator.tau=0.5", "model.estimator=rloo"],
     r"unknown option 'tau' in estimator 'rloo'.*model.estimator=rloo picks rloo \(the recipe's gumbel_softmax "
     r"and its options do not carry over\): drop model.estimator.tau=0.5, or pick an estimator that has tau"),
    # an option alone refines the recipe's estimator: how another one is picked
    (["model.estimator.baseline=ema"],
     r"unknown option 'baseline' in estimator 'gumbel_softmax'.*model.estimator.baseline=ema refines the recipe's "
     r"estimator gumbel_softmax: to pick another estimator, name it too \(model.estimator=NAME "
     r"model.estimator.baseline=ema\)"),
    # YAML reads name:rloo (no space) as one word
    (["model.estimator={name:rloo,n:1}"],
     r"YAML reads 'name:rloo' as one key because no space follows its colon, write \{name: rloo, n: 1\}$"),
    (["callbacks=[{name:grad_variance,every_n_steps:5}]"],
     r"YAML reads 'name:grad_variance' as one key .*write \{name: grad_variance, every_n_steps: 5\}$"),
    (["model.estimator={name:zoo.estimators:RLOO, n: 2}"], r"write \{name: zoo.estimators:RLOO, n: 2\}$"),
])
def test_a_mix_that_cannot_be_resolved_is_refused(overrides, expected, tmp_path, capsys):
    code, err = run_main(["recipe=dvae_digits", f"run_dir={tmp_path}/runs", *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


@pytest.mark.parametrize("argv, expected", [
    (["vae_digits"], r"no recipe given: did you mean recipe=vae_digits\?"),
    (["recipe=vae_digits", "enable_model_summary=false"], r"did you mean trainer.enable_model_summary=false\?"),
    (["recipe=vae_digits", "gradient_clip_val=1.0"], r"did you mean trainer.gradient_clip_val=1.0\?"),
])
def test_the_command_line_hints_the_fix(argv, expected, tmp_path, capsys):
    code, err = run_main([*argv, f"run_dir={tmp_path}/runs"], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_a_recipe_file_given_without_recipe_is_hinted(tmp_path, capsys):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("base: vae_digits\n")
    code, err = run_main([str(recipe)], capsys)
    assert_refused(code, err, rf"no recipe given: did you mean recipe={recipe}\?", tmp_path / "runs")


def test_the_estimator_named_is_the_one_that_trains_and_is_recorded(tmp_path):
    from zoo.train import train

    argv = ["recipe=dvae_digits", "model.estimator.n=2", "model.estimator=rloo", "trainer.max_steps=1",
            "trainer.limit_val_batches=1", "test_after_fit=false", "trainer.enable_progress_bar=false",
            f"run_dir={tmp_path}/runs"]
    result = train(argv)
    assert type(result.model.estimator) is ESTIMATORS.get("rloo") and result.model.estimator.options.n == 2
    command, *rest = (result.run_dir / "config.yaml").read_text().splitlines()
    assert command == f"# python -m zoo.train {' '.join(argv)}"
    assert yaml.safe_load("\n".join(rest))["model"]["estimator"] == {"name": "rloo", "n": 2}
    import zoo

    loaded = zoo.load(result.run_dir / "checkpoints" / "last.ckpt")
    assert type(loaded.estimator) is ESTIMATORS.get("rloo")
    folder = loaded.save_pretrained(tmp_path / "pretrained")
    card = json.loads((folder / "config.json").read_text())
    assert card["hyper_parameters"]["cfg"]["estimator"] == {"name": "rloo", "n": 2}
    assert "model.estimator=rloo" in (folder / "README.md").read_text()


def test_hard_attention_builds_the_estimator_named():
    from zoo.runner import build

    run = load_config("sat_shapes_hard", ["model.estimator.n=3", "model.estimator=rloo", "data.n_train=16",
                                          "data.n_val=8", "data.n_test=8", "data.num_workers=0"])
    _, model = build(run)
    assert type(model.estimator) is ESTIMATORS.get("rloo") and model.estimator.options.n == 3
    # rloo's own defaults: the recipe's reinforce options (baseline ema, entropy_weight 0.002) did not carry over
    assert model.estimator.options.baseline == "rloo" and model.estimator.options.entropy_weight == 0.0
