"""A resumed run trains on exactly as the uninterrupted one would, for every recipe family.

Each case is a recipe shortened to 2 epochs of 4 training batches (``trainer.limit_*``, tiny data). It runs
straight, and in three parts in one run folder: stopped cleanly at the end of epoch 0 (an epoch-end
checkpoint), resumed and killed with SIGKILL in another process at step 7 (after a save at step 6, mid-epoch
1), resumed again from that step save to the end. The final checkpoint's weights (live and averaged),
optimizer and scheduler states, callback states (RNG states among them), the loader's place and the metrics
file's rows must equal the straight run's, bit for bit, on the CPU with one thread. The recipes come from the
recipe folder: a recipe is covered or excluded by name with a reason (``test_every_recipe_is_covered_or_excluded``)
in its model's own tests folder (``tests/<folder>/<folder>_cases.py``, collected by tests/recipe_data.py).
Hogwild skip-gram, which no run repeats to the bit, and a 2-process DDP run have their own tests below. About
110 s of CPU in all (2026-11-28, 2-core machine).

Every estimator that fits a model's stochastic node (the registry's, with their defaults, and ``VARIANTS``: the
options that give an estimator state of its own) is run on that model too (on the hosts its cases name), killed at
step 7 after a step save and resumed (``test_every_estimator_resumes_after_a_kill_as_the_straight_run``): the pairs
in ``FAST`` in ``make test``, the others in ``make test-slow``; every pair's model is built in ``make test``, where
none may leave an estimator's layer to be sized at the first batch (a checkpoint is loaded into layers that exist)."""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from platform_testlib import forkserver, train_in_child  # tests/platform, on sys.path via conftest
from recipe_data import ESTIMATOR_HOSTS, HOST_SETTINGS, NOT_RESUMED, REAL_DATA, RESUME, RESUME_FAST, RESUME_STEPS

from zoo.config import load_config
from zoo.recipe_files import all_recipes
from zoo.schema import thaw
from zoo.train import train

EPOCH = 4  # training batches an epoch
COMMON = ["trainer.max_epochs=2", f"trainer.limit_train_batches={EPOCH}", "trainer.limit_val_batches=1",
          "trainer.deterministic=true", "trainer.accelerator=cpu", "trainer.enable_progress_bar=false",
          "trainer.enable_model_summary=false", "trainer.log_every_n_steps=1", "trainer.num_sanity_val_steps=0",
          "test_after_fit=false", "threads=1", "logger=[csv]", "checkpoint.every_n_epochs=1"]


@dataclass(frozen=True)
class Steps:
    """Global steps (optimizer steps: a batch of a loop with several optimizers makes several) at the end of
    epoch 0, at the step save (after batch 1 of epoch 1), at the kill (after batch 2) and at the end."""

    epoch_end: int = EPOCH
    save_at: int = EPOCH + 2
    kill_at: int = EPOCH + 3
    total: int = 2 * EPOCH


STEPS = {case: Steps(*steps) for case, steps in RESUME_STEPS.items()}  # the cases whose batches are not one step each
CASES: dict[str, list[str]] = RESUME  # recipe, or recipe:variant -> the overrides that make it small
EXCLUDED: dict[str, str] = NOT_RESUMED  # recipe -> why it has no case of its own


def recipe_of(case: str) -> str:
    return case.split(":")[0]


def test_every_recipe_is_covered_or_excluded():
    recipes = set(all_recipes())
    covered = {recipe_of(c) for c in CASES}
    assert not covered & set(EXCLUDED), "a recipe both covered and excluded"
    missing = recipes - covered - set(EXCLUDED)
    assert not missing, (f"recipes with no resume case: add one to RESUME, or to NOT_RESUMED with a reason, in "
                         f"tests/<folder>/<folder>_cases.py: {missing}")
    assert not (covered | set(EXCLUDED)) - recipes, "cases of recipes that are gone"


