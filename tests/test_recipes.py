"""Every recipe under recipes/ validates and runs one training + validation batch
(`trainer.fast_dev_run=true`), like lightning-hydra-template's sweep over experiments.

Recipes for real datasets run on tiny files in the real format, written by the writers in
`REAL_DATA` (each returns the overrides that point the recipe at them)."""

from pathlib import Path

import pytest
from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.config import load_config
from zoo.recipe_files import all_recipes
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
    assert_curves_drawn(result)


def logged_losses_in_csv(run_dir: Path) -> dict[str, list[float]]:
    """{train/ or val/ loss: its logged values} read from the run's logs/metrics.csv with the csv module alone."""
    import csv

    with open(run_dir / "logs" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    losses: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            leaf = key.rsplit("/", 1)[-1]
            if key.startswith(("train/", "val/")) and ("loss" in leaf or "nll" in leaf) and value:
                losses.setdefault(key, []).append(float(value))
    return losses


def assert_curves_drawn(result) -> None:
    """plots/curves.png of the run, and the figure drawn into it: a line per logged train/ and val/ loss, holding
    the values metrics.csv holds."""
    from zoo.callbacks.curves import Curves

    assert (result.run_dir / "plots" / "curves.png").is_file()
    drawn = next(c for c in result.model.trainer.callbacks if isinstance(c, Curves)).figure
    lines = {line.get_label(): list(line.get_ydata()) for ax in drawn.axes for line in ax.get_lines()}
    expected = logged_losses_in_csv(result.run_dir)
    assert any(k.startswith("train/") for k in expected), expected  # every model logs a training loss
    assert lines == expected


def _one_recipe_per_model_and_data() -> list[str]:
    """The first recipe of each (model, datamodule) pair, or its small version (the paper-size
    seqgan_oracle takes a minute a step in float64)."""
    seen: dict = {}
    for name in RECIPES:
        cfg = load_config(name)
        seen.setdefault((cfg["model"]["name"], cfg["data"]["name"]), name)
    return sorted(f"{n}_small" if f"{n}_small" in RECIPES else n for n in seen.values())


PAIR_RECIPES = _one_recipe_per_model_and_data()  # loads every recipe once, at collection

# Evaluations sized down for the precision runs: the same code in the same dtype, on fewer samples, tasks and
# ODIN settings (at the recipes' sizes these four took half the precision cases' time).
SMALL_EVALUATION = {
    "seqgan_oracle_small": ["model.eval_samples=200", "model.test_samples=200"],
    "maml_nav2d": ["data.val_tasks=4", "data.test_tasks=4"],
    "ood_digits_ce": ["model.odin_temperatures=[1000.0]", "model.odin_eps=[0.001]"],
    "ood_cifar10_ce": ["model.odin_temperatures=[1000.0]", "model.odin_eps=[0.001]"],
}


# The pairs make test runs (a code path of its own each: vmap under autocast, SeqGAN's LSTM without oneDNN's
# bfloat16, float64 pictures); make test-slow runs every other (recipe, precision) pair.
FAST_PRECISIONS = {("vae_digits", "bf16-mixed"), ("vae_digits", "64-true"), ("maml_sinusoid", "bf16-mixed"),
                   ("seqgan_text", "bf16-mixed"), ("ood_toy2d", "64-true")}


@pytest.mark.parametrize("name, precision", [
    pytest.param(n, p, marks=() if (n, p) in FAST_PRECISIONS else pytest.mark.slow)
    for n in PAIR_RECIPES for p in ("bf16-mixed", "64-true")])
def test_recipe_in_other_precisions_on_the_cpu(name, precision, tmp_path: Path):
    """Other dtypes on a machine without a GPU: autocast on the CPU takes the code paths of
    bf16-mixed on a GPU (dtype mixing, vmap under autocast: MAML's conv net meets vmap's batch
    norm), and float64 weights find every tensor made in float32 next to them (VAE and OOD sample
    pictures, MAML's plots). One training batch, validation, test and the pictures."""
    import torch

    overrides = REAL_DATA[name](tmp_path) if name in REAL_DATA else []
    result = train([f"recipe={name}", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1",
                    "trainer.limit_train_batches=1", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
                    "trainer.accelerator=cpu", f"trainer.precision={precision}", "trainer.num_sanity_val_steps=0",
                    "trainer.enable_progress_bar=false", *SMALL_EVALUATION.get(name, []), *overrides])
    assert result.model.trainer.precision == precision
    params = list(result.model.parameters())
    assert all(torch.isfinite(p).all() for p in params), "non-finite weights after one step"
    if precision == "64-true":
        assert all(p.dtype == torch.float64 for p in params)


# Models whose training step may leave parameters without gradients (sampled attention with a
# baseline, a learned baseline): two gloo processes, two batches. SeqGAN, skip-gram and the toy
# model have their own DDP tests.
DDP_RECIPES = ["sat_shapes_hard", "dvae_digits_reinforce"]


@pytest.mark.slow
@pytest.mark.parametrize("name", DDP_RECIPES)
def test_recipe_runs_under_cpu_ddp(name, tmp_path: Path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = subprocess_env()  # extends PYTHONPATH, never replaces it
    proc = subprocess.run([sys.executable, "-m", "zoo.train", f"recipe={name}", f"run_dir={tmp_path}",
                           "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp",
                           "trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=1",
                           "trainer.limit_test_batches=1", "trainer.enable_progress_bar=false"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder:") == 1
    assert len(list((tmp_path / name).iterdir())) == 1


@pytest.mark.parametrize("name", PAIR_RECIPES)
def test_every_option_refuses_a_value_of_the_wrong_type(name):
    """A word where a number is expected, 2 where true/false is, an empty data folder: one
    UserError each, never a traceback and never silently read (OmegaConf reads 2 as true); checked
    by fuzzing every key."""
    from zoo.errors import UserError
    from zoo.schema import flatten

    cfg = load_config(name)
    checked = 0
    for section in ("model", "data"):
        for key, value in flatten(cfg[section]).items():
            if isinstance(value, bool):
                bad = "2"
            elif isinstance(value, (int, float)):
                bad = "abc"
            elif key == "root":  # '' would mean the working directory, caches and all
                bad = "''"
            else:
                continue
            with pytest.raises(UserError, match=key.split(".")[-1]):
                load_config(name, [f"{section}.{key}={bad}"])
            checked += 1
    assert checked >= 3, f"{name}: too few typed options to check"


BAD_VALUES = {bool: ["maybe", "2", "-1"], int: ["0", "-1", "abc", "2.5"], float: ["-1.0", "0.0", ".nan", "abc"],
              str: ["zzz_bogus", "''"], list: ["[]", "[0]", "abc"], type(None): ["abc", "-1"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", RECIPES)
def test_every_option_of_every_recipe_takes_a_bad_value_without_a_traceback(name):
    """The whole fuzz (slow: ~1.5 min): every model./data. key of every recipe with the values of
    ``BAD_VALUES`` for its type; the config either takes the value or refuses it with a UserError,
    never another exception."""
    from zoo.errors import UserError
    from zoo.schema import flatten

    cfg = load_config(name)
    for section in ("model", "data"):
        for key, value in flatten(cfg[section]).items():
            for bad in BAD_VALUES.get(type(value), []):
                try:
                    load_config(name, [f"{section}.{key}={bad}"])
                except UserError:
                    pass


@pytest.mark.parametrize("name", ["vae_digits", "dvae_digits", "ood_digits_ce", "ood_digits_joint", "ood_toy2d",
                                  "maml_nav2d", "skipgram_synthetic"])
def test_a_recipe_logs_at_least_once_an_epoch(name):
    """A logging interval longer than the epoch makes Lightning warn on every run (the default demo
    did), and under PYTHONWARNINGS=error it ends the run. The recipes whose data is built in seconds."""
    from zoo.train import build

    cfg = load_config(name)
    datamodule, _ = build(cfg)
    every = cfg["trainer"].get("log_every_n_steps", 50)  # Lightning's default
    assert every <= len(datamodule.train_dataloader()), (name, every)
