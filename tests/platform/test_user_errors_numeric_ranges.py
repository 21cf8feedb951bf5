"""Numbers out of range and the mistakes that surface late in a run: out-of-range numbers
that overflow inside torch or the OS, a run that diverges into a traceback, a resume with another
estimator, Lightning's refusals of trainer settings once training or testing runs, options of nested
sections, callback options torch refuses, a mistyped monitored metric. Each is one message, no
traceback, and no run folder left behind."""

from pathlib import Path

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import one_message, run_main

FAST = ["trainer.fast_dev_run=true", "trainer.enable_progress_bar=false"]


def assert_refused(code: int, err: str, expected: str, runs: Path) -> None:
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert "error: " in err and one_message(err[err.rindex("error: "):]), err  # the run's lines, then the error
    assert not runs.exists() or not any(runs.iterdir()), "nothing written for a refused run"


@pytest.mark.parametrize("override, expected", [
    ("model.lr=1e300", "'lr' in recipe"),  # else float32 overflows inside Adam, after the run folder
    ("data.seed=99999999999999999999", "'seed' in recipe"),  # else numpy's seed overflows in the datamodule
    ("threads=99999999999", "CPU cores here"),  # else torch.set_num_threads overflows
    ("data.num_workers=99999999999", "CPU cores here"),  # else workers fork until killed
    ("trainer.max_steps=3 trainer.val_check_interval=1000", "trainer.val_check_interval"),  # Lightning, in fit
])
def test_out_of_range_numbers_are_refused_before_the_run(override, expected, tmp_path, capsys):
    extra = override.split() if "val_check" in override else [*FAST, override]
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", *extra], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_every_integer_and_float_option_keeps_within_what_it_feeds():
    from dataclasses import dataclass

    from zoo.errors import UserError
    from zoo.schema import FLOAT_MAX, INT_MAX, SEED_MAX, validate

    @dataclass
    class Opts:
        size: int = 3
        rate: float = 0.1
        eval_seed: int = 0

    assert validate(Opts, {"size": INT_MAX, "rate": FLOAT_MAX, "eval_seed": SEED_MAX}, "t")["eval_seed"] == SEED_MAX
    for key, value in (("size", INT_MAX + 1), ("rate", 1e39), ("eval_seed", SEED_MAX + 1)):
        with pytest.raises(UserError, match=f"'{key}' in t"):
            validate(Opts, {key: value}, "t")


@pytest.mark.parametrize("override, expected", [
    ("data.amplitude=[5,0.1]", "'amplitude' in recipe .* must be a pair \\[low, high\\] with low <= high"),
    ("data.x_range=[1e400,2]", "'x_range' in recipe .* must be a finite number"),
    ("data.amplitude=[-1,5]", "'amplitude' in recipe .* must be >= 0"),
])
def test_a_pair_option_is_checked_at_both_ends_and_in_order(override, expected, tmp_path, capsys):
    # OmegaConf 2.4 keeps tuple[float, float] options as tuples (2.3 gives lists): both are checked, at
    # both ends and in order; uniform_(hi, lo) would end in torch's traceback after the run folder is written
    import re

    code, err = run_main(["recipe=maml_sinusoid", f"run_dir={tmp_path}/runs", *FAST, override], capsys)
    assert_refused(code, err, "error: ", tmp_path / "runs")
    assert re.search(expected, err), err


def test_a_pair_option_may_be_negative_where_declared_signed():
    from zoo.errors import UserError
    from zoo.models.maml.data import SinusoidConfig
    from zoo.schema import validate

    assert validate(SinusoidConfig, {"x_range": [-3.0, -1.0]}, "t")["x_range"] in ([-3.0, -1.0], (-3.0, -1.0))
    with pytest.raises(UserError, match="'x_range' in t must be a pair"):
        validate(SinusoidConfig, {"x_range": [1.0, -1.0]}, "t")


def test_a_nested_section_is_range_checked_and_named_in_full(tmp_path, capsys):
    code, err = run_main(["recipe=ood_toy2d", f"run_dir={tmp_path}/runs", *FAST, "model.classifier_optim.beta1=1.5"],
                         capsys)
    assert_refused(code, err, "'classifier_optim.beta1' in recipe", tmp_path / "runs")
    code, err = run_main(["recipe=ood_toy2d", f"run_dir={tmp_path}/runs", *FAST, "model.odin_temperatures=[a,b]"],
                         capsys)
    assert_refused(code, err, "'odin_temperatures[0]'", tmp_path / "runs")
    for temperatures in ("[0,-1]", "[0]"):  # one message says "> 0" for both
        code, err = run_main(["recipe=ood_toy2d", f"run_dir={tmp_path}/runs", *FAST,
                              f"model.odin_temperatures={temperatures}"], capsys)
        assert_refused(code, err, "must be > 0, got [0.0", tmp_path / "runs")


def test_a_callback_option_torch_refuses(tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", *FAST,
                          "callbacks=[{name: ema, device: banana}]"], capsys)
    assert_refused(code, err, "callback 'ema'", tmp_path / "runs")


