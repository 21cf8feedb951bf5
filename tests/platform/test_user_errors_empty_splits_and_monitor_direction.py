"""User mistakes around the splits and the monitored metric: a test or a validation left
empty where the run relies on it, a best checkpoint or early stopping judged in the wrong direction (a
loss maximised), early stopping on a run shorter than an epoch, and an override given twice. A mistake is
one message, exit status 2, no traceback and no run folder; a legitimate wish runs and says what it did."""

import re

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import assert_refused, run_main

QUICK = ["trainer.max_steps=3", "test_after_fit=false", "trainer.enable_progress_bar=false",
         "trainer.enable_model_summary=false"]


# ---- a test or a validation left empty where the run relies on it ------------------------------------------
@pytest.mark.parametrize("overrides, expected", [
    # else trains for 150 epochs, tests nothing and writes metrics.json as {}, exit 0
    (["trainer.limit_test_batches=0"], r"trainer.limit_test_batches=0 tests nothing, so metrics.json would be "
                                       r"empty: to train without testing, set test_after_fit=false"),
    (["trainer.limit_test_batches=0.0"], r"trainer.limit_test_batches=0.0 tests nothing"),
    # not "missing 1 required positional argument: 'monitor'"; with a monitor, Lightning's
    # "Early stopping conditioned on metric `val/loss` which is not available", once the data is built
    (["callbacks=[early_stopping]", "trainer.limit_val_batches=0"],
     r"callback 'early_stopping' watches val/loss, a validation metric, but trainer.limit_val_batches=0 turns "
     r"validation off, so it could never stop the run: leave trainer.limit_val_batches out .* or drop the callback"),
    # else 3 epochs without validating, and the early stopping never looks
    (["callbacks=[{name: early_stopping, monitor: val/loss}]", "trainer.max_epochs=3",
      "trainer.check_val_every_n_epoch=5"],
     r"trainer.check_val_every_n_epoch=5 with trainer.max_epochs=3 never validates, .* lower "
     r"trainer.check_val_every_n_epoch to 3 or less"),
    # else no best checkpoint, Lightning warning "could not find the monitored key" at every epoch end
    (["checkpoint.monitor=val/rec", "trainer.limit_val_batches=0.0"],
     r"checkpoint.monitor=val/rec chooses the best checkpoint by a validation metric, but "
     r"trainer.limit_val_batches=0.0 turns validation off: .* or leave checkpoint.monitor out"),
])
def test_a_test_or_validation_the_run_relies_on_left_empty_is_refused(overrides, expected, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "print_config=true", *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_a_run_without_a_test_says_so(tmp_path, capsys):
    # the way the refusal above names: else it trains and prints its run folder only, no word that nothing was tested
    from zoo.train import main

    assert main(["recipe=vae_digits", f"run_dir={tmp_path}", "trainer.limit_test_batches=0", *QUICK]) == 0
    out = capsys.readouterr()
    run = next(tmp_path.glob("vae_digits/*"))
    end = out.out.splitlines()[-4:]  # after the run's lines (zoo/callbacks/runlog.py)
    assert [end[0], *end[2:]] == [f"run folder: {run}",
                                  "  best checkpoint: none saved (by val/loss): val/loss was never logged",
                                  "  not tested (test_after_fit=false): python -m zoo.evaluate "
                                  f"{run / 'checkpoints' / 'last.ckpt'} tests it"], out
    assert (run / "checkpoints" / "last.ckpt").is_file() and not (run / "metrics.json").exists()


def test_a_test_fraction_that_keeps_no_batch_is_one_message_and_the_run_is_kept(tmp_path, capsys):
    # not a MisconfigurationException traceback after training ("0.001 * 1 < 1"), exit 1
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}", "trainer.limit_test_batches=0.001",
                          *QUICK[:1], *QUICK[2:]], capsys)
    run = next(tmp_path.glob("vae_digits/*"))
    assert code == 2 and "Traceback" not in err, err
    message = "error: " + err.split("\nerror: ")[-1]  # the error and its details, after the run's own lines
    assert message.startswith("error: invalid settings: You requested to check 0.001 of the `test_dataloader`"), err
    assert "the trained run is kept" in message and f"\n  run folder: {run}\n" in message, err
    assert f"\n  python -m zoo.evaluate {run}/checkpoints/last.ckpt" in message, err
    assert (run / "checkpoints" / "last.ckpt").is_file() and not (run / "metrics.json").exists()