def test_each_models_cases_are_in_its_own_tests_folder():
    """What these tests need of a recipe is in its model's tests folder (``tests/<folder>/<folder>_cases.py`` for
    ``recipes/<folder>/``), so that a new model edits no shared test: every recipe folder has its cases file, and
    each file names its own folder's recipes only."""
    from recipe_data import MODULES

    from zoo.recipe_files import find_recipe

    folder_of = {name: find_recipe(name).parent.name for name in all_recipes()}
    files = {Path(m.__file__).parent.name: m for m in MODULES}
    assert set(files) == set(folder_of.values()), (sorted(files), sorted(set(folder_of.values())))
    for folder, module in files.items():
        for table in ("RESUME", "NOT_RESUMED", "RESUME_STEPS", "REAL_DATA", "HOST_SETTINGS"):
            others = {key for key in getattr(module, table, {}) if folder_of.get(recipe_of(key)) != folder}
            assert not others, f"{module.__file__} {table} names recipes of another folder: {others}"


def callbacks(recipe: str, *extra: str) -> str:
    """The recipe's own callbacks (EMA weights) and the test's, as one override."""
    own = [json.dumps(c) for c in load_config(recipe).get("callbacks") or []]
    return f"callbacks=[{', '.join([*own, *extra])}]"


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_equal(a, b, where: str) -> None:
    """Nested dicts / lists of tensors and numbers, equal to the bit (NaN where the other has NaN)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        same = torch.equal(a, b) or (a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
                                      and torch.equal(a.nan_to_num(), b.nan_to_num()))  # a threshold not fitted yet
        assert same, f"{where} differs (largest difference {(a.double() - b.double()).abs().max():.3g})"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {set(a) ^ set(b)}"
        for k in a:
            assert_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


def metric_rows(run: Path) -> dict:
    """{(epoch, step, column): value} over the run's metrics files in order (logs/metrics.csv, then
    logs/resume-N/): a later part's row replaces what a killed part wrote past its last save."""
    rows: dict = {}
    files = [run / "logs" / "metrics.csv"]
    files += sorted(run.glob("logs/resume-*/metrics.csv"), key=lambda p: int(p.parent.name.split("-")[1]))
    for path in files:
        if not path.is_file():
            continue
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                for col, value in row.items():
                    if col not in ("epoch", "step") and not col.endswith("_per_s") and value != "":  # no clock
                        rows[(row["epoch"], row["step"], col)] = value
    return rows


def in_run(state, run: Path):
    """``state`` with the run folder's path written as RUN (the callbacks' states name their files), without
    ModelCheckpoint's ``current_score``: the score at its previous save, which its ``load_state_dict`` does not
    restore (None in a resumed run until its next save; no part of training)."""
    if isinstance(state, str):
        return state.replace(str(run), "RUN")
    if isinstance(state, dict):
        return {in_run(k, run): in_run(v, run) for k, v in state.items() if k != "current_score"}
    if isinstance(state, (list, tuple)):
        return [in_run(v, run) for v in state]
    return state


