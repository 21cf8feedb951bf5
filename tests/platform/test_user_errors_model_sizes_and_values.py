"""User mistakes in sizes and values: values OmegaConf accepts but the model cannot use. Sizes that
would hang or run out of memory (a caption beam of 100000, 10**8 decoding or adaptation steps, a
rollout horizon of 10**8, more shapes than a scene's captions name), a goal range that would overflow
the rewards. Each is one message, exit status 2, no traceback, and no run folder left behind."""


import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import assert_refused, run_main


@pytest.mark.parametrize("recipe, override, expected", [
    # 100000 beams would run until the kernel kills the process (predict's beam= has the same bound)
    ("sat_shapes_soft", "model.beam_size=100000", "'beam_size' in recipe .* must be <= 100, got 100000"),
    ("sat_shapes_soft", "model.max_decode_len=100000000", "'max_decode_len' in recipe .* must be <= 1000"),
    # the scene sampler would loop forever placing 100 shapes, and captions name at most 3 of them
    ("sat_shapes_soft", "data.max_objects=4", "'max_objects' in recipe .* must be <= 3 .*at most 3 objects"),
    ("maml_sinusoid", "model.inner_steps=100000000", "'inner_steps' in recipe .* must be <= 1000"),  # else hangs
    ("maml_sinusoid", "model.eval_inner_steps=100000000", "'eval_inner_steps' in recipe .* must be <= 1000"),
    ("maml_nav2d", "model.horizon=100000000", "'horizon' in recipe .* must be <= 10000"),  # one Python step each
    ("maml_nav2d", "model.eval_steps=100000000", "'eval_steps' in recipe .* must be <= 1000"),
    # else exit status 1: "the training loss became non-finite ... a lower model.lr is the usual fix"
    ("maml_nav2d", "data.goal_range=1e30", "'goal_range' in recipe .* must be <= 1000 .*0.1 a step"),
])
def test_sizes_that_hung_or_overflowed_are_refused_with_the_config(recipe, override, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", override], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_the_bounds_keep_the_recipes_and_the_paper_settings():
    from zoo.config import load_config

    for recipe in ("sat_shapes_soft", "sat_coco", "maml_sinusoid", "maml_nav2d"):
        load_config(recipe, [])
    cfg = load_config("maml_nav2d", ["model.horizon=10000", "model.eval_steps=1000", "data.goal_range=1000"])
    assert cfg["model"]["horizon"] == 10000 and cfg["data"]["goal_range"] == 1000
    assert load_config("sat_shapes_soft", ["model.beam_size=100", "data.max_objects=1"])["data"]["max_objects"] == 1


@pytest.mark.parametrize("recipe, overrides, expected", [
    # every phase 0: the run would save an untrained generator and exit 0
    ("seqgan_oracle_small", ["model.mle_epochs=0", "model.d_pretrain_rounds=0", "model.adv_iterations=0"],
     "the seqgan schedule trains nothing"),
    ("seqgan_oracle_small", ["data.vocab_size=1"], "'vocab_size' in recipe .* must be >= 2"),  # one sequence only
    # lr * max(ratio, 1 - progress): 5 would train at 5 x lr throughout
    ("skipgram_synthetic", ["model.min_lr_ratio=5"], "'min_lr_ratio' in recipe .* must be <= 1"),
    # max_vocab 0 would keep every word; 1 fails only after the corpus is generated and cached
    ("skipgram_synthetic", ["data.max_vocab=0"], "'max_vocab' in recipe .* must be >= 2"),
    ("skipgram_synthetic", ["data.sample=5"], "'sample' in recipe .* must be < 1"),  # before the cache too
    # 0 would mean None (as many negatives as training sequences)
    ("seqgan_oracle_small", ["model.num_negatives=0"], "'num_negatives' in recipe .* must be >= 1"),
])
def test_values_meaningless_for_the_model_are_refused_with_the_config(recipe, overrides, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_a_large_noise_power_keeps_the_noise_distribution():
    """count^1000 overflows float64: q would be NaN, and the alias table would draw every word alike."""
    import torch

    from zoo.models.skipgram.sampling import noise_distribution

    counts = torch.tensor([1000.0, 10.0, 3.0, 0.0], dtype=torch.float64)
    assert noise_distribution(counts, 1000.0).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert noise_distribution(counts, 0.75).tolist() == (counts**0.75 / (counts**0.75).sum()).tolist()


@pytest.mark.parametrize("recipe, overrides, expected", [
    # Lightning stops at max_epochs and exits 0, whatever min_epochs asks for
    ("vae_digits", ["trainer.min_epochs=10", "trainer.max_epochs=2"], "min_epochs=10 is above trainer.max_epochs=2"),
    ("vae_digits", ["trainer.min_steps=10", "trainer.max_steps=2"], "min_steps=10 is above trainer.max_steps=2"),
    # no checkpoint at all, not even last.ckpt: the run could be neither evaluated nor resumed
    ("vae_digits", ["checkpoint.every_n_epochs=0"], "'every_n_epochs' in recipe .* must be > 0"),
])
def test_conflicting_or_empty_settings_are_refused_with_the_config(recipe, overrides, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", *overrides], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_an_empty_val_similarity_is_refused_before_the_corpus_is_cached(tmp_path, capsys):
    code, err = run_main(["recipe=skipgram_lee", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                          "data.val_similarity=[]", "trainer.fast_dev_run=true"], capsys)
    assert_refused(code, err, "data.val_similarity is empty", tmp_path / "runs")
    assert not (tmp_path / "data" / "skipgram_cache").exists()  # not left behind, encoded


def test_a_malformed_test_similarity_file_is_refused_before_training(tmp_path, capsys):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\n")  # no score: found before training, not by the test stage after the whole run
    code, err = run_main(["recipe=skipgram_lee", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                          f"data.test_similarity=[{bad}]", "trainer.fast_dev_run=true"], capsys)
    assert_refused(code, err, "bad.tsv:1: expected 'word1 word2 score'", tmp_path / "runs")


def test_a_cnn_too_deep_for_the_image_is_refused_before_the_run(tmp_path, capsys):
    # a 1x1 grid: one location, so the attention has nothing to choose
    code, err = run_main(["recipe=sat_shapes_soft", f"run_dir={tmp_path}/runs", "trainer.fast_dev_run=true",
                          "data.n_train=64", "data.n_val=16", "data.n_test=16", "model.cnn_stages=6"], capsys)
    assert_refused(code, err, r"cnn_stages=6 leaves a 1x1 grid of a 64-px image.*\(cnn_stages <= 5 here\)",
                   tmp_path / "runs")


def test_min_epochs_may_stay_below_an_unbounded_max():
    from zoo.config import load_config

    assert load_config("vae_digits", ["trainer.min_epochs=10", "trainer.max_epochs=-1"])["trainer"]["min_epochs"] == 10
    assert load_config("vae_digits", ["trainer.min_steps=3"])["trainer"]["min_steps"] == 3


@pytest.mark.parametrize("argv, expected", [
    (["n=100000000"], "'n' in seqgan (zoo.predict) must be <= 100000 (the recipes evaluate on 10,000), "
     "got 100000000"),  # else samples past a minute
    (["method=sbs", "k=100000000"], "'k' in seqgan (zoo.predict) must be <= 100 (a printed line each), "
     "got 100000000"),  # the beam search too
])
def test_seqgan_predict_sizes_are_bounded(argv, expected, capsys):
    from zoo import predict

    assert predict.main(["seqgan-oracle-small", *argv]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"error: {expected}" and not out.out, out


@pytest.mark.parametrize("theta", ["1e40", "1e8", "-1e20"])
def test_estimators_compare_refuses_a_theta_float32_cannot_draw_around(theta, tmp_path, capsys, monkeypatch):
    """In float32, 1e40 overflows (a RuntimeError), 1e8 makes every score-function estimate 0, and
    1e20 gives a table of nan."""
    from zoo.estimators.__main__ import main as estimators_main

    monkeypatch.chdir(tmp_path)  # where the default --out would be written
    assert estimators_main(["compare", "--draws", "10", f"--theta={theta}"]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --theta must be a finite number from -100000 to 100000")
    assert not out.out and not any(tmp_path.iterdir()), out


def test_a_stateful_callback_listed_twice_is_one_message(tmp_path, capsys):
    # not Lightning's RuntimeError while the Trainer is built (a traceback, exit status 1)
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.fast_dev_run=true",
                          "callbacks=[ema, ema]"], capsys)
    assert_refused(code, err, "callbacks: Found more than one stateful callback of type `EMAWeights`: list it once",
                   tmp_path / "runs")
