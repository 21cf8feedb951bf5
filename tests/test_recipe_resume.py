"""A resumed run trains on exactly as the uninterrupted one would, for every recipe family.

Each case is a recipe shortened to 2 epochs of 4 training batches (``trainer.limit_*``, tiny data). It runs
straight, and in three parts in one run folder: stopped cleanly at the end of epoch 0 (an epoch-end
checkpoint), resumed and killed with SIGKILL at step 7 in a subprocess (after a save at step 6, mid-epoch 1),
resumed again from that step save to the end. The final checkpoint's weights (live and averaged), optimizer
and scheduler states and the metrics file's rows must equal the straight run's, bit for bit, on the CPU with
one thread. The recipes come from the recipe folder: a new recipe is covered here or excluded by name with a
reason (``test_every_recipe_is_covered_or_excluded``)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.config import all_recipes, load_config
from zoo.train import train

try:
    from recipe_data import REAL_DATA  # tests/recipe_data.py: tiny files in the real formats
except ImportError:  # pragma: no cover
    REAL_DATA = {}

ROOT = Path(__file__).resolve().parent.parent
EPOCH = 4  # training batches an epoch
SAVE_AT, KILL_AT = 6, 7  # a step save mid-epoch 1, then SIGKILL one step later
COMMON = ["trainer.max_epochs=2", f"trainer.limit_train_batches={EPOCH}", "trainer.limit_val_batches=1",
          "trainer.deterministic=true", "trainer.accelerator=cpu", "trainer.enable_progress_bar=false",
          "trainer.enable_model_summary=false", "trainer.log_every_n_steps=1", "trainer.num_sanity_val_steps=0",
          "test_after_fit=false", "threads=1", "logger=[csv]", f"checkpoint.every_n_train_steps={SAVE_AT}",
          "checkpoint.every_n_epochs=1"]

# recipe (or recipe:variant) -> the overrides that make it small; every loop the zoo has
SINUSOID = ["data.meta_batch=4", "data.val_tasks=4", "data.eval_batch_tasks=4", "data.eval_query=10",
            "model.eval_inner_steps=1", "model.hidden=8"]
CASES: dict[str, list[str]] = {
    "maml_sinusoid": SINUSOID,  # second order
    "maml_sinusoid_fo": SINUSOID,  # first order
    "maml_sinusoid_pretrain": SINUSOID,  # no inner step
    "maml_omniglot_5w1s": ["model.eval_inner_steps=1"],  # the conv net, the per-task loop; tiny files
    "maml_nav2d": ["data.meta_batch=2", "data.val_tasks=2", "model.trajectories=2", "model.horizon=5",
                   "model.eval_steps=1", "model.hidden=8"],  # MAML-RL: sampled trajectories
}

# recipe -> why it has no case of its own
EXCLUDED: dict[str, str] = {
}


def recipe_of(case: str) -> str:
    return case.split(":")[0]


def test_every_recipe_is_covered_or_excluded():
    recipes = set(all_recipes())
    covered = {recipe_of(c) for c in CASES}
    assert not covered & set(EXCLUDED), "a recipe both covered and excluded"
    missing = recipes - covered - set(EXCLUDED)
    assert not missing, f"recipes with no resume case: add one to CASES or exclude them by name with a reason: {missing}"
    assert not (covered | set(EXCLUDED)) - recipes, "cases of recipes that are gone"


def callbacks(recipe: str, *extra: str) -> str:
    """The recipe's own callbacks (EMA weights) and the test's, as one override."""
    own = [json.dumps(c) for c in load_config(recipe).get("callbacks") or []]
    return f"callbacks=[{', '.join([*own, *extra])}]"


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_equal(a, b, where: str) -> None:
    """Nested dicts / lists of tensors and numbers, equal to the bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs (largest difference {(a.double() - b.double()).abs().max():.3g})"
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
                    if col not in ("epoch", "step") and value != "":
                        rows[(row["epoch"], row["step"], col)] = value
    return rows


def compare(straight: Path, resumed: Path) -> None:
    a, b = load(straight / "checkpoints" / "last.ckpt"), load(resumed / "checkpoints" / "last.ckpt")
    assert a["global_step"] == b["global_step"] == 2 * EPOCH
    for key in ("state_dict", "optimizer_states", "lr_schedulers", "current_model_state"):
        assert (key in a) == (key in b), key
        if key in a:
            assert_equal(a[key], b[key], key)
    assert_equal(a["loops"]["fit_loop"]["state_dict"], b["loops"]["fit_loop"]["state_dict"], "the loader's place")
    want, got = metric_rows(straight), metric_rows(resumed)
    assert want, "the straight run logged nothing"
    assert want == got, {k: (want.get(k), got.get(k)) for k in set(want) | set(got) if want.get(k) != got.get(k)}


def run_in_parts(opts: list[str], recipe: str, folder: Path) -> Path:
    """Stopped at the end of epoch 0, resumed and killed at step ``KILL_AT``, resumed to the end."""
    stopped = train([*opts, f"run_dir={folder}", callbacks(recipe, "{name: 'toymodel:StopAfterEpoch', epoch: 0}")])
    saved = load(stopped.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == EPOCH and saved["loops"]["fit_loop"]["epoch_progress"]["current"]["completed"] == 1
    kill = callbacks(recipe, f"{{name: 'toymodel:KillAt', step: {KILL_AT}}}")
    p = subprocess.run([sys.executable, "-m", "zoo.train", *opts, f"run_dir={folder}", "ckpt_path=last", kill],
                       env=subprocess_env(), capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == -9, p.stderr[-3000:]
    saved = load(stopped.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == SAVE_AT and saved["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    resumed = train([*opts, f"run_dir={folder}", "ckpt_path=last", callbacks(recipe)])
    assert resumed.run_dir == stopped.run_dir
    return resumed.run_dir


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_stopped_killed_and_resumed_run_ends_as_the_straight_one(case, tmp_path):
    recipe = recipe_of(case)
    data = REAL_DATA[recipe](tmp_path) if recipe in REAL_DATA else []
    opts = [f"recipe={recipe}", *COMMON, *data, *CASES[case]]
    straight = train([*opts, f"run_dir={tmp_path}/straight", callbacks(recipe)])
    compare(straight.run_dir, run_in_parts(opts, recipe, tmp_path / "parts"))
