"""The model, data and trainer keys of a recipe, and its estimators' names and options, are checked
before torch is imported: each model folder's config.py and zoo/estimators/options.py hold the option
dataclasses and import no torch; each config.py declares its entries once (name, class path, options);
lightning.Trainer's arguments are read from its source. A mistyped key is refused in ~0.2 s (with torch
and Lightning imported first, ~4 s)."""

import subprocess
import sys

import pytest

from zoo.registry import DATAMODULES, MODELS


def test_every_declared_entry_is_a_class_of_its_kind_whose_config_is_the_declared_one():
    """A declaration names its class by path: the path imports, the class is a LightningModule (a
    LightningDataModule), and its own ``Config`` (what a checkpoint is rebuilt with) is the declared one."""
    import lightning as L

    bases = {"model": L.LightningModule, "datamodule": L.LightningDataModule}
    for kind, registry in (("model", MODELS), ("datamodule", DATAMODULES)):
        declared = [name for name in registry.list() if registry.builtin_config(name) is not None]
        assert len(declared) >= (6 if kind == "model" else 10), (kind, declared)
        for name in declared:
            entry = registry.entry(name)
            assert issubclass(entry.obj, bases[kind]), (kind, name)
            assert getattr(entry.obj, "Config", entry.config) is entry.config, (kind, name)


def test_a_name_declared_twice_with_another_class_is_refused():
    from zoo.errors import UserError
    from zoo.registry import Registry

    registry = Registry("model")
    registry.declare("x", "pkg.a:X")
    registry.declare("x", "pkg.a:X")  # the same declaration again (a module imported twice): fine
    with pytest.raises(UserError, match="two models are declared as 'x'"):
        registry.declare("x", "pkg.b:X")


CASES = [  # (recipe, override, what the one-line error says): one model key and one data key per folder
    ("vae_digits", "model.latent_dimm=3", "did you mean: latent_dim"),
    ("dvae_digits", "data.binarise=static", "did you mean: binarize"),
    ("sat_shapes_hard", "model.beam_size=0", "'beam_size'"),
    ("sat_shapes_soft", "data.batch_sise=3", "did you mean: batch_size"),
    ("maml_sinusoid", "model.inner_lr=-1", "inner_lr"),
    ("maml_sinusoid", "data.shot=5", "did you mean: shots"),
    ("ood_digits_joint", "model.mod=joint", "did you mean: mode"),
    ("ood_toy2d", "data.separation=100", "'separation'"),
    ("seqgan_oracle_small", "model.rollout=4", "did you mean: rollouts"),
    ("seqgan_text", "data.max_len=1", "max_len"),
    ("skipgram_lee", "model.thredas=2", "did you mean: threads"),
    ("skipgram_synthetic", "data.planted.group=3", "did you mean: groups"),
    ("vae_digits", "model.estimator=reparm", "unknown estimator 'reparm' (did you mean: reparam"),
    ("dvae_digits", "model.estimator={name: reinforce, baselin: ema}", "unknown option 'baselin' in estimator"),
    ("seqgan_oracle_small", "model.estimator={name: rloo, n: 0}", "'n'"),
    ("vae_digits", "trainer.max_epoch=3", "did you mean: max_epochs"),
    ("skipgram_synthetic", "trainer.acelerator=cpu", "did you mean: accelerator"),
]


@pytest.mark.parametrize("recipe, override, expected", CASES)
def test_a_mistyped_model_or_data_key_is_refused_before_torch_is_imported(recipe, override, expected):
    code = ("import sys\n"
            "from zoo.config import load_config\n"
            "from zoo.errors import UserError\n"
            "try:\n"
            f"    load_config({recipe!r}, [{override!r}])\n"
            "except UserError as err:\n"
            "    print('refused:', err)\n"
            "print('torch imported:', 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and expected in out.stdout, out.stdout
    assert "torch imported: False" in out.stdout, out.stdout


def test_a_valid_recipe_still_gets_the_checks_that_need_the_classes():
    """The early check only adds a refusal: an estimator that does not fit the node is still refused,
    by the seam, after the classes are imported."""
    from zoo.config import load_config
    from zoo.errors import UserError

    cfg = load_config("vae_digits", ["model.latent_dim=3"])
    assert cfg["model"]["latent_dim"] == 3
    with pytest.raises(UserError, match="gumbel_softmax"):
        load_config("vae_digits", ["model.estimator=gumbel_softmax"])  # categorical-only, on a Gaussian latent


def test_every_declared_estimator_is_an_estimator_whose_config_is_the_declared_one():
    from zoo.estimators import ESTIMATORS, Estimator

    declared = ESTIMATORS.declared()
    assert len(declared) == 10, declared
    for name in declared:
        entry = ESTIMATORS.entry(name)
        assert issubclass(entry.obj, Estimator) and entry.obj.Config is entry.config, name


def test_an_estimator_registered_in_this_process_is_not_refused_early():
    """The early check knows the built-ins only; one registered by the user's own code (or named by a
    dotted path, or a plugin) goes on to the full check."""
    from zoo.config import load_config
    from zoo.errors import UserError
    from zoo.estimators import ESTIMATORS, Reinforce, register_estimator
    from zoo.estimators.options import ReinforceOptions

    register_estimator("early_check_own", config=ReinforceOptions)(type("Own", (Reinforce,), {}))
    try:
        cfg = load_config("vae_digits", ["model.estimator=early_check_own"])
        assert cfg["model"]["estimator"] == "early_check_own"
    finally:
        ESTIMATORS._entries.pop("early_check_own")
    with pytest.raises(UserError, match="cannot import module 'nope_pkg.estimators'"):  # not "unknown estimator"
        load_config("vae_digits", ["model.estimator=nope_pkg.estimators:Mine"])


def test_zoo_estimators_imports_its_modules_when_a_name_is_used():
    code = ("import sys\n"
            "import zoo.estimators as E\n"
            "print('torch after import:', 'torch' in sys.modules)\n"
            "print(E.Reinforce.__module__, E.reinforce.RLOO.__name__, sorted(E.__all__)[:2])\n"
            "from zoo.estimators import get_estimator\n"
            "print(type(get_estimator('rloo')).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "torch after import: False" in out.stdout
    assert "zoo.estimators.reinforce RLOO ['ARM', 'BeamResult']" in out.stdout and "\nRLOO\n" in out.stdout, out.stdout


def test_trainer_keys_read_from_lightnings_source_are_its_signature():
    """If a Lightning release moves or changes Trainer.__init__, this fails here, not in a user's run."""
    import inspect

    import lightning as L

    from zoo.trainer_options import trainer_keys_from_source

    signature = inspect.signature(L.Trainer.__init__).parameters
    assert trainer_keys_from_source() == tuple(p for p in signature if p != "self")


def test_without_lightnings_source_the_trainer_keys_wait_for_the_full_check(monkeypatch):
    import importlib.util

    from zoo.config import load_config
    from zoo.errors import UserError
    from zoo.trainer_options import trainer_keys_from_source

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    trainer_keys_from_source.cache_clear()  # read again, now without the source
    try:
        assert trainer_keys_from_source() is None
        with pytest.raises(UserError, match=r"unknown key 'max_epoch' .*\[trainer\] \(lightning.Trainer arguments\)"):
            load_config("vae_digits", ["trainer.max_epoch=3"])  # refused by the check against the class
    finally:
        trainer_keys_from_source.cache_clear()  # the tests after this one read the real source again