def compare(straight: Path, resumed: Path, steps: Steps) -> None:
    a, b = load(straight / "checkpoints" / "last.ckpt"), load(resumed / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == steps.total
    for key in ("state_dict", "optimizer_states", "lr_schedulers", "current_model_state"):
        assert (key in a) == (key in b), key
        if key in a:
            assert_equal(a[key], b[key], key)
    # every callback's state: the RNG states, the EMA average's count, the best checkpoint's score and name
    assert_equal(in_run(a["callbacks"], straight), in_run(b["callbacks"], resumed), "callbacks")
    assert_equal(a["loops"]["fit_loop"]["state_dict"], b["loops"]["fit_loop"]["state_dict"], "the loader's place")
    want, got = metric_rows(straight), metric_rows(resumed)
    assert want, "the straight run logged nothing"
    assert want == got, {k: (want.get(k), got.get(k)) for k in set(want) | set(got) if want.get(k) != got.get(k)}


def killed(argv: list[str], log: Path, timeout: float = 600.0) -> None:
    """``train(argv)`` in another process, which KillAt ends with SIGKILL. A forkserver's child: the server, a
    fresh interpreter, imports torch and Lightning once for all cases (a new interpreter each would take seconds a
    case), and its children do not inherit this process's state (see ``train_in_child``)."""
    p = forkserver().Process(target=train_in_child, args=(argv, str(log)))
    p.start()
    p.join(timeout)
    if p.is_alive():
        p.kill()
        p.join()
        pytest.fail(f"the run to be killed was still running after {timeout:.0f} s")
    assert p.exitcode == -signal.SIGKILL, f"exit code {p.exitcode}: {log.read_text()[-3000:]}"


def run_in_parts(opts: list[str], recipe: str, folder: Path, steps: Steps) -> Path:
    """Stopped at the end of epoch 0, resumed and killed mid-epoch 1 after a step save, resumed to the end."""
    stopped = train([*opts, f"run_dir={folder}", callbacks(recipe, "{name: 'toymodel:StopAfterEpoch', epoch: 0}")])
    saved = load(stopped.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == steps.epoch_end
    assert saved["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] == 1  # epoch 0 closed
    killed([*opts, f"run_dir={folder}", "ckpt_path=last",
            callbacks(recipe, f"{{name: 'toymodel:KillAt', step: {steps.kill_at}}}")], folder / "killed.log")
    saved = load(stopped.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == steps.save_at
    assert 0 < saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] < EPOCH  # mid-epoch 1
    resumed = train([*opts, f"run_dir={folder}", "ckpt_path=last", callbacks(recipe)])
    assert resumed.run_dir == stopped.run_dir
    return resumed.run_dir


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in RESUME_FAST else pytest.mark.slow)
                                  for c in sorted(CASES)])
def test_a_stopped_killed_and_resumed_run_ends_as_the_straight_one(case, tmp_path):
    recipe = recipe_of(case)
    data = REAL_DATA[recipe](tmp_path) if recipe in REAL_DATA else []
    if recipe.startswith("skipgram"):  # its generated corpus and cache, else under ./data
        data.append(f"data.root={tmp_path / 'data'}")
    steps = STEPS.get(case, Steps())
    opts = [f"recipe={recipe}", *COMMON, f"checkpoint.every_n_train_steps={steps.save_at}", *data, *CASES[case]]
    straight = train([*opts, f"run_dir={tmp_path}/straight", callbacks(recipe)])
    compare(straight.run_dir, run_in_parts(opts, recipe, tmp_path / "parts", steps), steps)


# one case for each model that takes the key compile (its spec's compiled), run compiled with the eager backend
COMPILED = ("vae_digits", "dvae_digits", "ood_digits_joint", "seqgan_oracle_small:adversarial", "sat_shapes_soft")


def test_every_model_that_takes_compile_has_a_compiled_resume_case():
    from zoo.registry import MODELS

    takes = {name for name in MODELS.list() if isinstance(MODELS.spec(name).compiled, tuple)}
    assert takes == {load_config(recipe_of(case))["model"]["name"] for case in COMPILED}


@pytest.mark.slow
@pytest.mark.parametrize("case", COMPILED)
def test_a_compiled_run_stopped_killed_and_resumed_ends_as_the_straight_uncompiled_one(case, tmp_path):
    """``compile={backend: eager}``: the nets compiled in place (dynamo captures their calls and runs the captured
    ops as they are), the run in parts resumes from its own checkpoints and ends as the straight uncompiled run,
    bit for bit: the checkpoints hold the uncompiled model's keys, and compiling changes no number."""
    recipe = recipe_of(case)
    data = REAL_DATA[recipe](tmp_path) if recipe in REAL_DATA else []
    steps = STEPS.get(case, Steps())
    opts = [f"recipe={recipe}", *COMMON, f"checkpoint.every_n_train_steps={steps.save_at}", *data, *CASES[case]]
    straight = train([*opts, f"run_dir={tmp_path}/straight", callbacks(recipe)])
    compare(straight.run_dir, run_in_parts([*opts, "compile={backend: eager}"], recipe, tmp_path / "parts", steps),
            steps)