def test_validation_off_says_that_no_best_checkpoint_is_chosen(tmp_path, capsys):
    # else no best checkpoint (Lightning warns "could not find the monitored key" at each
    # epoch end, in a warning pytest keeps from stderr)
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}", "trainer.limit_val_batches=0",
                          "trainer.max_epochs=2", "checkpoint.every_n_epochs=1", *QUICK[1:]], capsys)
    assert code == 0, err
    assert ("note: trainer.limit_val_batches=0 turns validation off, so no best checkpoint is chosen (by val/loss); "
            "last.ckpt is saved as usual") in err.splitlines(), err
    run = next(tmp_path.glob("vae_digits/*"))
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["last.ckpt"]


# ---- the direction of a monitored metric ---------------------------------------------------------------------
@pytest.mark.parametrize("recipe, overrides, expected", [
    # else the "best" checkpoint kept is the one with the highest loss
    ("vae_digits", ["checkpoint.mode=max"],
     r"checkpoint.mode=max keeps the checkpoint with the highest val/loss, but val/loss is a loss \(lower is better\), "
     r"so the 'best' checkpoint would be the worst: use checkpoint.mode=min \(or leave it out: the model's own is min"),
    ("vae_digits", ["checkpoint.monitor=val/iwae_nll", "checkpoint.mode=max"],
     r"highest val/iwae_nll, but val/iwae_nll is a loss .* use checkpoint.mode=min$"),
    ("ood_digits_ce", ["checkpoint.mode=min"], r"the lowest val/acc, but val/acc is a score where higher is better"),
    # the text SeqGAN's own metric is BLEU-3 (max), set when the model is built from the data
    ("seqgan_text", ["checkpoint.mode=min"], r"the lowest val/bleu3, but val/bleu3 is a score where higher is better"),
    # else a loss judged by the model's own mode for its metric (skip-gram's Spearman, max)
    ("skipgram_synthetic", ["checkpoint.monitor=val/loss"],
     r"checkpoint.monitor=val/loss is a loss \(lower is better\), but the best checkpoint is chosen by the model's "
     r"mode, max \(for its own metric val/spearman\), .* add checkpoint.mode=min"),
    # else the run stops as soon as the loss stops rising (or, for an accuracy, falling: Lightning's default)
    ("vae_digits", ["callbacks=[{name: early_stopping, monitor: val/loss, mode: max}]"],
     r"callback 'early_stopping' watches val/loss, a loss \(lower is better\), with mode max \(it would stop the run "
     r"when val/loss stops rising\): give it mode: min, e.g. callbacks=\[\{name: early_stopping, monitor: val/loss, "
     r"mode: min\}\]"),
    ("ood_digits_ce", ["callbacks=[{name: early_stopping, monitor: val/acc}]"],
     r"watches val/acc, a score where higher is better, with mode min .* give it mode: max"),
    # Lightning's class by dotted path, known for early stopping from its source
    ("ood_digits_ce", ["callbacks=[{name: 'lightning.pytorch.callbacks:EarlyStopping', monitor: val/acc}]"],
     r"watches val/acc, a score where higher is better, with mode min .* give it mode: max"),
])
def test_a_metric_judged_in_the_wrong_direction_is_refused(recipe, overrides, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_a_direction_is_judged_only_where_the_name_makes_it_certain():
    from zoo.config import load_config
    from zoo.monitoring import metric_direction

    assert [metric_direction(n) for n in ("val/loss", "val/nll_oracle", "test/iwae_nll", "train/objective_loss",
                                          "val/acc", "val/bleu4", "val/spearman", "val/return", "val/kl",
                                          "val/loss_acc")] == ["min", "min", "min", "min", "max", "max", None, None,
                                                               None, None]
    load_config("seqgan_text", ["checkpoint.mode=max"])  # its own metric, val/bleu3
    load_config("seqgan_oracle_small", ["checkpoint.mode=min"])  # val/nll_oracle
    load_config("skipgram_synthetic", ["checkpoint.monitor=val/spearman", "checkpoint.mode=min"])  # not certain
    load_config("vae_digits", ["callbacks=[{name: early_stopping, monitor: val/rec, mode: max}]"])


# ---- early stopping on a run shorter than an epoch -----------------------------------------------------------
@pytest.mark.parametrize("callbacks", [
    "callbacks=[early_stopping]",  # not "missing 1 required positional argument: 'monitor'"
    # not Lightning's "Early stopping conditioned on metric `val/loss` which is not available" (no validation ran)
    "callbacks=[{name: early_stopping, monitor: val/loss}]",
])
def test_early_stopping_on_a_run_shorter_than_an_epoch_runs_and_says_it_never_checked(callbacks, tmp_path, capsys):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}", callbacks, *QUICK], capsys)
    assert code == 0 and "error" not in err, err
    assert ("note: early stopping never checked val/loss: the run ended (at step 3) before its first validation"
            in err.splitlines()), err
    assert next(tmp_path.glob("vae_digits/*/checkpoints/last.ckpt")).is_file()


