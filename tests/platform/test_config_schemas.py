"""The model, data and trainer keys of a recipe, and its estimators' names and options, are checked
before torch is imported: each model folder's config.py and zoo/estimators/config.py hold the option
dataclasses and import no torch; each declares its entries' specs once (name, class path, options, what the
recipe check needs), which the classes point to;
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


def names_in_body(cls: type) -> set[str]:
    """The names a class's own body assigns or defines (read from its source)."""
    import ast
    import inspect
    import textwrap

    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    names = {node.name for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_every_declared_model_and_estimator_class_points_at_its_spec():
    """A zoo model's, datamodule's or estimator's class states nothing of its spec again: it points at the declared
    spec (``spec = ...``), and what the class answers (options, node, monitor, precisions, run check; options;
    options, capabilities, name) comes from it, so the recipe check, which reads the spec without the class, and
    the run, which builds the class, cannot disagree."""
    from zoo.core.module import ZooModule
    from zoo.estimators import ESTIMATORS, Estimator

    models = MODELS.declared()
    assert len(models) >= 7, models
    for name in models:
        spec, cls = MODELS.spec(name), MODELS.get(name)
        assert cls.spec is spec and MODELS.spec(name) is spec, name  # loaded or not, one answer
        assert cls.Config is spec.config and cls.precisions == spec.precisions, name
        for owner in cls.__mro__:  # no class between it and ZooModule restates a fact
            if owner is not ZooModule and issubclass(owner, ZooModule):
                restated = {"Config", "monitor", "monitor_mode", "precisions", "stochastic_node", "run_monitor",
                            "check_run"} & names_in_body(owner)
                assert not restated, (name, owner.__name__, restated)
    datamodules = DATAMODULES.declared()
    assert len(datamodules) >= 14, datamodules
    for name in datamodules:
        spec, cls = DATAMODULES.spec(name), DATAMODULES.get(name)
        assert cls.spec is spec and cls.Config is spec.config, name
        assert "Config" not in names_in_body(cls), name
    estimators = ESTIMATORS.declared()
    assert len(estimators) == 13, estimators
    for name in estimators:
        spec, cls = ESTIMATORS.spec(name), ESTIMATORS.get(name)
        assert issubclass(cls, Estimator) and cls.spec is spec and ESTIMATORS.spec(name) is spec, name
        assert (cls.Config, cls.capabilities, cls.name) == (spec.config, spec.capabilities, name), name
        for owner in cls.__mro__:
            if owner is not Estimator and issubclass(owner, Estimator):
                restated = {"Config", "capabilities", "name", "unbiased", "requirements"} & names_in_body(owner)
                assert not restated, (name, owner.__name__, restated)
        assert cls.requirements(cls.Config()) == spec.requirements(spec.config()), name


def test_a_spec_answers_the_same_before_and_after_its_class_is_imported():
    """The recipe check reads a model's node, precisions, monitor and run check, and an estimator's capabilities,
    from the spec; in a fresh interpreter those answers are the same before the classes are imported (no torch)
    as after."""
    code = ("import sys\n"
            "from zoo.registry import MODELS, ESTIMATORS\n"
            "from zoo.estimators.seam import requirements\n"
            "def answers():\n"
            "    out = [(n, s.config, s.node, s.monitor, s.precisions, s.check_run, s.task, s.class_name)\n"
            "           for n in MODELS.declared() for s in [MODELS.spec(n)]]\n"
            "    return out + [(n, requirements(n, s.config())) for n in ESTIMATORS.declared()\n"
            "                  for s in [ESTIMATORS.spec(n)]]\n"
            "before = answers()\n"
            "print('torch before:', 'torch' in sys.modules)\n"
            "for registry in (MODELS, ESTIMATORS):\n"
            "    for name in registry.declared():\n"
            "        registry.get(name)\n"
            "print('same after:', before == answers(), 'torch' in sys.modules)\n")
    out = run_python(code)
    assert "torch before: False" in out.stdout and "same after: True True" in out.stdout, out.stdout


def test_a_name_declared_twice_with_another_class_is_refused():
    from zoo.errors import UserError
    from zoo.registry import Registry, Spec

    registry = Registry("model")
    registry.declare(Spec("x", "pkg.a:X"))
    registry.declare(Spec("x", "pkg.a:X"))  # the same declaration again (a module imported twice): fine
    with pytest.raises(UserError, match="two models are declared as 'x'"):
        registry.declare(Spec("x", "pkg.b:X"))


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


def run_python(code: str) -> subprocess.CompletedProcess:
    """``python -c code`` in a fresh interpreter (what it imports is its own), which must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out


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
    out = run_python(code)
    assert "refused:" in out.stdout and expected in out.stdout, out.stdout
    assert "torch imported: False" in out.stdout, out.stdout


def test_every_recipe_is_checked_without_importing_torch():
    """print_config=true and every mistake found after the callbacks' check are answered without torch, for
    recipes that name Lightning's callbacks by dotted path too (their signatures and bases read from source)."""
    code = ("import sys\n"
            "from zoo.config import load_config\n"
            "from zoo.recipe_files import all_recipes\n"
            "names = sorted(all_recipes())\n"
            "heavy = []\n"
            "for name in names:\n"
            "    load_config(name)\n"
            "    if 'torch' in sys.modules:\n"
            "        heavy.append(name)\n"
            "        break\n"
            "print('recipes:', len(names), 'torch after:', heavy)\n")
    out = run_python(code)
    assert "torch after: []" in out.stdout, out.stdout
    assert int(out.stdout.split()[1]) >= 30, out.stdout


def test_a_valid_recipe_still_gets_the_checks_that_need_the_classes():
    """The early check only adds a refusal: an estimator that does not fit the node is still refused,
    by the seam, after the classes are imported."""
    from zoo.config import load_config
    from zoo.errors import UserError

    cfg = load_config("vae_digits", ["model.latent_dim=3"])
    assert cfg["model"]["latent_dim"] == 3
    with pytest.raises(UserError, match="gumbel_softmax"):
        load_config("vae_digits", ["model.estimator=gumbel_softmax"])  # categorical-only, on a Gaussian latent


def test_an_estimator_registered_in_this_process_is_not_refused_early():
    """The early check knows the built-ins only; one registered by the user's own code (or named by a
    dotted path, or a plugin) goes on to the full check."""
    from zoo.config import load_config
    from zoo.errors import UserError
    from zoo.estimators import ESTIMATORS, Reinforce, register_estimator
    from zoo.estimators.config import ReinforceOptions

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
    out = run_python(code)
    assert "torch after import: False" in out.stdout
    assert "zoo.estimators.reinforce RLOO ['ARM', 'BeamResult']" in out.stdout and "\nRLOO\n" in out.stdout, out.stdout


def test_trainer_signature_read_from_lightnings_source_is_its_signature():
    """If a Lightning release moves or changes Trainer.__init__, this fails here, not in a user's run: the keys,
    in order, and each annotation as the messages print it (the same union of types, read without torch)."""
    import lightning as L

    from zoo.schema import signature_types, type_name
    from zoo.source_signature import init_signature
    from zoo.trainer_schema import TRAINER

    params, hints, kwargs = signature_types(L.Trainer.__init__)
    read = init_signature(TRAINER)
    assert read is not None and list(read.params) == list(params) and read.takes_kwargs == kwargs
    for key in params:  # a union's order may differ (typing caches the first one made): compared as sets
        assert set(type_name(read.hints.get(key)).split(" | ")) == set(type_name(hints.get(key)).split(" | ")), key


def test_without_lightnings_source_the_trainer_is_checked_against_the_class(monkeypatch):
    from zoo import source_signature
    from zoo.config import load_config
    from zoo.errors import UserError

    monkeypatch.setattr(source_signature, "module_file", lambda name: None)
    source_signature.init_signature.cache_clear()  # read again, now without the source
    source_signature._parsed.cache_clear()
    try:
        assert source_signature.init_signature("lightning.pytorch.trainer.trainer:Trainer") is None
        with pytest.raises(UserError, match=r"unknown key 'max_epoch' .*\[trainer\] \(lightning.Trainer arguments\)"):
            load_config("vae_digits", ["trainer.max_epoch=3"])  # refused by the check against the class
    finally:
        source_signature.init_signature.cache_clear()  # the tests after this one read the real source again
        source_signature._parsed.cache_clear()


MISTAKES = [  # a recipe mistake of each kind, answered by `python -m zoo.train` without torch or Lightning
    (["recipe=vae_digits", "trainer.precision=banana"], "'precision' in recipe"),
    (["recipe=dvae_digits", "model.estimator=reparam"], "estimator 'reparam' cannot train DiscreteVAE"),
    (["recipe=vae_digits", "model.lrr=0.1"], "unknown key 'lrr'"),
    (["recipe=vae_digits", "trainer.max_epocs=2"], "did you mean: max_epochs"),
    (["recipe=vae_digits", "callbacks=[ema_weights]"], "unknown callback 'ema_weights'"),
    (["recipe=vae_digits", "callbacks=[{name: ema, decayy: 0.9}]"], "unknown option 'decayy' in callback 'ema'"),
    (["recipe=vae_digits", "callbacks=[{name: early_stopping, monitor: val/loss, mode: max}]"], "mode: min"),
    (["recipe=vae_digits", "trainer.precision=16-true"], "not supported by VAE"),
    (["recipe=skipgram_synthetic", "trainer.precision=16"], "precision=16 is not supported"),
    (["recipe=seqgan_oracle_small", "model.mle_epochs=0", "model.d_pretrain_rounds=0", "model.adv_iterations=0"],
     "schedule trains nothing"),
    (["recipe=vae_digits", "checkpoint.monitor=val/loss", "checkpoint.mode=max"], "checkpoint.mode=max"),
    (["recipe=vae_digits", "logger=[csv,csv]"], "more than once"),
    (["recipe=vae_digits", "trainer.strategy=ddp_spawn"], "not supported"),
    (["recipe=vae_digits", "print_config=true"], "recipe: vae_digits"),
]


def test_every_recipe_mistake_and_print_config_are_answered_without_torch():
    """One process answers them all (each its own exit status and message), and imports neither torch nor
    Lightning on the way."""
    code = ("import contextlib, io, sys, zoo.train\n"
            f"for argv, expected in {MISTAKES!r}:\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):\n"
            "        status = zoo.train.main(argv)\n"
            "    assert expected in out.getvalue() and status == (0 if 'print_config=true' in argv else 2), "
            "(argv, status, out.getvalue())\n"
            "print('heavy:', sorted(m for m in ('torch', 'lightning') if m in sys.modules))\n")
    out = run_python(code)
    assert "heavy: []" in out.stdout, out.stdout


def test_a_typo_is_answered_in_a_fraction_of_a_second():
    """The whole command, interpreter start-up included: at most 1 s of CPU time (user + system, the best of 3;
    the time on the clock also counts the other processes of a shared machine). It is ~0.27 s on an idle Intel
    Xeon, ~0.35 s on an AVX2 AMD EPYC; importing torch alone costs over 2 s, which is what the bound catches (the
    speed itself is benchmarks/cli_latency.py's)."""
    import resource

    times = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=vae_digits", "model.lrr=0.1"],
                             capture_output=True, text=True, timeout=600)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        assert out.returncode == 2 and "unknown key 'lrr'" in out.stderr, out.stderr
    assert min(times) <= 1.0, times


def test_a_recipes_callbacks_are_resolved_once_by_the_check(monkeypatch):
    """load_config resolves each callbacks: entry once; the checks of the run's settings (early stopping's
    direction) read what that resolution returned."""
    from zoo.callbacks import named
    from zoo.config import load_config
    from zoo.errors import UserError

    calls = []
    real = named.resolve
    monkeypatch.setattr(named, "resolve", lambda item: calls.append(item) or real(item))
    load_config("vae_digits", ["callbacks=[{name: early_stopping, monitor: val/loss}, grad_variance]"])
    assert len(calls) == 2, calls
    calls.clear()
    with pytest.raises(UserError, match="watches val/loss, a loss"):  # the direction check still sees it
        load_config("vae_digits", ["callbacks=[{name: 'lightning.pytorch.callbacks:EarlyStopping', "
                                   "monitor: val/loss, mode: max}]"])
    assert len(calls) == 1, calls