def test_hogwild_skipgram_resumes_at_the_same_step_data_position_and_learning_rate(tmp_path):
    """Hogwild (``model.threads=2``): the threads update the shared tables in whatever order they run, so no two
    runs are bit-exact, resumed or not, and the weights are not compared. What does not depend on that order
    must still match the straight run: the step, the loader's place, and the learning rate of every logged step
    (it falls with the words trained, so a resume that replayed or skipped a chunk would show there)."""
    opts = ["recipe=skipgram_synthetic", *COMMON, f"checkpoint.every_n_train_steps={Steps().save_at}",
            *CASES["skipgram_synthetic"], "model.threads=2", "model.job_tokens=1000", f"data.root={tmp_path / 'data'}"]
    straight = train([*opts, f"run_dir={tmp_path}/straight"])
    resumed = run_in_parts(opts, "skipgram_synthetic", tmp_path / "parts", Steps())
    a, b = load(straight.run_dir / "checkpoints" / "last.ckpt"), load(resumed / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == Steps().total
    assert_equal(a["loops"]["fit_loop"]["state_dict"], b["loops"]["fit_loop"]["state_dict"], "the loader's place")
    assert a["state_dict"].keys() == b["state_dict"].keys()
    assert all(torch.isfinite(v).all() for v in b["state_dict"].values())
    lr = {k: v for k, v in metric_rows(straight.run_dir).items() if k[2] == "train/lr"}
    assert len(lr) == Steps().total  # every step logged
    assert lr == {k: v for k, v in metric_rows(resumed).items() if k[2] == "train/lr"}


@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_a_ddp_run_stopped_killed_and_resumed_ends_as_the_straight_one(tmp_path):
    """The same under two CPU processes (gloo), on a model with a stochastic node: the discrete VAE trained with
    REINFORCE and a learned baseline. Each rank draws its own latents and reads its shard of every batch; both
    are killed at the same step (KillAt runs on each). Each run is a `python -m zoo.train` process, as Lightning's
    DDP launcher starts the other rank by running the same command again."""
    import subprocess
    import sys

    from platform_testlib import subprocess_env

    root = Path(__file__).resolve().parent.parent
    steps = Steps()
    recipe = "dvae_digits_reinforce"
    opts = [f"recipe={recipe}", *COMMON, f"checkpoint.every_n_train_steps={steps.save_at}", *CASES[recipe],
            "trainer.devices=2", "trainer.strategy=ddp", "data.batch_size=16"]

    def run(folder: Path, *extra: str, rc: int = 0) -> None:
        p = subprocess.run([sys.executable, "-m", "zoo.train", *opts, f"run_dir={folder}", *extra],
                           env=subprocess_env(), capture_output=True, text=True, cwd=root, timeout=600)
        assert p.returncode == rc, p.stderr[-3000:]

    run(tmp_path / "straight")
    parts = tmp_path / "parts"
    run(parts, callbacks(recipe, "{name: 'toymodel:StopAfterEpoch', epoch: 0}"))
    [last] = parts.glob(f"{recipe}/*/checkpoints/last.ckpt")
    assert load(last)["global_step"] == steps.epoch_end
    run(parts, "ckpt_path=last", callbacks(recipe, f"{{name: 'toymodel:KillAt', step: {steps.kill_at}}}"),
        rc=-signal.SIGKILL)
    assert load(last)["global_step"] == steps.save_at
    run(parts, "ckpt_path=last")
    [straight] = (tmp_path / "straight").glob(f"{recipe}/*")
    compare(straight, last.parent.parent, steps)


# ---- every estimator on every stochastic node ------------------------------------------------------------------
# ESTIMATOR_HOSTS: model with a stochastic node -> the cases (of CASES, or case:variant with settings of its own in
# HOST_SETTINGS) whose settings train it; an estimator runs on the first of them its node fits
# each registered estimator with its defaults, and these options: the ones that give an estimator state of its own
VARIANTS: list[dict] = [
    {"name": "reinforce", "baseline": "ema"},  # a running mean of the cost
    {"name": "reinforce", "baseline": "batch_mean"},
    {"name": "reinforce", "baseline": "learned"},  # an MLP of the model's features
    {"name": "reinforce", "baseline": "learned", "context_dim": 0},  # a learned constant (a model without features)
    {"name": "relax", "rebar": True},  # the control variate's learned scale of the relaxed cost
    {"name": "gumbel_softmax", "anneal_rate": 0.1},  # a temperature that falls with the step
    {"name": "straight_through", "anneal_rate": 0.1},
]
# the pairs `make test` runs (the others, about 150 s of CPU: `make test-slow`): estimator state of a kind, or kept by a
# training loop, that no recipe's own case above has (those: gumbel_softmax's schedule and relax with REBAR on the
# discrete VAE, its learned baseline, hard attention's EMA baseline)
FAST = {
    "sat-relax",  # a control variate per word (per_variable), sized by the node's L locations
    "seqgan-relax",  # a control variate reading G's hidden state, in SeqGAN's manual optimisation
    "seqgan-reinforce[baseline=ema]",  # an EMA baseline updated at the adversarial G steps only
    "seqgan-gumbel_softmax[anneal_rate=0.1]",  # a temperature set from SeqGAN's own count of G steps
    "maml_rl-reinforce[baseline=learned]",  # a learned baseline of (goal, time) in MAML-RL's inner and outer losses
}


def spec_id(spec: dict) -> str:
    """{name: reinforce, baseline: learned, context_dim: 0} -> 'reinforce[baseline=learned,context_dim=0]'."""
    options = ",".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec['name']}[{options}]" if options else spec["name"]