def test_early_stopping_watches_the_models_own_metric_by_default():
    import torch

    from zoo.callbacks.named import build_callbacks

    class Model:
        monitor, monitor_mode = "val/acc", "max"

    stopper, = build_callbacks(["early_stopping"])  # refused: EarlyStopping needs a monitor
    stopper.setup(type("Trainer", (), {"val_check_interval": 1.0, "check_val_every_n_epoch": 1})(), Model(), "fit")
    assert (stopper.monitor, stopper.mode, stopper.monitor_op, float(stopper.best_score)) == \
        ("val/acc", "max", torch.gt, float("-inf"))
    given, = build_callbacks([{"name": "early_stopping", "monitor": "val/loss", "min_delta": 0.1}])
    given.setup(type("Trainer", (), {"val_check_interval": 1.0, "check_val_every_n_epoch": 1})(), Model(), "fit")
    assert (given.monitor, given.mode, given.min_delta) == ("val/loss", "min", -0.1)  # as Lightning's


# ---- an override given twice ------------------------------------------------------------------------------------
def test_an_override_given_twice_is_noted_and_the_last_wins(tmp_path, capsys):
    # else the last wins without a word
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}", "model.lr=1e-3", "model.lr=1e-2",
                          "seed=3", "seed=3", *QUICK], capsys)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:") and "first validation" not in line]
    assert notes == ["note: model.lr given twice; using model.lr=1e-2 (the last)"], err  # seed=3 twice: the same
    config = next(tmp_path.glob("vae_digits/*/config.yaml")).read_text()
    assert "lr: 0.01" in config, config


def test_zoo_evaluate_notes_an_override_given_twice(capsys):
    # zoo.evaluate notes it, as zoo.train does
    from zoo.evaluate import main

    code = main(["vae-digits", "trainer.limit_test_batches=1", "trainer.limit_test_batches=2", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert ("note: trainer.limit_test_batches given twice; using trainer.limit_test_batches=2 (the last)"
            in out.err.splitlines()), out.err
    # a mistake stays the only line, as in zoo.train
    assert main(["vae-digits", "data.batch_size=1", "data.batch_size=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: 'batch_size'"), err


# ---- overrides given twice, callback mappings, thread counts ----------------------------------------------------
def test_a_callback_mapping_without_spaces_gets_the_yaml_hint(tmp_path, capsys):
    # not "needs a 'name'" alone: YAML reads {name:early_stopping} as one key with no value
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs",
                          "callbacks=[{name:early_stopping,monitor:val/loss}]"], capsys)
    assert_refused(code, err, r"YAML reads 'name:early_stopping' as one key because no space follows its colon, "
                   r"write \{name: early_stopping, monitor: val/loss\}$", tmp_path / "runs")


def test_a_run_shorter_than_its_first_validation_says_no_best_checkpoint_was_chosen(tmp_path, capsys):
    # else the run keeps last.ckpt and no best checkpoint, and says nothing of it
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}", *QUICK], capsys)
    assert code == 0, err
    assert ("note: the run ended (at step 3) before its first validation, so no best checkpoint was chosen by "
            "val/loss; last.ckpt was saved") in err.splitlines(), err
    run = next(tmp_path.glob("vae_digits/*"))
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["last.ckpt"]


@pytest.mark.parametrize("value", ["abc", "0", "1.5", "-1"])
def test_a_thread_count_openmp_cannot_read_is_one_message(value, tmp_path, capsys, monkeypatch):
    # else libgomp's "Invalid value for environment variable OMP_NUM_THREADS" (two lines, before anything else),
    # then the run goes on with its own default
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "print_config=true"], capsys)
    assert_refused(code, err, rf"OMP_NUM_THREADS='{re.escape(value)}' is not a number of threads: set it to a whole "
                   r"number >= 1 \(e.g. OMP_NUM_THREADS=1\), or unset it", tmp_path / "runs")


@pytest.mark.parametrize("value", ["2", " 1 ", "4,2", ""])
def test_a_thread_count_openmp_reads_is_accepted(value, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "print_config=true"], capsys)
    assert code == 0 and "error" not in err, err


def test_print_config_notes_an_override_given_twice(capsys):
    # else the config shows 0.01 without a word of the 1e-3 given first
    code, err = run_main(["recipe=vae_digits", "model.lr=1e-3", "model.lr=1e-2", "print_config=true"], capsys)
    assert code == 0 and err.splitlines() == ["note: model.lr given twice; using model.lr=1e-2 (the last)"], err