def test_a_diverged_run_says_so_without_a_traceback(tmp_path, capsys):
    """lr 1e30: the first update makes the weights NaN, and the next forward pass builds a Normal from
    them (torch.distributions refuses it) before the non-finite-loss guard sees a loss."""
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1",
                          "trainer.enable_progress_bar=false", "model.lr=1e30"], capsys)
    assert code == 1 and "Traceback" not in err, err
    assert "non-finite" in err and "diverged before its first checkpoint" in err and "model.lr" in err
    assert "options changed from the recipe" not in err  # model.lr is named by the usual fix already
    assert not (tmp_path / "runs").exists()


def test_resuming_with_another_estimator_is_refused(tmp_path, capsys):
    code, _ = run_main(["recipe=dvae_digits", f"run_dir={tmp_path}/base", "trainer.max_steps=2",
                        "test_after_fit=false", "trainer.enable_progress_bar=false"], capsys)
    assert code == 0
    ckpt = next((tmp_path / "base").glob("dvae_digits/*/checkpoints/last.ckpt"))
    code, err = run_main(["recipe=dvae_digits_reinforce", f"run_dir={tmp_path}/runs", "trainer.max_steps=4",
                          f"ckpt_path={ckpt}"], capsys)
    assert_refused(code, err, "does not fit the model this recipe builds", tmp_path / "runs")
    assert "estimator.baseline" in err and "estimator.step_count" in err  # what is missing, what is extra
    assert "model.estimator: " in err and "there" in err and "here" in err  # and the option that made it so


def test_evaluate_refuses_a_test_split_limited_to_nothing(capsys):
    from zoo.evaluate import main

    for option, expected in (("trainer.limit_test_batches=0", "no test batch was evaluated"),
                             ("trainer.limit_test_batches=0.0001", "limit_test_batches")):
        code = main(["vae-digits", option, "data.eval_batch_size=1"])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_mistyped_monitor_is_named_with_what_the_model_logs(tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_epochs=1",
                          "trainer.limit_train_batches=2", "trainer.enable_progress_bar=false",
                          "test_after_fit=false", "checkpoint.monitor=val/los"], capsys)
    assert code == 0  # the run itself is fine; it just has no best checkpoint
    warnings = [line for line in err.splitlines() if line.startswith("warning: checkpoint.monitor='val/los'")]
    assert len(warnings) == 2 and "did you mean: val/loss" in warnings[0] and "no best checkpoint" in warnings[1]
    assert [p.name for p in (tmp_path / "runs").glob("vae_digits/*/checkpoints/*.ckpt")] == ["last.ckpt"]


def test_a_batch_larger_than_the_data_is_the_only_line_printed(tmp_path):
    """Found when the training loader is made, before Lightning's device lines, model summary and
    sanity-check bar. A subprocess: Lightning's log handler writes to the real stderr."""
    import subprocess
    import sys

    from platform_testlib import subprocess_env

    proc = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=vae_digits", f"run_dir={tmp_path}/runs",
                           "data.batch_size=5000"], capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert_refused(proc.returncode, proc.stderr, "data.batch_size=5000 is larger than the 1257", tmp_path / "runs")
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and not proc.stdout.strip(), proc.stderr


RANGES = [
    # each a field's own range or choice, declared once on the field (no __post_init__ says it again)
    ("maml_sinusoid", "model.path=fast", "'path' in recipe {} [model: maml] must be one of ['auto', 'batched', "
     "'vmap_grad', 'loop'], got 'fast'"),
    ("maml_sinusoid", "model.inner_steps=-1", "'inner_steps' in recipe {} [model: maml] must be >= 0, got -1"),
    ("maml_nav2d", "model.trajectories=1", "'trajectories' in recipe {} [model: maml_rl] must be >= 2 (the "
     "leave-one-out baseline), got 1"),
    ("seqgan_oracle_small", "model.rollout_keep=1.5", "'rollout_keep' in recipe {} [model: seqgan] must be <= 1"),
    ("seqgan_oracle_small", "data.vocab_size=1", "'vocab_size' in recipe {} [data: seqgan_oracle] must be >= 2"),
    ("seqgan_text", "data.max_len=1", "'max_len' in recipe {} [data: seqgan_text] must be >= 2 (a word and [EOS])"),
    ("seqgan_text", "data.val_fraction=0", "'val_fraction' in recipe {} [data: seqgan_text] must be > 0, got 0"),
    ("dvae_digits", "model.n_classes=1", "'n_classes' in recipe {} [model: dvae] must be >= 2, got 1"),
    # a rule of two fields together: the options' __post_init__
    ("seqgan_text", "data.val_fraction=0.5 data.test_fraction=0.5", "val_fraction + test_fraction must be below 1"),
    ("seqgan_oracle_small", "data.num_train=8 data.batch_size=16", "num_train (8) must be >= batch_size (16)"),
]


@pytest.mark.parametrize("recipe, override, expected", RANGES, ids=[f"{r}:{o}" for r, o, _ in RANGES])
def test_a_range_is_refused_once_by_its_field_in_one_message(recipe, override, expected):
    from zoo.config import load_config
    from zoo.errors import UserError
    from zoo.recipe_files import find_recipe

    with pytest.raises(UserError) as err:
        load_config(recipe, override.split())
    assert expected.format(find_recipe(recipe)) in str(err.value), str(err.value)