def host_settings(host: str) -> tuple[str, list[str]]:
    """(the case whose settings a host starts from, its own settings on top)."""
    return HOST_SETTINGS.get(host, (host, []))


@functools.cache
def host_config(host: str):
    """The host's loaded run (``load_config``: its settings and validated options objects)."""
    case, extra = host_settings(host)
    return load_config(recipe_of(case), [*CASES[case], *extra])


def host_node(host: str):
    """The StochasticNode the host's model states from its options, as the recipe check sees it (no data read)."""
    from zoo.registry import MODELS

    run = host_config(host)
    return MODELS.spec(run["model"]["name"]).node(run.model_options)


def estimator_fits(host: str, spec: dict) -> bool:
    """Whether the recipe check accepts ``spec`` on the host's node: ``zoo.estimators.seam``'s check of its options
    (a mistake there is an error here, not a misfit) and its fit to the node the model states."""
    from zoo.estimators.seam import mismatch, requirements, resolve

    node = host_node(host)
    name, _, opts = resolve(spec, "VARIANTS")
    return mismatch(requirements(name, opts), node, node.samples or getattr(opts, "n", None)) is None


def estimator_pairs() -> list:
    """pytest params (model, host, spec): each model with every estimator spec its node fits, on its first host that
    fits; the pairs outside FAST marked slow."""
    from zoo.registry import ESTIMATORS

    specs = [{"name": name} for name in ESTIMATORS.list()] + VARIANTS
    pairs = []
    for model, hosts in ESTIMATOR_HOSTS.items():
        for spec in specs:
            host = next((h for h in hosts if estimator_fits(h, spec)), None)
            if host is not None:
                row = f"{model}-{spec_id(spec)}"
                marks = () if row in FAST else (pytest.mark.slow,)
                pairs.append(pytest.param(model, host, spec, id=row, marks=marks))
    return pairs


PAIRS = estimator_pairs()


def test_every_model_with_a_stochastic_node_and_every_estimator_and_variant_has_resume_pairs():
    from zoo.registry import ESTIMATORS, MODELS

    sampling = {name for name in MODELS.list() if MODELS.spec(name).node}
    assert set(ESTIMATOR_HOSTS) == sampling, ("a model with a stochastic node needs hosts in ESTIMATOR_HOSTS, in "
                                              "tests/<folder>/<folder>_cases.py")
    specs = [p.values[2] for p in PAIRS]
    for name in ESTIMATORS.list():
        assert {"name": name} in specs, f"estimator '{name}' fits no host: add a host whose node it fits"
    for spec in VARIANTS:
        assert spec in specs, f"variant {spec} fits no host"
    assert FAST <= {p.id for p in PAIRS}, "a FAST pair that is not a pair"


@functools.cache
def host_data_info(host: str) -> dict:
    """The host's datamodule's ``info()`` (set up once): the sizes its model is built with."""
    from zoo.registry import DATAMODULES

    run = host_config(host)
    datamodule = DATAMODULES.get(run["data"]["name"])(run.data_options)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule.info()


def test_every_estimators_layers_exist_at_their_size_once_the_model_is_built():
    """Built for its node (``zoo.estimators.seam.build_for_node`` hands it the sizes the node states), no estimator
    leaves a layer to be sized at the first batch (nn.LazyLinear): a checkpoint is loaded into, and a resume's
    check compares, parameters that exist. The cheap half of the resume pairs below, over every pair."""
    from torch.nn.parameter import is_lazy

    from zoo.registry import MODELS

    for param in PAIRS:
        _, host, spec = param.values
        run = host_config(host)
        options = dataclasses.replace(run.model_options, estimator=spec)  # the model checks the spec as it builds it
        model = MODELS.get(run["model"]["name"])(options, host_data_info(host))
        lazy = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if is_lazy(t)]
        assert not lazy, f"{param.id}: {lazy} have no size until the first batch"


def run_killed(opts: list[str], recipe: str, folder: Path, steps: Steps) -> Path:
    """Killed with SIGKILL in another process at steps.kill_at (mid-epoch 1, after a step save at steps.save_at),
    then resumed from that save to the end. Returns the run folder."""
    folder.mkdir()
    killed([*opts, f"run_dir={folder}", callbacks(recipe, f"{{name: 'toymodel:KillAt', step: {steps.kill_at}}}")],
           folder / "killed.log")
    [last] = folder.glob(f"{recipe}/*/checkpoints/last.ckpt")
    saved = load(last)
    assert saved["global_step"] == steps.save_at
    assert 0 < saved["loops"]["fit_loop"]["state_dict"]["combined_loader"][0]["batches"] < EPOCH  # mid-epoch 1
    resumed = train([*opts, f"run_dir={folder}", "ckpt_path=last", callbacks(recipe)])
    assert resumed.run_dir == last.parent.parent
    return resumed.run_dir


@pytest.mark.parametrize(("model", "host", "spec"), PAIRS)
def test_every_estimator_resumes_after_a_kill_as_the_straight_run(model, host, spec, tmp_path):
    """Each (model, estimator) pair the recipe check accepts: a run killed at a saved step and resumed ends as the
    straight run, bit for bit (weights with the estimator's own state: baselines, control variates, temperatures)."""
    case, extra = host_settings(host)
    recipe = recipe_of(case)
    steps = STEPS.get(case, Steps())
    estimator = f"model.estimator={json.dumps(spec)}"
    opts = [f"recipe={recipe}", *COMMON, f"checkpoint.every_n_train_steps={steps.save_at}", *CASES[case], *extra,
            estimator]
    assert thaw(load_config(recipe, [*CASES[case], *extra, estimator])["model"]["estimator"]) == spec
    straight = train([*opts, f"run_dir={tmp_path}/straight", callbacks(recipe)])
    compare(straight.run_dir, run_killed(opts, recipe, tmp_path / "parts", steps), steps)
